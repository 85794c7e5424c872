"""Host files as someone else wrote them: nesting, types, odd numbers, special files; a merge
either keeps every byte it does not own or refuses, and no such file is an internal error."""

from __future__ import annotations

import json
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

from skillindex.cli import cli
from skillindex.serve import hosts
from tests.fuzzing import examples
from tests.test_serve_hosts import HOSTS, JSON_HOSTS, host_file, project, served

__all__ = ["project"]  # the fixture, shared with the module it comes from

SERVER = hosts.ServerCommand("/opt/skillindex/bin/skillindex", ("--cwd", "/work", "serve"))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def refused(result: Result, path: Path) -> str:
    assert result.exit_code == 4, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"skillindex: error: cannot add skillindex to {path}: "), line
    return line


def put(key: str, project: Path, text: str) -> Path:
    path = host_file(key, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_a_null_entry_is_replaced(project: Path, key: str) -> None:
    servers = hosts.HOSTS[key].servers_key
    path = put(key, project, f'{{"{servers}": {{"skillindex": null, "a": {{"command": "a"}}}}}}')
    result = run("hosts", key, "--write")
    assert result.exit_code == 0, result.output
    assert json.loads(run("--json", "hosts", key).stdout)["status"] == "configured"
    assert json.loads(path.read_text(encoding="utf-8"))[servers]["a"] == {"command": "a"}


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_an_http_entry_becomes_ours_and_is_configured(project: Path, key: str) -> None:
    servers = hosts.HOSTS[key].servers_key
    put(key, project, json.dumps({servers: {"skillindex": {
        "type": "http", "url": "https://x/mcp", "headers": {"A": "b"}, "env": {"K": "v"}}}}))
    assert run("hosts", key, "--write").exit_code == 0
    assert json.loads(run("--json", "hosts", key).stdout)["status"] == "configured"
    entry = served(key, json.loads(host_file(key, project).read_text(encoding="utf-8")))
    assert entry["env"] == {"K": "v"} and "url" not in entry and "headers" not in entry


def nested(key: str, levels: int) -> str:
    if hosts.HOSTS[key].toml:
        return "deep = " + "[" * levels + "]" * levels + "\n"
    return '{"deep": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("levels", [500, 1000, 100_000])
@pytest.mark.parametrize("key", HOSTS)
def test_deep_nesting_is_refused_by_every_hosts_command(project: Path, key: str,
                                                        levels: int) -> None:
    path = put(key, project, nested(key, levels))
    before = path.read_bytes()
    listing = {item["host"]: item for item in json.loads(run("--json", "hosts").stdout)}
    assert listing[key]["status"] == "unreadable"
    assert "nests deeper than 64 levels" in listing[key]["detail"]
    assert json.loads(run("--json", "hosts", key).stdout)["status"] == "unreadable"
    assert run("hosts").exit_code == 0
    assert "nests deeper" in refused(run("hosts", key, "--write"), path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(("text", "why"), [
    ('{"a": 1e400}', "not finite"),
    ('{"a": NaN}', "not finite"),
    ('{"a": [Infinity]}', "not finite"),
    ('{"mcpServers": {}, "a": 1, "a": 2}', "the key 'a' twice"),
    ('{"mcpServers": {"x": {}, "x": {"command": "y"}}}', "the key 'x' twice"),
], ids=["overflow", "nan", "infinity", "duplicate", "duplicate-server"])
def test_a_json_file_no_rewrite_could_keep_is_refused(project: Path, text: str,
                                                       why: str) -> None:
    path = put("claude", project, text)
    assert why in refused(run("hosts", "claude", "--write"), path)
    assert path.read_text(encoding="utf-8") == text
    assert json.loads(run("--json", "hosts", "claude").stdout)["status"] == "unreadable"


def test_toml_nan_is_refused(project: Path) -> None:
    path = put("codex", project, "ratio = nan\n")
    assert "not finite" in refused(run("hosts", "codex", "--write"), path)


def in_a_thread(path: Path, *args: str) -> Result:
    """The command, run so that a reader blocked on the FIFO at `path` is released (and the
    test fails) instead of hanging the suite."""
    outcome: list[Result] = []
    worker = threading.Thread(target=lambda: outcome.append(run(*args)), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        os.close(os.open(path, os.O_WRONLY))
        worker.join()
        pytest.fail(f"reading {path} blocked")
    return outcome[0]


def test_a_fifo_is_refused_without_waiting(project: Path) -> None:
    path = host_file("claude", project)
    os.mkfifo(path)
    state = json.loads(in_a_thread(path, "--json", "hosts", "claude").stdout)
    assert (state["status"], state["detail"]) == (
        "unreadable", "the host file is not a regular file (a FIFO); not read")
    assert "not a regular file" in one_line(in_a_thread(path, "hosts", "claude", "--write"))


def test_a_device_is_refused(project: Path) -> None:
    state = json.loads(run("--json", "hosts", "claude", "--file", "/dev/zero").stdout)
    assert state["detail"] == "the host file is not a regular file (a character device); " \
        "not read"
    assert "not a regular file" in one_line(run("hosts", "claude", "--write", "--file",
                                                "/dev/zero"))


def one_line(result: Result) -> str:
    assert result.exit_code == 4, result.output
    [line] = result.stderr.splitlines()
    return line


def test_a_byte_order_mark_and_the_layout_are_kept(project: Path) -> None:
    text = '{ "mcpServers" : { "a" : { "command" : "a" } } ,\n"x": 0.10000000000000000555 }'
    path = host_file("claude", project)
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert run("hosts", "claude", "--write").exit_code == 0
    written = path.read_bytes().decode("utf-8")
    assert written.startswith('\ufeff{ "mcpServers" : { "a" : { "command" : "a" },\n')
    assert written.endswith('} ,\n"x": 0.10000000000000000555 }')


@pytest.mark.parametrize("url", [
    "postgresql://me:secret@db.example/skills",
    "postgresql://me@db.example/skills?password=secret",
    "postgresql://me@db.example/skills?PASSWORD=secret",
    "postgresql://me@db.example/skills?pass%77ord=secret",
    "postgresql://me@db.example/skills?passfile=/home/me/.secret",
    "postgresql://me@db.example/skills?sslmode=require&sslpassword=secret",
], ids=["userinfo", "query", "upper-case", "escaped", "passfile", "sslpassword"])
def test_a_database_password_anywhere_is_refused(project: Path, url: str) -> None:
    result = run("--db", url, "hosts", "claude", "--write")
    assert result.exit_code == 4, result.output
    assert "password" in result.stderr and "secret" not in result.output
    assert not (project / ".mcp.json").exists()


# --- property tests -------------------------------------------------------------------------

# Numbers as people and programs spell them: each must come back byte for byte.
NUMBERS = st.sampled_from(["0", "-0", "1e2", "1E+2", "-1.5e-3", "0.10000000000000000555",
                           "123456789012345678901234567890", "1e308", "2.5"])
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS.map(lambda n: ("number", n)),
                    st.text(max_size=8))


def as_json(value: Any) -> str:
    if isinstance(value, tuple):
        return str(value[1])
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {as_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(as_json(item) for item in value) + "]"
    return json.dumps(value)


DOCUMENTS = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=12)


def write_and_judge(key: str, text: str) -> None:
    """Write into `text` as the host's file: refused with the file untouched, or written
    with every byte kept but our entry's, and configured."""
    host = hosts.HOSTS[key]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "host-file"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            hosts.write(host, path, SERVER, named=True, within=None)
        except hosts.HostFileError:
            assert path.read_bytes() == text.encode("utf-8", "surrogatepass")
            return
        written = path.read_text(encoding="utf-8")
        assert hosts.state(host, path, SERVER).status is hosts.Status.CONFIGURED
        if text.strip() and host.servers_key in json.loads(text) and "skillindex" not in (
                json.loads(text)[host.servers_key] or {}):
            start = written.index('"skillindex": {')
            _, end = json.JSONDecoder().raw_decode(written, start + len('"skillindex": '))
            before = written[:start].rstrip()
            removed = (before[:-1] if before.endswith(",") else before) + written[end:]
            assert json.loads(removed) == json.loads(text)
            assert removed.replace(" ", "").replace("\n", "") == \
                text.replace(" ", "").replace("\n", "")


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(JSON_HOSTS), st.dictionaries(st.text(max_size=6), DOCUMENTS, max_size=4),
       DOCUMENTS, st.booleans())
def test_any_json_host_file_is_kept_or_refused(key: str, others: dict[str, Any],
                                               extra: Any, with_servers: bool) -> None:
    document: dict[str, Any] = {"extra": extra}
    if with_servers:
        document[hosts.HOSTS[key].servers_key] = others
    write_and_judge(key, as_json(document))


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(HOSTS), st.text(alphabet='{}[]":,0123456789.eE+-naNIfity tru\\/*\n',
                                       max_size=60))
def test_any_text_as_a_host_file_is_an_answer(key: str, text: str) -> None:
    host = hosts.HOSTS[key]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "host-file"
        path.write_text(text, encoding="utf-8")
        assert hosts.state(host, path, SERVER).status in set(hosts.Status)
        try:
            hosts.write(host, path, SERVER, named=True, within=None)
        except hosts.HostFileError:
            assert path.read_text(encoding="utf-8") == text
            return
        assert hosts.state(host, path, SERVER).status is hosts.Status.CONFIGURED


@settings(max_examples=examples(20), deadline=None)
@given(st.sampled_from(HOSTS), st.integers(1, 3000), st.sampled_from("[{"))
def test_any_nesting_is_an_answer(key: str, levels: int, bracket: str) -> None:
    toml = hosts.HOSTS[key].toml
    if bracket == "[":
        inner = "[" * levels + "]" * levels
    else:
        inner = ("{a = " if toml else '{"a": ') * levels + "1" + "}" * levels
    if toml:
        _toml_answer(key, f"deep = {inner}\n")
    else:
        write_and_judge(key, f'{{"deep": {inner}}}')


def _toml_answer(key: str, text: str) -> None:
    host = hosts.HOSTS[key]
    raw = text.encode("utf-8")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_bytes(raw)
        hosts.state(host, path, SERVER)
        try:
            hosts.write(host, path, SERVER, named=True, within=None)
        except hosts.HostFileError:
            assert path.read_bytes() == raw
            return
        written = path.read_bytes()
        assert hosts.state(host, path, SERVER).status is hosts.Status.CONFIGURED
        if not text.strip():  # a blank file is made anew
            return
        if b"[mcp_servers.skillindex]" not in raw:
            assert written.startswith(raw)  # the table appended
            return
        # Edited in place: every line but our table's command and args is kept, in order.
        kept = iter(written.splitlines())
        for line in raw.splitlines():
            if not line.startswith((b"command = ", b"args = ")):
                assert any(line == other for other in kept), line


def special(kind: str, path: Path) -> None:
    """Put a file of `kind` at `path`: what a repository or a mistake can leave there."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "folder":
        path.mkdir()
    elif kind == "link-to-a-device":
        path.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        path.symlink_to(path.with_name("nowhere"))


@pytest.mark.parametrize("kind", ["fifo", "socket", "folder", "link-to-a-device",
                                  "dangling-link"])
@pytest.mark.parametrize("key", HOSTS)
def test_a_special_file_is_an_answer_on_every_hosts_command(project: Path, key: str,
                                                            kind: str) -> None:
    path = host_file(key, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    special(kind, path)
    state = json.loads(in_a_thread(path, "--json", "hosts", key).stdout)
    assert state["status"] == ("no file" if kind == "dangling-link" else "unreadable"), state
    assert in_a_thread(path, "hosts").exit_code == 0
    written = in_a_thread(path, "hosts", key, "--write")
    assert written.exit_code == 4, written.output
    assert len(written.stderr.splitlines()) == 1


TOML_NUMBERS = st.sampled_from(["0", "-0", "+1", "1_000", "0x1F", "0o17", "0b101", "1e2",
                                "1E+2", "-1.5e-3", "0.10000000000000000555", "1e308", "1e400",
                                "inf", "-inf", "nan", "9223372036854775807"])
TOML_SCALARS = st.one_of(TOML_NUMBERS, st.booleans().map(lambda b: "true" if b else "false"),
                         st.text(max_size=6).map(json.dumps))
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    st.dictionaries(st.from_regex(r"[a-z_]{1,5}", fullmatch=True), inner, max_size=3).map(
        lambda table: "{" + ", ".join(f"{k} = {v}" for k, v in table.items()) + "}")),
    max_leaves=10)
TABLES = st.dictionaries(st.from_regex(r"[a-z_]{1,5}", fullmatch=True), TOML_VALUES,
                         max_size=4)


@settings(max_examples=examples(60), deadline=None)
@given(TABLES, st.dictionaries(st.sampled_from(["docs", "skillindex", "db"]), TABLES,
                               max_size=2), st.booleans())
def test_any_codex_file_is_kept_or_refused(top: dict[str, str], servers: dict[str, Any],
                                           crlf: bool) -> None:
    lines = [f"{key} = {value}" for key, value in top.items()]
    for name, table in servers.items():
        lines.append(f"\n[mcp_servers.{name}]")
        lines += [f"{key} = {value}" for key, value in table.items()]
    text = "\n".join(lines) + "\n"
    _toml_answer("codex", text.replace("\n", "\r\n") if crlf else text)
