"""The one reader of supplied files and the one glob compiler, and the settings that reach them."""

from __future__ import annotations

import fnmatch
import json
import math
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from skillindex import inputs
from skillindex.cli import cli
from skillindex.config import Environment, load_settings
from skillindex.errors import ConfigError
from skillindex.inputs import InputError, compile_glob
from tests.conftest import isolate_cli, write_skill
from tests.fuzzing import examples


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Reads PDF files.")
    isolate_cli(tmp_path, monkeypatch, root)
    return tmp_path / "config.toml"


def run_list(settings: Path) -> Result:
    """`list` with `settings` as its settings file, run in a thread so that a reader blocked
    on a FIFO is released (and the test fails) instead of hanging the suite."""
    outcome: list[Result] = []
    worker = threading.Thread(target=lambda: outcome.append(CliRunner().invoke(
        cli, ["--config", str(settings), "list"], catch_exceptions=False)), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        os.close(os.open(settings, os.O_WRONLY))  # the writer's end: the reader sees EOF
        worker.join()
        pytest.fail(f"reading {settings} blocked")
    return outcome[0]


def one_settings_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("skillindex: error: ")
    return line


def test_settings_nested_beyond_the_bound_are_a_settings_error(config: Path) -> None:
    config.write_text("[skills]\nignored_skills = " + "[" * 1000 + "]" * 1000 + "\n")
    assert "nests deeper than 64 levels" in one_settings_error(run_list(config))


def test_settings_nested_by_dotted_keys_are_a_settings_error(config: Path) -> None:
    config.write_text("a." * 2000 + "b = 1\n")
    assert "nests deeper than 64 levels" in one_settings_error(run_list(config))


def test_a_fifo_as_settings_is_refused_without_waiting(config: Path) -> None:
    fifo = config.with_name("settings.fifo")
    os.mkfifo(fifo)
    assert "not a regular file (a FIFO)" in one_settings_error(run_list(fifo))


def test_a_device_as_settings_is_refused() -> None:
    assert "a character device" in one_settings_error(run_list(Path("/dev/zero")))


def test_a_folder_as_settings_is_refused(config: Path) -> None:
    assert "a folder" in one_settings_error(run_list(config.parent))


@pytest.mark.parametrize(("kind", "said"), [
    ("socket", "a socket"), ("link-to-a-device", "a character device"),
    ("dangling-link", "settings file not found")])
def test_other_special_settings_files_are_settings_errors(config: Path, kind: str,
                                                          said: str) -> None:
    path = config.with_name("special")
    if kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        path.symlink_to("/dev/zero" if kind == "link-to-a-device" else "nowhere")
    assert said in one_settings_error(run_list(path))


def test_settings_larger_than_the_bound_are_refused(config: Path) -> None:
    config.write_text("# " + "x" * inputs.MAX_SETTINGS_BYTES + "\n")
    assert "larger than 1,048,576 bytes" in one_settings_error(run_list(config))


@pytest.mark.parametrize("key", ["catalog.manual_only", "catalog.pinned", "ignored_skills",
                                 "include_skills"])
def test_a_glob_longer_than_the_bound_is_a_settings_error(config: Path, key: str) -> None:
    # 20,000 `[` once kept `list` busy for 25 s (fnmatch looks for each `]` to the end).
    config.write_text(config.read_text().replace(
        "[skills]", f'[skills]\n{key} = ["' + "[" * 20_000 + '"]'))
    assert "longer than 512" in one_settings_error(run_list(config))


def test_a_glob_at_the_bound_still_filters(config: Path) -> None:
    glob = "p" + "[" * (inputs.MAX_GLOB_CHARS - 2) + "*"
    config.write_text(config.read_text().replace("[skills]", f"[skills]\nignored_skills = "
                                                 f"['{glob}', 'p*']"))
    assert CliRunner().invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0
    result = run_list(config)
    assert result.exit_code == 0, result.output
    assert "pdf" not in result.stdout


@pytest.mark.parametrize(("text", "code"), [
    ('{"a": 1, "a": 2}', "duplicate-key"),
    ('{"a": NaN}', "not-finite"),
    ('{"a": -Infinity}', "not-finite"),
    ('{"a": 1e400}', "not-finite"),
    ('{"a": ' + "1" * 5000 + "}", "invalid"),
    ("[" * 65 + "]" * 65, "too-deep"),
    ('{"a": "' + "[" * 100 + '"}', None),
    ("[" * 64 + "]" * 64, None),
], ids=["duplicate", "nan", "infinity", "overflow", "huge-integer", "deep", "brackets-in-a-string",
        "at-the-bound"])
def test_json_of_supplied_files(text: str, code: str | None) -> None:
    if code is None:
        inputs.load_json(text, what="file", finite=True)
        return
    with pytest.raises(InputError) as caught:
        inputs.load_json(text, what="file", finite=True)
    assert caught.value.code == code


@pytest.mark.parametrize(("text", "code"), [
    ("a = " + "[" * 65 + "]" * 65, "too-deep"),
    ("a = " + "{b = " * 65 + "1" + "}" * 65, "too-deep"),
    ("[" + "a." * 70 + "b]\nc = 1", "too-deep"),
    ("a = nan", "not-finite"),
    ('a = """ [[[[ """\nb = \'\'\'{{{{\'\'\'\n# [[[[\nc = 1', None),
], ids=["arrays", "inline-tables", "header", "nan", "brackets-in-strings-and-comments"])
def test_toml_of_supplied_files(text: str, code: str | None) -> None:
    text += "\n" + "# [" * (inputs.MAX_DEPTH + 1) if code is None else ""
    if code is None:
        inputs.load_toml(text, what="file", finite=True)
        return
    with pytest.raises(InputError) as caught:
        inputs.load_toml(text, what="file", finite=True)
    assert caught.value.code == code


def test_yaml_nested_beyond_the_bound_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        inputs.load_yaml("a: " + "[" * 200 + "]" * 200, what="sidecar")
    assert caught.value.code == "too-deep" or "nests deeper" in caught.value.reason


GLOB_CHARS = "ab-]![*?"


@settings(max_examples=examples(500), deadline=None)
@given(st.text(GLOB_CHARS, max_size=12), st.text("ab-]![", max_size=8))
def test_the_glob_compiler_agrees_with_fnmatch(pattern: str, name: str) -> None:
    assert compile_glob(pattern)(name) is fnmatch.fnmatchcase(name, pattern)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(GLOB_CHARS, max_size=inputs.MAX_GLOB_CHARS))
def test_every_glob_within_the_bound_compiles(pattern: str) -> None:
    compile_glob(pattern)("a" * 64)


def test_a_glob_beyond_the_bound_is_refused() -> None:
    with pytest.raises(InputError, match="longer than 512"):
        compile_glob("[" * (inputs.MAX_GLOB_CHARS + 1))


# -- Any settings file: Settings or one ConfigError, never another exception ----------------

TOML_TEXT = st.text(alphabet='[]{}=".,\'#\n abc_-0123456789eEinfa+', max_size=80)
KEYS = st.sampled_from(["skills", "roots", "serve", "index", "catalog", "ignored_skills",
                        "include_skills", "manual_only", "path", "max_file_bytes", "a"])
VALUES = st.recursive(
    st.one_of(st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
              st.text(max_size=6), st.just("[" * 600)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(KEYS, inner, max_size=3)), max_leaves=10)


def toml_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int | str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_of(item) for item in value) + "]"
    return "{" + ", ".join(f"{key} = {toml_of(item)}" for key, item in value.items()) + "}"


def settings_verdict(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.toml"
        path.write_text(text, encoding="utf-8")
        try:
            loaded = load_settings(path, Environment.from_os(cwd=folder, environ={
                "HOME": folder}))
        except ConfigError as exc:
            assert "\n" not in exc.message.strip() or "TOML" in exc.message
            return
        for pattern in (*loaded.ignored_skills, *loaded.include_skills,
                        *loaded.catalog.manual_only):
            compile_glob(pattern)("a-skill")


@settings(max_examples=examples(100), deadline=None)
@given(TOML_TEXT)
def test_any_text_as_settings_is_settings_or_a_settings_error(text: str) -> None:
    settings_verdict(text)


@settings(max_examples=examples(100), deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=4), st.integers(0, 200))
def test_any_document_as_settings_is_settings_or_a_settings_error(
        document: dict[str, Any], levels: int) -> None:
    lines = [f"{key} = {toml_of(value)}" for key, value in document.items()]
    lines.append("[skills]\nignored_skills = " + "[" * levels + '"x"' + "]" * levels)
    settings_verdict("\n".join(lines) + "\n")


def test_the_head_of_a_file_is_read_within_the_bound_and_a_fifo_is_refused(
        tmp_path: Path) -> None:
    big = tmp_path / "SKILL.md"
    big.write_bytes(b"x" * 100_000)
    assert inputs.read_bytes(big, max_bytes=10, what="SKILL.md", head=True) == b"x" * 10
    with pytest.raises(InputError, match="larger than 10 bytes"):
        inputs.read_bytes(big, max_bytes=10, what="SKILL.md")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a FIFO"):
        inputs.read_bytes(fifo, max_bytes=10, what="SKILL.md", head=True)
