"""The static token file of `serve --tokens`: only hashes, written whole, mode 0600."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from skillindex.errors import ConfigError, NotFoundError
from skillindex.serve import tokens
from skillindex.serve.tokens import TokenFile


def test_a_token_is_printed_once_and_only_its_hash_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    done = CliRunner().invoke(cli, ["serve", "token", "add", "alice", "--tokens", str(path)],
                              catch_exceptions=False)
    assert done.exit_code == 0
    token = done.stdout.strip()
    assert token.startswith(tokens.PREFIX) and len(token) > 40
    assert "not shown again" in done.stderr and token not in done.stderr
    text = path.read_text()
    assert token not in text
    (entry,) = json.loads(text)["tokens"]
    assert entry["principal"] == "alice" and entry["sha256"] == tokens.digest(token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TokenFile(path).principal_of(token) == "alice"
    assert TokenFile(path).principal_of(token + "x") is None


def test_listing_shows_no_hash_and_no_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    token, entry = tokens.add(path, "alice")
    done = CliRunner().invoke(cli, ["serve", "token", "list", "--tokens", str(path), "--json"],
                              catch_exceptions=False)
    assert json.loads(done.stdout) == [{"principal": "alice", "id": entry.id,
                                        "created": entry.created}]
    assert entry.sha256 not in done.stdout and token not in done.stdout


def test_writers_at_once_lose_no_token_and_leave_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    made: list[str] = []

    def writer(number: int) -> None:
        for turn in range(5):
            made.append(tokens.add(path, f"user{number}-{turn}")[0])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = TokenFile(path)
    assert len(kept.entries()) == 40
    assert all(kept.principal_of(token) is not None for token in made)
    assert sorted(os.listdir(tmp_path)) == ["tokens.json"]


def test_removing_a_principals_tokens_or_one_of_them(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    first, entry = tokens.add(path, "alice")
    second, _ = tokens.add(path, "alice")
    kept, _ = tokens.add(path, "bob")
    assert [e.id for e in tokens.remove(path, "alice", entry.id)] == [entry.id]
    file = TokenFile(path)
    assert (file.principal_of(first), file.principal_of(second)) == (None, "alice")
    runner = CliRunner()
    done = runner.invoke(cli, ["serve", "token", "remove", "alice", "--tokens", str(path)],
                         catch_exceptions=False)
    assert done.exit_code == 0 and "removed token" in done.stdout
    assert (file.principal_of(second), file.principal_of(kept)) == (None, "bob")
    again = runner.invoke(cli, ["serve", "token", "remove", "alice", "--tokens", str(path)])
    assert again.exit_code == 3
    assert again.stderr.startswith("skillindex: error: no token of 'alice'")
    with pytest.raises(NotFoundError):
        tokens.remove(path, "carol")
    with pytest.raises(ConfigError, match="cannot open the token file"):
        tokens.remove(tmp_path / "missing.json", "alice")


@pytest.mark.parametrize("name", ["", "-alice", "a b", "a/b", "x" * 65, "é"])
def test_a_principal_name_is_plain(tmp_path: Path, name: str) -> None:
    done = CliRunner().invoke(cli, ["serve", "token", "add", name, "--tokens",
                                    str(tmp_path / "t.json")])
    assert done.exit_code == 2
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "tokens.json"
    token, _ = tokens.add(path, "alice")
    file = TokenFile(path)
    path.chmod(mode)
    assert file.principal_of(token) is None  # a running server accepts no token from it
    with pytest.raises(ConfigError, match="writable by others"):
        TokenFile(path)
    path.chmod(0o600)
    assert file.principal_of(token) == "alice"


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not valid JSON"),
    ('{"version": 2, "tokens": []}', 'must be {"version": 1'),
    ('{"version": 1, "tokens": [{"principal": "a"}]}', "token 1 of the file needs"),
    ('{"version": 1, "tokens": [{"principal": "a", "id": "1", "sha256": "plain", '
     '"created": "x"}]}', "token 1 of the file needs"),
], ids=["not-json", "version", "missing-fields", "not-a-hash"])
def test_a_malformed_file_is_one_error_naming_it(tmp_path: Path, text: str,
                                                 message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match=message) as caught:
        TokenFile(path)
    assert str(path) in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        TokenFile(tmp_path / "absent.json")
