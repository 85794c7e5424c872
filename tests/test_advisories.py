"""Advisory and revocation feeds: the formats read, each way an entry names a skill, every
surface refusing a revoked skill with the advisory's id, and a bad feed failing closed."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from click.testing import CliRunner, Result
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import Implementation

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment, Settings
from skillindex.errors import QuarantinedError
from skillindex.query import advisories, lockfile
from skillindex.query.advisories import Advisory, FeedError
from skillindex.serve.mcp import create_server
from tests.conftest import root_settings, write_skill

PDF_FRONT = "name: pdf\ndescription: Read PDFs.\nmetadata:\n  version: 1.2.0\n"


def feed_of(*matches: dict[str, str], ident: str = "ADV-2026-7",
            text: str = "Sends documents to a third party.") -> dict[str, Any]:
    return {"format": "skillindex-advisories", "version": 1,
            "advisories": [{"id": ident, "text": text, "matches": list(matches)}]}


@dataclass
class World:
    root: Path
    feed: Path
    index: SkillIndex

    def publish(self, document: object) -> None:
        self.feed.write_text(json.dumps(document), encoding="utf-8")

    def update(self) -> list[dict[str, object]]:
        return [result.as_dict() for result in self.index.update_advisories(fetch=False)]

    def served(self) -> set[str]:
        return {w.name for w in self.index.winners()}


def tree(root: Path) -> None:
    pdf = write_skill(root, "pdf", PDF_FRONT, body="# PDF\n")
    (pdf / "guide.md").write_text("# Guide\n", encoding="utf-8")
    write_skill(root, "deploy", description="Ships it.")


@pytest.fixture
def world(tmp_path: Path, db_url: str, env: Environment) -> Iterator[World]:
    root = tmp_path / "skills"
    tree(root)
    feed = tmp_path / "feed.json"
    settings = replace(root_settings(root), advisories=(str(feed),))
    index = SkillIndex.open(settings, db=db_url, env=env)
    index.reindex()
    yield World(root, feed, index)
    index.close()


def refused_with(world: World, ident: str) -> None:
    """Every library surface refuses pdf naming `ident`; deploy is served."""
    with pytest.raises(QuarantinedError, match=ident):
        world.index.read("skill://pdf", reason="test")
    with pytest.raises(QuarantinedError, match=ident):
        world.index.read("skill://pdf/guide.md", reason="test")
    with pytest.raises(QuarantinedError, match=ident):
        world.index.skill_command("pdf")
    assert world.served() == {"deploy"}
    catalog = world.index.catalog(format="json")
    assert [entry.name for entry in catalog.entries] == ["deploy"]
    explained = world.index.explain("pdf")
    assert explained.winner is None
    assert any(ident in verdict.reason for verdict in explained.verdicts)
    assert (world.index.read("skill://deploy", reason="test").text or "").startswith("# Body")


def whole_hash(skill: Path) -> str:
    return lockfile.computed_hash(lockfile.folder_files(skill, max_bytes=1 << 24))


@pytest.mark.parametrize("kind", ["name", "name-version", "skill-md-sha256", "whole-sha256",
                                  "revocations-shape"])
def test_an_entry_matching_by_each_key_withholds_the_skill_everywhere(world: World,
                                                                      kind: str) -> None:
    assert world.served() == {"pdf", "deploy"}
    skill_md = hashlib.sha256((world.root / "pdf" / "SKILL.md").read_bytes()).hexdigest()
    documents: dict[str, object] = {
        "name": feed_of({"name": "pdf"}),
        "name-version": feed_of({"name": "pdf", "version": "1.2.0"}),
        "skill-md-sha256": feed_of({"sha256": skill_md}),
        "whole-sha256": feed_of({"sha256": whole_hash(world.root / "pdf")}),
        "revocations-shape": {"revocations": [{"id": "ADV-2026-7", "skill": "pdf",
                                               "reason": "Sends documents."}]},
    }
    world.publish(documents[kind])

    assert world.update() == [{"source": str(world.feed), "status": "updated",
                               "advisories": 1, "error": None}]
    refused_with(world, "ADV-2026-7")


def test_another_version_or_digest_is_not_matched(world: World) -> None:
    world.publish({"format": "skillindex-advisories", "version": 1, "advisories": [
        {"id": "A", "text": "old", "matches": [{"name": "pdf", "version": "1.1.0"}]},
        {"id": "B", "text": "other", "matches": [{"sha256": "0" * 64}]},
        {"id": "C", "text": "other name", "matches": [{"name": "pdf-tools"}]}]})

    world.update()

    assert world.served() == {"pdf", "deploy"}


def test_a_malformed_feed_leaves_the_previous_one_in_force(world: World) -> None:
    world.publish(feed_of({"name": "pdf"}))
    world.update()
    world.publish({"advisories": [{"id": "X", "matches": [{"version": "1"}]}]})

    [result] = world.update()

    assert result["status"] == "error" and result["advisories"] == 1
    assert "feed.json" in str(result["error"])
    refused_with(world, "ADV-2026-7")
    [stored] = world.index.advisory_feeds()
    assert stored.error is not None
    report = world.index.reindex()  # a reindex reads the file too, and reports it
    assert [p.code for p in report.problems] == ["advisory-feed"]
    refused_with(world, "ADV-2026-7")
    world.feed.unlink()  # a feed that disappears lifts nothing either
    assert world.update()[0]["status"] == "error"
    refused_with(world, "ADV-2026-7")


def test_a_reindex_reads_a_changed_feed_file(world: World) -> None:
    world.publish(feed_of({"name": "deploy"}, ident="ADV-9"))

    world.index.reindex()

    assert world.served() == {"pdf"}
    world.publish({"revoked": []})
    world.index.reindex()
    assert world.served() == {"pdf", "deploy"}


def test_an_approval_does_not_lift_a_revocation(world: World) -> None:
    world.publish(feed_of({"name": "pdf"}))
    world.update()

    world.index.trust("pdf")

    refused_with(world, "ADV-2026-7")


@pytest.mark.parametrize(("document", "wrong"), [
    pytest.param("{", "not a JSON feed", id="not-json"),
    pytest.param({"version": 1, "advisories": {}}, "must be a list", id="not-a-list"),
    pytest.param({"advisories": []}, '"version": 1', id="no-version"),
    pytest.param({"format": "other", "version": 1, "advisories": []}, "format",
                 id="other-format"),
    pytest.param(feed_of(), "non-empty matches", id="no-matches"),
    pytest.param(feed_of({"sha256": "abc"}), "64 hex", id="short-digest"),
    pytest.param(feed_of({"version": "1"}), "names no skill", id="version-alone"),
    pytest.param({"revocations": [{"name": "a", "skill": "b"}]}, "twice", id="two-names"),
    pytest.param({"revocations": [{"name": 3}]}, "non-empty string", id="number"),
    pytest.param({"other": []}, '"advisories", "revocations" or "revoked"', id="unknown"),
    pytest.param("[" * 100_000 + "]" * 100_000, "not a JSON feed", id="deep"),
])
def test_a_feed_that_is_not_one_is_refused_whole(document: object, wrong: str) -> None:
    data = (document if isinstance(document, str) else json.dumps(document)).encode()

    with pytest.raises(FeedError, match=wrong):
        advisories.parse(data, source="feed.json")


def test_a_bare_revocation_list_and_digest_prefixes_are_read() -> None:
    found = advisories.parse(json.dumps([
        {"slug": "pdf", "version": "2"}, {"sha256": "sha256:" + "AB" * 32, "id": "R-1"}]).encode(),
        source="feed.json")

    assert found == [Advisory("revoked:pdf", "revoked", "pdf", "2", None),
                     Advisory("R-1", "revoked", None, None, "ab" * 32)]


# The command line, and the servers.

def cli_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, feed: str) -> Path:
    root = tmp_path / "skills"
    tree(root)
    home = tmp_path / "home"
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\nadvisories = ["{feed}"]\n\n[[roots]]\n'
                      f'path = "{root}"\nprecedence = 10\n')
    for name, value in {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                        "XDG_DATA_HOME": home / ".data", "SKILLINDEX_CONFIG": config,
                        "SKILLINDEX_DB": tmp_path / "cli.sqlite"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(tmp_path)
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_command_line_refuses_with_the_advisory_id(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cli_world(tmp_path, monkeypatch, "feed.json")  # relative to the settings file's folder
    assert run("reindex").exit_code == 0
    (tmp_path / "feed.json").write_text(json.dumps(feed_of({"name": "pdf"})))

    updated = run("advisories", "update")

    assert updated.exit_code == 0, updated.output
    assert updated.stdout == f"{tmp_path / 'feed.json'}: updated, 1 advisory\n"
    read = run("read", "skill://pdf")
    assert read.exit_code == 4
    assert read.stderr.count("\n") == 1 and "revoked by advisory ADV-2026-7" in read.stderr
    assert run("command", "pdf").exit_code == 4
    catalog = json.loads(run("catalog", "--json").stdout)
    assert [entry["name"] for entry in catalog["entries"]] == ["deploy"]
    (tmp_path / "feed.json").write_text("{not json")
    failed = run("advisories", "update")
    assert failed.exit_code == 1
    assert "still in force" in failed.stdout and failed.stderr.count("\n") == 1
    listed = json.loads(run("advisories", "list", "--json").stdout)
    assert [a["id"] for a in listed[0]["advisories"]] == ["ADV-2026-7"]
    assert listed[0]["error"] is not None
    assert run("read", "skill://pdf").exit_code == 4


def test_over_stdio_a_revoked_skill_is_neither_listed_nor_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_world(tmp_path, monkeypatch, str(tmp_path / "feed.json"))
    (tmp_path / "feed.json").write_text(json.dumps(feed_of({"name": "pdf"})))
    assert run("reindex").exit_code == 0
    server = StdioServerParameters(command=sys.executable, args=["-m", "skillindex", "serve"],
                                   env=dict(os.environ), cwd=str(tmp_path))

    async def main() -> None:
        async with Client(server, client_info=Implementation(name="stdio-host", version="1"),
                          read_timeout_seconds=30) as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "skill://pdf/SKILL.md" not in listed
            assert "skill://deploy/SKILL.md" in listed
            with pytest.raises(MCPError, match="ADV-2026-7"):
                await client.read_resource("skill://pdf/SKILL.md")
    anyio.run(main)


def test_a_running_server_withholds_a_skill_revoked_after_it_started(world: World) -> None:
    async def main() -> None:
        async with Client(create_server(world.index),
                          client_info=Implementation(name="host", version="1")) as client:
            assert "skill://pdf/SKILL.md" in {
                str(r.uri) for r in (await client.list_resources()).resources}
            world.publish(feed_of({"name": "pdf"}))
            world.update()
            with pytest.raises(MCPError, match="ADV-2026-7"):
                await client.read_resource("skill://pdf/SKILL.md")
            with pytest.raises(MCPError, match="ADV-2026-7"):
                await client.read_resource("skill://pdf/guide.md")
    anyio.run(main)


def test_over_http_a_revoked_skill_is_refused(world: World) -> None:
    from tests.test_serve_http import Team, connect

    world.publish(feed_of({"name": "pdf"}))
    world.update()
    team = Team(world.root.parent, world.index, world.root.parent / "tokens.json")

    async def main() -> None:
        async with team.serving() as listen, connect(listen.url) as client:
            with pytest.raises(MCPError, match="ADV-2026-7"):
                await client.read_resource("skill://pdf/SKILL.md")
    anyio.run(main)


# Feeds by URL.

class _Feeds(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("If-None-Match"))
        etag = '"' + hashlib.sha256(type(self).body).hexdigest()[:16] + '"'
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
        elif self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.end_headers()
        else:
            self.send_response(200)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(type(self).body)))
            self.end_headers()
            self.wfile.write(type(self).body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def feed_server() -> Iterator[tuple[str, type[_Feeds]]]:
    handler = type("Handler", (_Feeds,), {"seen": [], "body": b"", "status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/feed.json", handler
    server.shutdown()
    server.server_close()


def test_a_url_feed_is_fetched_only_by_update_with_its_etag(
        tmp_path: Path, db_url: str, env: Environment,
        feed_server: tuple[str, type[_Feeds]]) -> None:
    url, handler = feed_server
    handler.body = json.dumps(feed_of({"name": "pdf"})).encode()
    root = tmp_path / "skills"
    tree(root)
    settings: Settings = replace(root_settings(root), advisories=(url,))
    with SkillIndex.open(settings, db=db_url, env=env) as index:
        index.reindex()
        assert handler.seen == []  # a reindex never fetches
        assert {w.name for w in index.winners()} == {"pdf", "deploy"}

        [first] = index.update_advisories()
        [second] = index.update_advisories()
        handler.status = 500
        [third] = index.update_advisories()
        served = {w.name for w in index.winners()}

    assert (first.status, second.status, third.status) == ("updated", "unchanged", "error")
    assert handler.seen[0] is None and handler.seen[1] is not None
    assert "HTTP 500" in (third.error or "")
    assert served == {"deploy"}


def test_local_commands_never_import_httpx(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cli_world(tmp_path, monkeypatch, "https://feeds.example.net/feed.json")
    code = ("import sys\nfrom skillindex.cli import main\n"
            "for args in (['reindex'], ['list'], ['read', 'skill://pdf'],\n"
            "             ['advisories', 'list']):\n"
            "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
            "print('httpx' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)

    assert done.stderr.splitlines()[-1] == "False", done.stderr
