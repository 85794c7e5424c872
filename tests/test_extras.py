"""The install hint names the extra as pip can install it: from the clone, the wheel or the
repository this copy came from, never from a package index it is not on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex import extras
from skillindex.cli import cli
from tests.conftest import isolate_cli

REPO = Path(__file__).resolve().parent.parent


def installed_from(site: Path, record: dict[str, object] | None) -> list[str]:
    """A site folder holding skillindex's dist-info as pip leaves it, with `record` as its
    direct_url.json (PEP 610; none when it came from an index)."""
    info = site / "skillindex-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: skillindex\nVersion: 0.1.0\n")
    if record is not None:
        (info / "direct_url.json").write_text(json.dumps(record))
    return [str(site)]


@pytest.mark.parametrize(("record", "expected"), [
    ({"url": "file:///home/ann/src/skillindex", "dir_info": {"editable": True}},
     "pip install -e '/home/ann/src/skillindex[mcp]'"),
    ({"url": "file:///home/ann/src/skillindex", "dir_info": {}},
     "pip install '/home/ann/src/skillindex[mcp]'"),
    ({"url": "file:///tmp/dl/skillindex-0.1.0-py3-none-any.whl",
      "archive_info": {"hashes": {"sha256": "00"}}},
     "pip install '/tmp/dl/skillindex-0.1.0-py3-none-any.whl[mcp]'"),
    ({"url": "file:///home/ann/my%20clone", "dir_info": {}},
     "pip install '/home/ann/my clone[mcp]'"),
    ({"url": "https://git.example.com/skillindex.git",
      "vcs_info": {"vcs": "git", "commit_id": "ab12"}},
     "pip install 'skillindex[mcp] @ git+https://git.example.com/skillindex.git'"),
    (None, "pip install 'skillindex[mcp]'"),
], ids=["editable-clone", "clone", "wheel", "quoted-path", "git", "index"])
def test_the_hint_installs_from_where_skillindex_came(
        tmp_path: Path, record: dict[str, object] | None, expected: str) -> None:
    assert extras.install_command("mcp", path=installed_from(tmp_path, record)) == expected


@pytest.mark.parametrize(("record", "installer"), [("pipx_metadata.json", "pipx install --force"),
                                                  ("uv-receipt.toml", "uv tool install --force")])
def test_a_tool_environment_is_installed_again_by_its_tool(
        tmp_path: Path, record: str, installer: str) -> None:
    # pipx and `uv tool` environments have no pip to add an extra with: the tool reinstalls.
    site = installed_from(tmp_path / "site", {
        "url": "file:///tmp/dl/skillindex-0.1.0-py3-none-any.whl", "archive_info": {}})
    wheel = "/tmp/dl/skillindex-0.1.0-py3-none-any.whl"
    (tmp_path / record).write_text("{}\n")
    assert extras.install_command("mcp", path=site, prefix=str(tmp_path)) == (
        f"{installer} '{wheel}[mcp]'")
    # The extras it was installed with are kept: the tool replaces the whole environment.
    (tmp_path / record).write_text(
        json.dumps({"main_package": {"package_or_url": f"{wheel}[mcp]"}})
        if record.endswith(".json") else
        f'[tool]\nrequirements = [{{ name = "skillindex", extras = ["mcp"], path = "{wheel}" }}]\n')
    assert extras.install_command("watch", path=site, prefix=str(tmp_path)) == (
        f"{installer} '{wheel}[mcp,watch]'")


def test_a_checkout_that_is_not_installed_is_installed_from_itself(tmp_path: Path) -> None:
    assert extras.install_command("watch", path=[str(tmp_path)]) == "pip install -e '.[watch]'"


def test_this_checkouts_hint_names_it_and_not_a_package_index() -> None:
    command = extras.install_command("mcp")
    assert str(REPO) in command and command.endswith("[mcp]'")


def test_serve_without_the_extra_names_this_installation(tmp_path: Path) -> None:
    # `None` in sys.modules makes `import mcp` fail as it does where the package is missing.
    code = ("import sys; sys.modules['mcp'] = None; from skillindex.cli import main; "
            "main(['serve'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, check=False, timeout=60,
                          env={**os.environ, "SKILLINDEX_DB": str(tmp_path / "db.sqlite")})
    assert done.returncode == 1
    assert done.stderr == ("skillindex: error: skillindex serve needs the mcp extra: "
                           f"install it with: {extras.install_command('mcp')}\n")
    assert "'skillindex[mcp]'" not in done.stderr


def test_hosts_write_warns_when_serve_cannot_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["hosts", "claude", "--write"])
    assert result.exit_code == 0, result.output
    assert (f"note: skillindex serve needs the mcp extra: install it with: "
            f"{extras.install_command('mcp')}") in result.stderr


def test_a_postgresql_url_without_the_driver_names_this_installation(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['psycopg'] = None; sys.modules['psycopg2'] = None; "
            "from skillindex.cli import main; main(['--db', 'postgresql://u@127.0.0.1:1/d', "
            "'list'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, check=False, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"({extras.hint('postgresql')})" in done.stderr
    assert "'skillindex[postgresql]'" not in done.stderr
