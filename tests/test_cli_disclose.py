"""`read`, `command`, `verify` and `audit` through click's runner: output, JSON, exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from concurrent.futures import Executor
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli
from skillindex.index import parallel
from skillindex.query import verify
from tests.conftest import isolate_cli, write_skill

BODY = "\n# PDF\n\nUse it.\n"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings file naming one root with one indexed skill, and an isolated home."""
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", body=BODY, description="Read PDFs.")
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("guide\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    isolate_cli(tmp_path, monkeypatch, root)
    assert run("reindex").exit_code == 0
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def skill_dir(setup: Path) -> Path:
    return setup / "skills" / "pdf"


def test_read_prints_the_raw_body(setup: Path) -> None:
    result = run("read", "skill://pdf", "--reason", "test", "--session", "s1")
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == BODY.encode()


def test_read_json_shape(setup: Path) -> None:
    result = run("--json", "read", "skill://pdf/references/guide.md", "--max-bytes", "6")
    assert result.exit_code == 0, result.output
    path = skill_dir(setup) / "references" / "guide.md"
    assert json.loads(result.stdout) == {
        "uri": "skill://pdf/references/guide.md", "path": str(path),
        "content_type": "text/markdown", "bytes": 6,
        "digest": hashlib.sha256(b"guide\n").hexdigest(), "level": 3, "text": "guide\n"}


@pytest.mark.parametrize(("args", "code", "message"), [
    (["skill://nope"], 3, "skill not found: nope"),
    (["skill://pdf/absent.md"], 3, "file not found: absent.md"),
    (["skill://pdf/../outside.txt"], 4, "'..' segments are not allowed"),
    (["skill://pdf/%2e%2e%2foutside.txt"], 4, "'..' segments are not allowed"),
    (["skill://pdf/references/guide.md", "--max-bytes", "5"], 4, "the limit is 5"),
    (["skill://pdf/references/new.md"], 4, "not in the index"),
], ids=["unknown-skill", "missing-file", "traversal", "encoded-traversal", "too-large",
        "unindexed"])
def test_read_failures_are_one_line_with_their_exit_code(setup: Path, args: list[str],
                                                         code: int, message: str) -> None:
    (skill_dir(setup) / "references" / "new.md").write_text("new\n")
    result = run("read", *args)
    assert result.exit_code == code
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("skillindex: error:")
    assert message in line


def test_read_of_a_modified_file_prints_nothing(setup: Path) -> None:
    (skill_dir(setup) / "references" / "guide.md").write_text("GUIDE\n")
    result = run("read", "skill://pdf/references/guide.md")
    assert (result.exit_code, result.stdout) == (4, "")
    assert "changed since it was indexed" in result.stderr


def test_max_bytes_must_not_be_negative(setup: Path) -> None:
    assert run("read", "skill://pdf", "--max-bytes", "-1").exit_code == 2


@pytest.mark.parametrize(("args", "tail"), [
    ([], ""),
    (["summarize", "report.pdf", "--pages", "3"], "\nUser: summarize report.pdf --pages 3"),
], ids=["no-args", "args"])
def test_command_prints_the_seed_message(setup: Path, args: list[str], tail: str) -> None:
    result = run("command", "pdf", *args)
    assert result.exit_code == 0, result.output
    path = skill_dir(setup) / "SKILL.md"
    assert result.stdout == f"# PDF\n\nUse it.\n\n---\n\nSkill: {path}{tail}\n"
    shaped = json.loads(run("command", "--json", "pdf", *args).stdout)
    assert shaped["message"] == f"# PDF\n\nUse it.\n\n---\n\nSkill: {path}{tail}"
    assert set(shaped) >= {"name", "path", "args", "message", "digest"}


def test_everything_after_the_name_belongs_to_the_user(setup: Path) -> None:
    path = skill_dir(setup) / "SKILL.md"
    result = run("command", "pdf", "fix", "--json", "--session", "x")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(f"Skill: {path}\nUser: fix --json --session x\n")
    [event] = json.loads(run("audit", "--json").stdout)
    assert event["session"] is None


def test_command_is_refused_when_commands_are_off(setup: Path) -> None:
    config = setup / "config.toml"
    config.write_text(config.read_text().replace("presets = false",
                                                 "presets = false\nenable_skill_commands = false"))
    result = run("command", "pdf", "go")
    assert result.exit_code == 4
    assert "enable_skill_commands" in result.stderr
    [event] = json.loads(run("audit", "--json").stdout)
    assert (event["event"], event["outcome"]) == ("skill.command", "refused")


def test_verify_clean_then_drifted(setup: Path) -> None:
    clean = run("verify")
    assert clean.exit_code == 0
    assert clean.stdout.startswith("ok: 2 files of 1 skill match")
    assert json.loads(run("verify", "--json").stdout)["ok"] is True
    skill = skill_dir(setup)
    (skill / "references" / "guide.md").write_text("changed\n")
    (skill / "SKILL.md").unlink()
    (skill / "extra.txt").write_text("extra\n")
    table = run("verify")
    assert table.exit_code == 1
    assert "unexpected" in table.stdout
    result = run("--json", "verify")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert [{k: d[k] for k in ("skill", "resource", "problem")} for d in report["drift"]] == [
        {"skill": "pdf", "resource": "SKILL.md", "problem": "missing"},
        {"skill": "pdf", "resource": "references/guide.md", "problem": "changed"},
        {"skill": "pdf", "resource": "extra.txt", "problem": "unexpected"},
    ]


def test_audit_lists_every_attempt(setup: Path) -> None:
    run("read", "skill://pdf", "--reason", "plan", "--session", "s1")
    run("read", "skill://pdf/references/guide.md", "--session", "s1")
    run("read", "skill://pdf/../x", "--session", "s2", "--reason", "probe")
    run("command", "--session", "s2", "pdf", "go")
    events = json.loads(run("audit", "--json").stdout)
    assert [(e["event"], e["outcome"], e["session"]) for e in events] == [
        ("skill.read", "ok", "s1"), ("resource.read", "ok", "s1"),
        ("resource.read", "refused", "s2"), ("skill.command", "ok", "s2")]
    assert set(events[0]) >= {"time", "event", "skill", "resource", "level", "bytes", "digest",
                              "outcome", "reason", "session"}
    assert (events[0]["reason"], events[0]["level"], events[0]["bytes"]) == (
        "plan", 2, len(BODY))
    refused = json.loads(run("audit", "--outcome", "refused", "--json").stdout)
    assert [(e["resource"], e["reason"]) for e in refused] == [("../x", "probe")]
    assert len(json.loads(run("audit", "--session", "s1", "--json").stdout)) == 2
    assert len(json.loads(run("audit", "--skill", "pdf", "--since", "2000-01-01T00:00:00Z",
                              "--json").stdout)) == 4
    assert json.loads(run("audit", "--since", "2999-01-01", "--json").stdout) == []
    assert "refused" in run("audit").stdout


def test_audit_levels(setup: Path) -> None:
    run("read", "skill://pdf", "--session", "s1")
    run("read", "skill://pdf/references/guide.md", "--session", "s1")
    run("read", "skill://pdf/references/guide.md", "--session", "s1", "--max-bytes", "1")
    levels = json.loads(run("audit", "--levels", "--json").stdout)
    assert levels == [{"session": "s1", "l1_bytes": 0, "l2_bytes": len(BODY), "l3_bytes": 6,
                       "events": 3}]
    assert "L2 BYTES" in run("audit", "--levels").stdout


def test_audit_with_a_bad_since_is_a_usage_error(setup: Path) -> None:
    result = run("audit", "--since", "last tuesday")
    assert result.exit_code == 2
    assert "ISO 8601" in result.stderr


@pytest.mark.parametrize(("uri", "code", "message"), [
    ("skill://pdf/bad\udcff", 4, "refused path 'bad\\xff' in skill pdf: it is not UTF-8"),
    ("skill://pd\udcff", 3, "skill not found: pd\\xff"),
    ("skill://pd\udcff/guide.md", 3, "skill not found: pd\\xff"),
], ids=["path", "name", "name-and-path"])
def test_a_read_argument_that_is_not_utf8_is_one_line(setup: Path, uri: str, code: int,
                                                      message: str) -> None:
    # How the shell hands over the bytes `bad\xff`: Python decodes argv with surrogateescape.
    result = run("read", uri)
    assert result.exit_code == code
    [line] = result.stderr.splitlines()
    assert line.startswith(f"skillindex: error: {message}")
    [event] = json.loads(run("--json", "audit").stdout)
    assert "\\xff" in f"{event['skill']}/{event['resource']}"  # stored, escaped


@pytest.mark.parametrize("kind", ["socket", "fifo"])
def test_a_special_file_as_a_resource_is_refused(setup: Path, kind: str) -> None:
    path = skill_dir(setup) / "references" / "special"
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    else:
        os.mkfifo(path)
    assert run("reindex").exit_code == 0
    result = run("read", "skill://pdf/references/special")
    assert result.exit_code == 4
    [line] = result.stderr.splitlines()
    assert "not a regular file" in line


def test_a_hard_linked_resource_is_refused(setup: Path) -> None:
    os.link(setup / "outside.txt", skill_dir(setup) / "references" / "linked.txt")
    assert run("reindex").exit_code == 0
    result = run("read", "skill://pdf/references/linked.txt")
    assert result.exit_code == 4
    assert "hard-linked" in result.stderr
    assert result.stdout == ""


def pools_started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The jobs of every pool of worker processes started from now on, in order."""
    started: list[int] = []
    executor = parallel.Workers.executor

    def starting(workers: parallel.Workers) -> Executor:
        if workers._executor is None:
            started.append(workers.jobs)
        return executor(workers)

    monkeypatch.setattr(parallel.Workers, "executor", starting)
    return started


def test_verify_says_the_same_at_every_jobs_count(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages of 7 and shards of 3, so that 40 skills make six pages, the last one short, and
    # drift of every kind falls in different shards and pages.
    monkeypatch.setattr(verify, "PAGE", 7)
    monkeypatch.setattr(verify, "SHARD", 3)
    monkeypatch.setattr(verify, "AHEAD", 1)
    root = tmp_path / "skills"
    for number in range(40):
        skill = write_skill(root, f"s{number:02d}", description=f"Skill {number}.")
        (skill / "references").mkdir()
        (skill / "references" / "guide.md").write_text(f"guide {number}\n")
    write_skill(root, "bad", "name: Not A Valid Name\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    isolate_cli(tmp_path, monkeypatch, root)
    assert run("reindex", "--jobs", "1").exit_code == 0
    (root / "s03" / "references" / "guide.md").write_text("changed\n")
    (root / "s11" / "SKILL.md").unlink()
    (root / "s17" / "extra.txt").write_text("extra\n")
    shutil.rmtree(root / "s24")
    (root / "s30" / "references" / "guide.md").unlink()
    (root / "s30" / "references" / "guide.md").symlink_to(tmp_path / "outside.txt")
    (root / "bad" / "SKILL.md").write_text("---\nname: still bad\n---\n")
    started = pools_started(monkeypatch)
    answers = {}
    for jobs in ("1", "2", "3", "4"):
        result = run("--json", "verify", "--jobs", jobs)
        assert result.exit_code == 1, result.output
        answers[jobs] = result.stdout
    assert started == [2, 3, 4]  # one pool each; --jobs 1 hashes in this process
    assert len(set(answers.values())) == 1
    report = json.loads(answers["1"])
    assert report["skills"] == 41
    assert [(d["skill"], d["resource"], d["problem"]) for d in report["drift"]] == [
        ("Not A Valid Name", "SKILL.md", "changed"),
        ("s03", "references/guide.md", "changed"),
        ("s11", "SKILL.md", "missing"),
        ("s17", "extra.txt", "unexpected"),
        ("s24", "SKILL.md", "missing"),
        ("s24", "references/guide.md", "missing"),
        ("s30", "references/guide.md", "changed"),
    ]


def test_verify_of_fewer_skills_than_a_page_starts_no_process(
        setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = pools_started(monkeypatch)
    assert run("verify", "--jobs", "4").exit_code == 0
    assert run("verify").exit_code == 0
    assert started == []
