"""`skillindex hosts`: each host's entry in its own format, merged into real files without
losing what they hold, and a server that the SDK's client starts from the entry written."""

from __future__ import annotations

import json
import os
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from skillindex.cli import cli
from skillindex.config import Environment
from skillindex.errors import ConfigError, RefusedError
from skillindex.serve import hosts
from tests.conftest import isolate_cli, write_skill
from tests.test_serve_mcp import call

HOSTS = list(hosts.HOSTS)
JSON_HOSTS = [key for key in HOSTS if not hosts.HOSTS[key].toml]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (the working directory) with one skill indexed, and a Codex home of its own."""
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Read PDFs.")
    isolate_cli(tmp_path, monkeypatch, root)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    assert run("reindex").exit_code == 0
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def host_file(key: str, project: Path) -> Path:
    return project / "codex-home" / "config.toml" if key == "codex" else \
        project / hosts.HOSTS[key].file


def parse(key: str, text: str) -> dict[str, Any]:
    """The file as the host reads it."""
    data = tomllib.loads(text) if hosts.HOSTS[key].toml else json.loads(text)
    assert isinstance(data, dict)
    return data


def served(key: str, data: dict[str, Any]) -> dict[str, Any]:
    entry = data[hosts.HOSTS[key].servers_key]["skillindex"]
    assert isinstance(entry, dict)
    return entry


@pytest.mark.parametrize("key", HOSTS)
def test_each_host_gets_an_absolute_command_in_its_own_format(project: Path, key: str) -> None:
    result = run("hosts", key)
    assert result.exit_code == 0, result.output
    entry = served(key, parse(key, result.stdout))
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).is_file()
    # The settings file and database the environment names are pinned, made absolute.
    assert entry["args"] == ["--cwd", str(project), "--config", str(project / "config.toml"),
                             "--db", str(project / "cli.sqlite"), "serve"]
    assert ("type" in entry) is hosts.HOSTS[key].typed
    assert entry.get("type", "stdio") == "stdio"
    assert str(host_file(key, project)) in result.stderr


def test_claude_also_gets_its_command_line(project: Path) -> None:
    result = run("hosts", "claude")
    command = json.loads(run("--json", "hosts", "claude").stdout)["claude_command"]
    assert command.startswith("claude mcp add --scope project --transport stdio skillindex -- /")
    assert command.endswith(f"--cwd {project} --config {project / 'config.toml'} --db "
                            f"{project / 'cli.sqlite'} serve")
    assert f"# or run: {command}" in result.stderr


def test_the_global_options_given_are_the_ones_served(project: Path) -> None:
    other = project / "other"
    other.mkdir()
    result = run("--cwd", str(other), "--db", "elsewhere.sqlite", "--index", "team",
                 "--config", "config.toml", "hosts", "cursor")
    args = served("cursor", parse("cursor", result.stdout))["args"]
    # A relative --db is where the index would open it (under --cwd), --config where it is read.
    assert args == ["--cwd", str(other), "--config", str(project / "config.toml"),
                    "--db", str(other / "elsewhere.sqlite"), "--index", "team", "serve"]
    assert (other / ".cursor").exists() is False


def test_a_database_password_is_not_written_into_a_host_file(project: Path) -> None:
    result = run("--db", "postgresql://me:secret@db.example/skills", "hosts", "claude",
                 "--write")
    assert result.exit_code == 4
    assert "password" in result.stderr and "secret" not in result.output
    assert not (project / ".mcp.json").exists()
    passwordless = run("--db", "postgresql://me@db.example/skills", "hosts", "claude")
    assert "postgresql://me@db.example/skills" in passwordless.stdout


def test_a_relative_sqlite_url_is_made_absolute(project: Path) -> None:
    env = Environment.from_os()
    server = hosts.server_command(env, ["/bin/skillindex"], db="sqlite:///rel.sqlite")
    assert server.args[-2] == f"sqlite:///{project / 'rel.sqlite'}"
    assert hosts.server_command(env, ["/bin/skillindex"], db="sqlite:////abs.sqlite"
                                ).args[-2] == "sqlite:////abs.sqlite"


@pytest.mark.parametrize("key", HOSTS)
def test_write_twice_is_write_once(project: Path, key: str) -> None:
    first = run("hosts", key, "--write")
    assert first.exit_code == 0, first.output
    path = host_file(key, project)
    text = path.read_text(encoding="utf-8")
    assert served(key, parse(key, text)) == \
        served(key, parse(key, run("hosts", key).stdout))
    second = json.loads(run("--json", "hosts", key, "--write").stdout)
    assert (second["action"], second["status"]) == ("unchanged", "configured")
    assert path.read_text(encoding="utf-8") == text


OTHERS: dict[str, str] = {
    "claude": '{\n    "mcpServers": {\n        "github": {"type": "http", "url": "https://x/mcp",'
              ' "headers": {"Authorization": "Bearer ${TOKEN}"}}\n    },\n    "extra": [1, 2]\n}\n',
    "cursor": '{"mcpServers": {"db": {"command": "npx", "args": ["-y", "db-mcp"],'
              ' "env": {"KEY": "v"}}}}',
    "vscode": '{\n\t"inputs": [{"type": "promptString", "id": "key", "password": true}],\n'
              '\t"servers": {"fetch": {"type": "stdio", "command": "uvx", "args": ["fetch"]}}\n}\n',
    "gemini": '{"theme": "GitHub", "mcpServers": {"py": {"command": "python", "cwd": "./s",'
              ' "timeout": 15000, "trust": false}}, "checkpointing": {"enabled": true}}\n',
}


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_keeps_other_servers_and_keys(project: Path, key: str) -> None:
    path = host_file(key, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OTHERS[key], encoding="utf-8")
    before = json.loads(OTHERS[key])
    assert json.loads(run("--json", "hosts", key).stdout)["status"] == "not configured"
    result = run("hosts", key, "--write")
    assert result.exit_code == 0, result.output
    assert "added skillindex to" in result.stdout
    after = json.loads(path.read_text(encoding="utf-8"))
    entry = after[hosts.HOSTS[key].servers_key].pop("skillindex")
    assert after == before
    assert entry == served(key, parse(key, run("hosts", key).stdout))
    # Every byte but the entry's is kept; the entry takes the file's indentation.
    text = path.read_text(encoding="utf-8")
    indent = "\t" if key == "vscode" else "    " if key == "claude" else "  "
    start = text.index(f'\n{indent * 2}"skillindex": {{')
    _, end = json.JSONDecoder().raw_decode(text, text.index("{", start))
    assert text[:text.rindex(",", 0, start)] + text[end:] == OTHERS[key]


CODEX = """\
# Codex settings, kept by hand
model = "gpt-5"  # the default model

[mcp_servers.docs]
command = "npx"
args = [
  "-y",
  "docs-mcp",  # pinned below
]

# profiles come last
[profiles.fast]
model = "small"
"""


def test_toml_merge_keeps_comments_and_other_tables(project: Path) -> None:
    path = host_file("codex", project)
    path.parent.mkdir()
    path.write_text(CODEX, encoding="utf-8")
    assert run("hosts", "codex", "--write").exit_code == 0
    text = path.read_text(encoding="utf-8")
    assert text.startswith(CODEX)  # every line as it was, the table appended
    after = tomllib.loads(text)
    entry = after["mcp_servers"].pop("skillindex")
    assert after == tomllib.loads(CODEX)
    assert entry == served("codex", parse("codex", run("hosts", "codex").stdout))


def test_a_stale_entry_is_brought_up_to_date_keeping_its_other_keys(project: Path) -> None:
    path = host_file("codex", project)
    path.parent.mkdir()
    stale = (CODEX + '\n[mcp_servers.skillindex]  # the skills\ncommand = "/old/venv/bin/'
             'skillindex"\n# started from the old checkout\nargs = [\n  "--cwd",\n  "/old",\n'
             '  "serve",\n]\nstartup_timeout_sec = 30\n\n[mcp_servers.skillindex.env]\n'
             'LANG = "C"\n')
    path.write_text(stale, encoding="utf-8")
    state = json.loads(run("--json", "hosts", "codex").stdout)
    assert (state["status"], state["detail"]) == ("differs",
                                                  "/old/venv/bin/skillindex --cwd /old serve")
    result = run("hosts", "codex", "--write")
    assert "updated the skillindex entry" in result.stdout
    text = path.read_text(encoding="utf-8")
    entry = tomllib.loads(text)["mcp_servers"]["skillindex"]
    wanted = served("codex", parse("codex", run("hosts", "codex").stdout))
    assert entry == {**wanted, "startup_timeout_sec": 30, "env": {"LANG": "C"}}
    for kept in ("# the skills", "# started from the old checkout", "# profiles come last"):
        assert kept in text
    assert text.startswith(CODEX)


def test_a_json_entry_of_that_name_is_updated_in_place(project: Path) -> None:
    path = project / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"servers": {
        "a": {"command": "a"}, "skillindex": {"type": "stdio", "command": "/old", "args": [],
                                              "envFile": "${workspaceFolder}/.env"},
        "z": {"command": "z"}}}), encoding="utf-8")
    assert run("hosts", "vscode", "--write").exit_code == 0
    servers = json.loads(path.read_text(encoding="utf-8"))["servers"]
    assert list(servers) == ["a", "skillindex", "z"]
    assert servers["skillindex"]["envFile"] == "${workspaceFolder}/.env"
    assert servers["skillindex"]["command"] != "/old"


@pytest.mark.parametrize(("key", "text", "reason"), [
    ("claude", '{"mcpServers": {', "not valid JSON"),
    ("cursor", "[1, 2]", "does not hold a JSON object"),
    ("gemini", '{"mcpServers": []}', "'mcpServers' is not a table of servers"),
    ("claude", '{"mcpServers": {"skillindex": "x"}}', "not a table of settings"),
    ("codex", "model = \n", "not valid TOML"),
    ("codex", 'mcp_servers = { docs = { command = "npx" } }\n', "cannot be extended"),
    ("codex", '[mcp_servers]\nskillindex.command = "/old"\n', "dotted keys"),
    ("vscode", '{\n  // the team\'s servers\n  "servers": {"a": {"command": "a"},},\n}\n',
     "holds comments or trailing commas"),
], ids=["truncated", "array", "servers-array", "entry-string", "toml-syntax", "inline-table",
        "dotted-keys", "jsonc"])
def test_a_file_that_cannot_be_merged_is_refused_and_left_alone(
        project: Path, key: str, text: str, reason: str) -> None:
    path = host_file(key, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    result = run("hosts", key, "--write")
    assert result.exit_code == 4
    assert result.stderr.startswith(f"skillindex: error: cannot add skillindex to {path}: ")
    assert reason in result.stderr and "Traceback" not in result.output
    assert path.read_text(encoding="utf-8") == text
    assert not list(path.parent.glob(".*.tmp"))  # no temporary file left


def test_a_file_with_comments_is_still_read(project: Path) -> None:
    wanted = served("vscode", parse("vscode", run("hosts", "vscode").stdout))
    path = project / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{\n  /* ours */ "servers": {\n    "skillindex": ' + json.dumps(wanted)
                    + ", // here\n  },\n}\n", encoding="utf-8")
    assert json.loads(run("--json", "hosts", "vscode").stdout)["status"] == "configured"
    assert json.loads(run("--json", "hosts", "vscode", "--write").stdout)["action"] == \
        "unchanged"


def test_without_a_host_every_host_is_listed(project: Path) -> None:
    assert run("hosts", "gemini", "--write").exit_code == 0
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").write_text("{oops", encoding="utf-8")
    (project / ".mcp.json").write_text('{"mcpServers": {}}', encoding="utf-8")
    listing = json.loads(run("--json", "hosts").stdout)
    assert [(item["host"], item["status"]) for item in listing] == [
        ("claude", "not configured"), ("codex", "no file"), ("cursor", "unreadable"),
        ("vscode", "no file"), ("gemini", "configured")]
    assert [item["path"] for item in listing] == [str(host_file(k, project)) for k in HOSTS]
    table = run("hosts").stdout.splitlines()
    assert table[0].split() == ["HOST", "NAME", "STATUS", "FILE"]
    assert table[3].split()[:2] == ["cursor", "Cursor"] and "unreadable" in table[3]


def test_a_missing_index_is_noted(project: Path) -> None:
    assert "no index" not in run("hosts").stderr
    result = run("--db", "new.sqlite", "hosts", "claude")
    assert result.exit_code == 0
    assert (f"note: there is no index at {project / 'new.sqlite'} yet: `skillindex reindex` "
            "makes it") in result.stderr
    assert not (project / "new.sqlite").exists()


def test_write_and_file_need_a_host(project: Path) -> None:
    assert run("hosts", "--write").exit_code == 2
    assert run("hosts", "--file", "x.json").exit_code == 2
    assert run("hosts", "zed").exit_code == 2


def test_another_file_of_the_host_format(project: Path, tmp_path: Path) -> None:
    user = tmp_path / "home" / ".gemini" / "settings.json"
    result = run("hosts", "gemini", "--write", "--file", str(user))
    assert result.exit_code == 0 and str(user) in result.stdout
    assert served("gemini", json.loads(user.read_text(encoding="utf-8")))
    assert not (project / ".gemini").exists()


def test_a_symlinked_file_is_written_through_with_its_mode_only_when_named(
        project: Path) -> None:
    dotfiles = project / "dotfiles" / "config.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text(CODEX, encoding="utf-8")
    dotfiles.chmod(0o640)
    (project / "codex-home").mkdir()
    link = project / "codex-home" / "config.toml"
    link.symlink_to(dotfiles)
    refused = run("hosts", "codex", "--write")
    assert refused.exit_code == 4 and "symbolic link" in refused.output
    assert dotfiles.read_text(encoding="utf-8") == CODEX
    written = run("hosts", "codex", "--write", "--file", str(link))
    assert written.exit_code == 0 and str(dotfiles) in written.output
    assert link.is_symlink()
    assert "skillindex" in tomllib.loads(dotfiles.read_text(encoding="utf-8"))["mcp_servers"]
    assert stat.S_IMODE(dotfiles.stat().st_mode) == 0o640


def test_a_project_file_linked_to_the_users_settings_is_refused(project: Path) -> None:
    home = project / "home"
    home.mkdir()
    user = home / ".claude.json"
    user.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    before = user.read_bytes()
    (project / ".mcp.json").symlink_to(user)
    result = run("hosts", "claude", "--write")
    assert result.exit_code == 4 and "symbolic link" in result.output
    assert user.read_bytes() == before and (project / ".mcp.json").is_symlink()


@pytest.mark.parametrize("key", HOSTS)
def test_a_dangling_link_at_the_host_file_is_refused(project: Path, key: str) -> None:
    path = host_file(key, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    aimed = project / "elsewhere" / "planted.json"
    path.symlink_to(aimed)
    for args in (("hosts", key, "--write"), ("hosts", key, "--write", "--file", str(path))):
        result = run(*args)
        assert result.exit_code == 4 and "dangling" in result.output
        assert not aimed.parent.exists() and path.is_symlink()


def test_a_linked_directory_leading_out_of_the_project_is_refused(
        project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (project / ".vscode").symlink_to(outside)
    result = run("hosts", "vscode", "--write")
    assert result.exit_code == 4 and "outside" in result.output
    assert list(outside.iterdir()) == []


def test_crlf_files_keep_their_line_endings(project: Path) -> None:
    path = host_file("codex", project)
    path.parent.mkdir()
    path.write_bytes(CODEX.replace("\n", "\r\n").encode())
    assert run("hosts", "codex", "--write").exit_code == 0
    raw = path.read_bytes()
    assert raw.count(b"\n") == raw.count(b"\r\n")
    claude = project / ".mcp.json"
    claude.write_bytes(b'{\r\n  "mcpServers": {}\r\n}\r\n')
    assert run("hosts", "claude", "--write").exit_code == 0
    raw = claude.read_bytes()
    assert raw.count(b"\n") == raw.count(b"\r\n") > 3


@pytest.mark.parametrize("key", HOSTS)
def test_a_strange_directory_name_reads_back_exactly(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     key: str) -> None:
    root = tmp_path / 'pro"ject\\\u202e\x1b[2J\ttab \U0001f600'
    root.mkdir()
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    result = run("--cwd", str(root), "hosts", key)
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert served(key, parse(key, result.stdout))["args"][1] == str(root)
    assert run("--cwd", str(root), "hosts", key, "--write").exit_code == 0
    path = (tmp_path / "codex-home" / "config.toml") if key == "codex" else \
        root / hosts.HOSTS[key].file
    assert served(key, parse(key, path.read_text(encoding="utf-8")))["args"][1] == str(root)


def test_a_path_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    env = Environment.from_os(cwd=tmp_path / "caf\udce9")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        hosts.server_command(env, ["/bin/skillindex"])
    with pytest.raises(RefusedError, match="password"):
        hosts.server_command(env, ["/bin/skillindex"], db="postgresql://u:p@h/d")


def test_the_installed_program_is_the_one_running(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "bin" / "skillindex"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    assert hosts.installed_program(str(script)) == (str(script),)
    monkeypatch.chdir(tmp_path)
    assert hosts.installed_program("bin/skillindex") == (str(script),)
    beside = Path(sys.executable).parent / "skillindex"
    found = hosts.installed_program("/usr/lib/python3/pytest")
    assert found == ((str(beside),) if beside.is_file() else
                     (os.path.abspath(sys.executable), "-m", "skillindex"))


@pytest.mark.parametrize("key", HOSTS)
def test_the_command_a_host_file_names_serves_the_index(project: Path, key: str) -> None:
    """What a host does: read its file, start the command it names (from a directory of its
    own and without our environment variables) and ask it for skills and tools."""
    assert run("hosts", key, "--write").exit_code == 0
    entry = served(key, parse(key, host_file(key, project).read_text(encoding="utf-8")))
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    environment = {"PATH": os.environ.get("PATH", ""), "HOME": str(project / "home")}
    server = StdioServerParameters(command=entry["command"], args=entry["args"],
                                   env=environment, cwd=str(elsewhere))

    async def main() -> None:
        async with Client(server, client_info=Implementation(name=f"{key}-host", version="1"),
                          read_timeout_seconds=60) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"list_skills", "load_skill", "read_skill_file"} <= tools
            listing = await call(client, "skills/list", {})
            assert [skill["uri"] for skill in listing["skills"]] == ["skill://pdf/SKILL.md"]
    anyio.run(main)
