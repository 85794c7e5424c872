"""`skillindex serve` driven by the MCP SDK's own client, in-process and over stdio."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.types import Implementation
from pydantic import BaseModel, ConfigDict

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.cli.params import LISTEN
from skillindex.config import Environment
from skillindex.model import ManifestFile, SkillManifest, Validation
from skillindex.serve import mcp, skills
from skillindex.serve.mcp import SkillServer, create_server
from tests.conftest import isolate_cli, root_settings, write_skill
from tests.serving import serving

EXTENSION = "io.modelcontextprotocol/skills"
FRONTMATTER = ('name: pdf\ndescription: Read PDFs.\nlicense: MIT\nmetadata:\n  version: "2.1"\n'
               "allowed-tools: Read Grep\n")
BINARY = bytes(range(256)) * 3


class Raw(BaseModel):
    """Any result, every field kept as sent."""

    model_config = ConfigDict(extra="allow")


@pytest.fixture
def db_backend() -> str:
    return "sqlite"  # the disclosure path these reads go through is tested on both backends


async def call(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    request = types.Request[dict[str, Any] | None, str](method=method, params=params)
    return (await client.session.send_request(request, Raw)).model_dump()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def content_bytes(result: types.ReadResourceResult) -> bytes:
    (content,) = result.contents
    if isinstance(content, types.TextResourceContents):
        return content.text.encode("utf-8")
    return base64.b64decode(content.blob)


@dataclass
class Tree:
    root: Path
    index: SkillIndex

    def server(self, **options: Any) -> SkillServer:
        return create_server(self.index, **options)

    def run(self, test: Callable[[Client], Awaitable[None]], *, client: str = "test-host",
            **options: Any) -> None:
        async def main() -> None:
            async with Client(self.server(**options),
                              client_info=Implementation(name=client, version="1")) as c:
                await test(c)
        anyio.run(main)


@pytest.fixture
def tree(tmp_path: Path, db_url: str, env: Environment) -> Iterator[Tree]:
    root = tmp_path / "skills"
    pdf = write_skill(root, "pdf", FRONTMATTER, body="# PDF\n\nSee references/guide.md.\n")
    (pdf / "references").mkdir()
    (pdf / "references" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "tool.bin").write_bytes(BINARY)
    (pdf / "a b%.txt").write_text("odd name\n", encoding="utf-8")
    for number in range(5):
        write_skill(root, f"extra-{number}", description=f"Extra skill {number}.")
    (tmp_path / "secret.txt").write_text("secret\n", encoding="utf-8")
    index = SkillIndex.open(root_settings(root), db=db_url, env=env)
    index.reindex()
    yield Tree(root, index)
    index.close()


def test_the_server_declares_the_extension_resources_and_a_catalog(tree: Tree) -> None:
    async def test(client: Client) -> None:
        capabilities = client.server_capabilities
        assert capabilities.extensions == {EXTENSION: {"directoryRead": True}}
        assert capabilities.resources is not None
        assert "pdf" in (client.instructions or "") and "load_skill" in (client.instructions or "")
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {"list_skills", "load_skill", "read_skill_file", "search_skills"}
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "skill://pdf/SKILL.md" in listed
    tree.run(test)


def test_pages_hold_whole_entries_with_the_indexed_digests_and_sizes(tree: Tree) -> None:
    async def test(client: Client) -> None:
        pages, cursor = [], None
        while True:
            page = await call(client, "skills/list", {} if cursor is None else {"cursor": cursor})
            assert page["resultType"] == "complete"
            assert (page["ttlMs"], page["cacheScope"]) == (0, "private")
            pages.append(page["skills"])
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert [len(p) for p in pages] == [4, 2]
        entries = [entry for p in pages for entry in p]
        assert [e["uri"] for e in entries] == [
            f"skill://{w.name}/SKILL.md" for w in tree.index.winners()]
        pdf = next(e for e in entries if e["uri"] == "skill://pdf/SKILL.md")
        assert pdf["frontmatter"] == {"name": "pdf", "description": "Read PDFs.",
                                      "license": "MIT", "metadata": {"version": "2.1"},
                                      "allowed-tools": "Read Grep"}
        on_disk = {p.relative_to(tree.root / "pdf").as_posix(): p.read_bytes()
                   for p in (tree.root / "pdf").rglob("*") if p.is_file()}
        assert {r["uri"]: (r["digest"], r["size"]) for r in pdf["resources"]} == {
            "skill://pdf/" + rel.replace(" ", "%20").replace("%.", "%25."): (sha256(data),
                                                                              len(data))
            for rel, data in on_disk.items()}
        for entry in entries:  # complete: SKILL.md included, every file of the skill
            assert entry["uri"] in {r["uri"] for r in entry["resources"]}
        with pytest.raises(MCPError) as refused:
            await call(client, "skills/list", {"cursor": "bm90LWEtY3Vyc29y"})
        assert refused.value.error.code == -32602
    tree.run(test, page_size=4)


def test_get_answers_for_a_served_skill_and_refuses_anything_else(tree: Tree) -> None:
    async def test(client: Client) -> None:
        got = await call(client, "skills/get", {"uri": "skill://pdf/SKILL.md"})
        listed = (await call(client, "skills/list", {}))["skills"]
        assert got["skill"] == next(e for e in listed if e["uri"] == "skill://pdf/SKILL.md")
        assert (got["ttlMs"], got["cacheScope"]) == (0, "private")
        for uri in ("skill://nope/SKILL.md", "skill://pdf/references/guide.md", "skill://pdf"):
            with pytest.raises(MCPError) as refused:
                await call(client, "skills/get", {"uri": uri})
            assert refused.value.error.code == -32602
    tree.run(test)


def test_directories_list_their_direct_children(tree: Tree) -> None:
    async def test(client: Client) -> None:
        top = await call(client, "resources/directory/read", {"uri": "skill://pdf"})
        assert [(r["uri"], r["mimeType"]) for r in top["resources"]] == [
            ("skill://pdf/SKILL.md", "text/markdown"),
            ("skill://pdf/a%20b%25.txt", "text/plain"),
            ("skill://pdf/references", "inode/directory"),
            ("skill://pdf/scripts", "inode/directory")]
        sub = await call(client, "resources/directory/read", {"uri": "skill://pdf/references"})
        assert [r["name"] for r in sub["resources"]] == ["guide.md"]
        for uri in ("skill://pdf/SKILL.md", "skill://nope", "skill://pdf/references/"):
            with pytest.raises(MCPError) as refused:
                await call(client, "resources/directory/read", {"uri": uri})
            assert refused.value.error.code == -32602
    tree.run(test)


def test_every_listed_file_reads_back_as_its_digest_and_is_audited(tree: Tree) -> None:
    async def test(client: Client) -> None:
        entries = (await call(client, "skills/list", {}))["skills"]
        resources = [r for e in entries for r in e["resources"]]
        for resource in resources:
            data = content_bytes(await client.read_resource(resource["uri"]))
            assert (sha256(data), len(data)) == (resource["digest"], resource["size"])
        binary = (await client.read_resource("skill://pdf/scripts/tool.bin")).contents[0]
        assert isinstance(binary, types.BlobResourceContents)
        events = tree.index.audit()
        assert len(events) == len(resources) + 1
        assert {(e.event, e.level, e.outcome) for e in events} == {("resource.read", 3, "ok")}
        assert {e.session for e in events} == {f"mcp:test-host/{session_token(events)}"}
        assert sum(e.bytes for e in events) == sum(r["size"] for r in resources) + len(BINARY)
    tree.run(test)


def session_token(events: list[Any]) -> str:
    return str(events[0].session).rsplit("/", 1)[1]


CLIENT_NAMES = {"slash": ("victim/deadbeef", "victim%2Fdeadbeef"),
                "percent": ("a%2Fb", "a%252Fb"),
                "unicode": ("hôte ✓", "h%C3%B4te%20%E2%9C%93"),
                "long": ("x" * 300, "x" * 63 + "…"),
                "long-escapes": ("/" * 100, "%2F" * 21 + "…")}


@pytest.mark.parametrize(("name", "shown"), CLIENT_NAMES.values(), ids=CLIENT_NAMES.keys())
def test_the_client_name_cannot_forge_or_push_out_the_connection(tree: Tree, name: str,
                                                                 shown: str) -> None:
    """Each connection keeps its own id in the session, whatever the client calls itself."""
    async def test(client: Client) -> None:
        await client.read_resource("skill://pdf/SKILL.md")

    tree.run(test, client=name)
    tree.run(test, client=name)
    first, second = (str(e.session) for e in tree.index.audit())
    assert first != second
    for session in (first, second):
        assert session.startswith(f"mcp:{shown}/")
        assert session.count("/") == 1
        assert len(session.rsplit("/", 1)[1]) == 8  # this server's own connection id
        assert len(session) <= 4 + 2 * mcp.SESSION_PART + 1


def test_a_changed_file_is_refused_not_served(tree: Tree) -> None:
    guide = tree.root / "pdf" / "references" / "guide.md"

    async def test(client: Client) -> None:
        guide.write_text("# Gxide\n", encoding="utf-8")  # same size, other bytes
        with pytest.raises(MCPError) as refused:
            await client.read_resource("skill://pdf/references/guide.md")
        assert refused.value.error.code == -32603
        assert "changed since it was indexed" in refused.value.error.message
        (event,) = tree.index.audit()
        assert (event.outcome, event.bytes, event.resource) == ("mismatch", 0,
                                                                "references/guide.md")
        assert event.digest == hashlib.sha256(b"# Gxide\n").hexdigest()
    tree.run(test)


def test_unknown_uris_and_path_escapes_are_refused_and_audited(tree: Tree) -> None:
    async def test(client: Client) -> None:
        for uri in ("skill://pdf/nope.md", "skill://nope/SKILL.md", "skill://pdf/../secret.txt",
                    "skill://pdf/references/../../../secret.txt", "file:///etc/passwd"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert refused.value.error.code == -32602, uri
        rows = [(e.skill, e.resource, e.outcome) for e in tree.index.audit()]
        assert rows == [("pdf", "nope.md", "not-found"), ("nope", "SKILL.md", "not-found"),
                        ("pdf", "../secret.txt", "refused"),
                        ("pdf", "references/../../../secret.txt", "refused"),
                        ("file:", "//etc/passwd", "refused")]
        assert all(e.bytes == 0 for e in tree.index.audit())
    tree.run(test)


def test_a_read_waiting_on_the_database_does_not_hold_up_other_requests(tree: Tree) -> None:
    # Another process holds the write lock, so the read's audit row waits for it.
    blocker = sqlite3.connect(str(tree.index.engine.url.database), isolation_level=None)
    server = tree.server()
    reading = anyio.Event()
    read: dict[str, bytes] = {}

    async def note_reads(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "resources/read":
            reading.set()
        return await call_next(ctx)

    server.middleware.append(note_reads)

    async def main() -> None:
        async with Client(server) as client:
            async def read_guide() -> None:
                result = await client.read_resource("skill://pdf/references/guide.md")
                read["guide"] = content_bytes(result)

            blocker.execute("BEGIN IMMEDIATE")
            async with anyio.create_task_group() as group:
                group.start_soon(read_guide)
                await reading.wait()
                with anyio.fail_after(10):
                    listed = await call(client, "skills/list", {})
                assert "guide" not in read  # still waiting for the lock
                blocker.execute("COMMIT")
            assert read["guide"] == b"# Guide\n"
            assert len(listed["skills"]) == 6
    try:
        anyio.run(main)
    finally:
        blocker.close()
    assert [e.outcome for e in tree.index.audit()] == ["ok"]


def test_a_read_after_a_reindex_is_resolved_again(tree: Tree, env: Environment,
                                                  db_url: str) -> None:
    guide = tree.root / "pdf" / "references" / "guide.md"

    async def test(client: Client) -> None:
        guide.write_text("# A longer guide\n", encoding="utf-8")
        with SkillIndex.open(root_settings(tree.root), db=db_url, env=env) as other:
            await anyio.to_thread.run_sync(other.reindex)
        # The server has not looked for a reindex yet (it polls hourly here); the resolution
        # it published from is gone, so the URI is resolved as the index is now.
        data = content_bytes(await client.read_resource("skill://pdf/references/guide.md"))
        assert data == b"# A longer guide\n"
    tree.run(test, poll_seconds=3600)
    (event,) = tree.index.audit()
    assert (event.outcome, event.skill, event.bytes) == ("ok", "pdf", len(b"# A longer guide\n"))


def test_tools_for_hosts_without_the_extension(tree: Tree) -> None:
    async def test(client: Client) -> None:
        listed = await client.call_tool("list_skills", {})
        names = [s["name"] for s in json.loads(listed.content[0].text)]  # type: ignore[union-attr]
        assert names == [w.name for w in tree.index.winners()]
        body = await client.call_tool("load_skill", {"name": "pdf"})
        assert body.content[0].text == "# PDF\n\nSee references/guide.md.\n"  # type: ignore[union-attr]
        guide = await client.call_tool("read_skill_file",
                                       {"uri": "skill://pdf/references/guide.md"})
        assert guide.content[0].text == "# Guide\n"  # type: ignore[union-attr]
        for name, arguments in (("load_skill", {"name": "nope"}),
                                ("read_skill_file", {"uri": "skill://pdf/../secret.txt"}),
                                ("read_skill_file", {"uri": "skill://pdf/scripts/tool.bin"})):
            failed = await client.call_tool(name, arguments)
            assert failed.is_error
        rows = [(e.event, e.level, e.outcome, e.reason) for e in tree.index.audit()]
        # Every attempt is one audit row (docs/audit.md), an unknown name's too, as
        # `skillindex read` writes it; a name of any length keeps a bounded row.
        assert rows == [("skill.read", 2, "ok", "load_skill"),
                        ("resource.read", 3, "ok", "read_skill_file"),
                        ("skill.read", 2, "not-found", "load_skill"),
                        ("resource.read", 3, "refused", "read_skill_file"),
                        ("resource.read", 3, "ok", "read_skill_file")]
        assert [e.skill for e in tree.index.audit() if e.outcome == "not-found"] == ["nope"]
        long = await client.call_tool("load_skill", {"name": "x" * 100_000})
        assert long.is_error
        kept = [e.skill or "" for e in tree.index.audit() if e.outcome == "not-found"]
        assert len(kept) == 2 and kept[1].startswith("xxx") and len(kept[1]) <= 300
    tree.run(test)


def test_a_reindex_is_announced_without_a_restart(tree: Tree, env: Environment,
                                                   db_url: str) -> None:
    async def test(client: Client) -> None:
        async with client.listen(resources_list_changed=True) as subscription:
            write_skill(tree.root, "late", description="Added later.")
            with SkillIndex.open(root_settings(tree.root), db=db_url, env=env) as other:
                await anyio.to_thread.run_sync(other.reindex)
            with anyio.fail_after(10):
                async for _event in subscription:
                    break
        uris = [e["uri"] for e in (await call(client, "skills/list", {}))["skills"]]
        assert "skill://late/SKILL.md" in uris
        late = await client.read_resource("skill://late/SKILL.md")
        assert content_bytes(late).startswith(b"---\nname: late\n")
        assert "late" in (await client.call_tool("list_skills", {})).content[0].text  # type: ignore[union-attr]
    tree.run(test, poll_seconds=0.05)


def test_a_reindex_is_announced_to_a_handshake_era_client(tree: Tree, env: Environment,
                                                          db_url: str) -> None:
    announced = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            announced.set()

    async def main() -> None:
        async with Client(tree.server(poll_seconds=0.05), mode="legacy",
                          message_handler=on_message) as client:
            assert client.protocol_version not in ("2026-07-28",)
            assert "skill://pdf/SKILL.md" in {
                e["uri"] for e in (await call(client, "skills/list", {}))["skills"]}
            write_skill(tree.root, "late", description="Added later.")
            with SkillIndex.open(root_settings(tree.root), db=db_url, env=env) as other:
                await anyio.to_thread.run_sync(other.reindex)
            with anyio.fail_after(10):
                await announced.wait()
    anyio.run(main)


def test_qualified_names_are_prefix_segments(tmp_path: Path, db_url: str,
                                              env: Environment) -> None:
    near, far = tmp_path / "near", tmp_path / "far"
    write_skill(near, "pdf", body="near\n")
    write_skill(far, "pdf", body="far\n")
    settings = replace(root_settings(near, far, validation=Validation.LENIENT),
                       collision_policy="qualify")
    with SkillIndex.open(settings, db=db_url, env=env) as index:
        index.reindex()

        async def test(client: Client) -> None:
            entries = (await call(client, "skills/list", {}))["skills"]
            assert [e["uri"] for e in entries] == ["skill://test.user.1/pdf/SKILL.md",
                                                   "skill://test.user.2/pdf/SKILL.md"]
            assert all(e["frontmatter"]["name"] == "pdf" for e in entries)
            far_body = await client.read_resource("skill://test.user.2/pdf/SKILL.md")
            assert content_bytes(far_body).endswith(b"---\nfar\n")
            assert (await index_read(index, "skill://test.user.2/pdf/SKILL.md")).endswith(
                b"---\nfar\n")

        async def main() -> None:
            async with Client(create_server(index)) as client:
                await test(client)
        anyio.run(main)


async def index_read(index: SkillIndex, uri: str) -> bytes:
    return index.read(uri, reason="test").data


def manifest(tree: Tree, count: int, size: int) -> SkillManifest:
    return SkillManifest("big", tree.index.winners()[0].candidate,
                         {"name": "big", "description": "Big."}, tuple(
        ManifestFile("SKILL.md" if n == 0 else f"f{n}", size, "0" * 32, "0" * 64)
        for n in range(count)))


@pytest.mark.parametrize(("count", "size", "served"), [
    (512, 1, True), (513, 1, False), (1, skills.MAX_BYTES, True), (2, skills.MAX_BYTES // 2, True),
    (2, skills.MAX_BYTES // 2 + 1, False)], ids=["512-files", "513-files", "16MiB", "2x8MiB",
                                                  "over-16MiB"])
def test_the_extension_limits_decide_what_is_served(tree: Tree, count: int, size: int,
                                                    served: bool) -> None:
    reason = skills.withheld_reason(manifest(tree, count, size))
    assert (reason is None) is served


def test_a_skill_over_the_file_limit_is_withheld_and_explain_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    big = write_skill(root, "big")
    write_skill(root, "small")
    for number in range(skills.MAX_FILES):
        (big / f"file-{number:03}.txt").write_text("x", encoding="utf-8")
    isolate_cli(tmp_path, monkeypatch, root)
    # A reindex rejects such a skill by default (skill-too-large); raised, the server's own
    # limit still withholds it.
    config = tmp_path / "config.toml"
    config.write_text(config.read_text().replace("presets = false\n",
                                                 "presets = false\nmax_skill_files = 1000\n"))
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0
    explained = runner.invoke(cli, ["explain", "big"], catch_exceptions=False)
    assert "not served over MCP: 513 files" in explained.output
    as_json = json.loads(runner.invoke(cli, ["--json", "explain", "big"]).output)
    assert as_json["mcp"] == {"served": False,
                              "reason": "513 files; the MCP skills extension serves at most 512"}
    small = json.loads(runner.invoke(cli, ["--json", "explain", "small"]).output)
    assert small["mcp"] == {"served": True, "reason": None}
    with SkillIndex.open() as index:
        async def main() -> None:
            async with Client(create_server(index)) as client:
                uris = [e["uri"] for e in (await call(client, "skills/list", {}))["skills"]]
                assert uris == ["skill://small/SKILL.md"]
                with pytest.raises(MCPError):
                    await call(client, "skills/get", {"uri": "skill://big/SKILL.md"})
                with pytest.raises(MCPError):
                    await client.read_resource("skill://big/file-000.txt")
                # The catalog in the instructions names what is served, by its skill:// URI.
                instructions = client.instructions or ""
                assert "<location>skill://small/SKILL.md</location>" in instructions
                assert "<name>big</name>" not in instructions
                assert str(root) not in instructions
        anyio.run(main)


def test_over_stdio_a_host_lists_reads_and_is_audited(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", body="# PDF\n")
    (skill / "guide.md").write_text("guide\n", encoding="utf-8")
    isolate_cli(tmp_path, monkeypatch, root)
    assert CliRunner().invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0
    server = StdioServerParameters(command=sys.executable, args=["-m", "skillindex", "serve"],
                                   env=dict(os.environ), cwd=str(tmp_path))

    async def main() -> None:
        async with Client(server, client_info=Implementation(name="stdio-host", version="1"),
                          read_timeout_seconds=30) as client:
            assert client.server_capabilities.extensions == {EXTENSION: {"directoryRead": True}}
            (entry,) = (await call(client, "skills/list", {}))["skills"]
            for resource in entry["resources"]:
                data = content_bytes(await client.read_resource(resource["uri"]))
                assert sha256(data) == resource["digest"]
            with pytest.raises(MCPError):
                await client.read_resource("skill://pdf/../outside")
    anyio.run(main)
    with SkillIndex.open() as index:
        rows = [(e.resource, e.outcome, e.session.split("/")[0] if e.session else None)
                for e in index.audit()]
    assert rows == [("SKILL.md", "ok", "mcp:stdio-host"), ("guide.md", "ok", "mcp:stdio-host"),
                    ("../outside", "refused", "mcp:stdio-host")]


@pytest.mark.parametrize(("value", "address"), [
    ("127.0.0.1:8765", ("127.0.0.1", 8765)), (":8765", ("127.0.0.1", 8765)),
    ("8765", ("127.0.0.1", 8765)), ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("[::1]:8765", ("::1", 8765))], ids=["host-port", "port-only", "bare-port", "any", "ipv6"])
def test_http_addresses_default_to_this_machine(value: str, address: tuple[str, int]) -> None:
    assert LISTEN.convert(value, None, None) == address


@pytest.mark.parametrize("value", ["host", "host:", "host:99999", "host:-1"])
def test_a_bad_http_address_is_a_usage_error(value: str) -> None:
    import click

    with pytest.raises(click.BadParameter):
        LISTEN.convert(value, None, None)


def test_over_streamable_http_on_this_machine(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    isolate_cli(tmp_path, monkeypatch, root)
    assert CliRunner().invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0

    async def main(port: int) -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp",
                          client_info=Implementation(name="http-host", version="1")) as c:
            (entry,) = (await call(c, "skills/list", {}))["skills"]
            data = content_bytes(await c.read_resource(entry["uri"]))
            assert sha256(data) == entry["resources"][0]["digest"]

    with serving(tmp_path) as port:
        anyio.run(main, port)
    with SkillIndex.open() as index:
        (event,) = index.audit()
    assert (event.outcome, str(event.session).split("/")[0]) == ("ok", "mcp:http-host")


def test_search_skills_is_typed_read_only_and_finds_a_skill_by_what_it_does(tree: Tree) -> None:
    async def test(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        search = tools["search_skills"]
        properties = search.input_schema["properties"]
        assert (properties["query"]["type"], properties["limit"]["type"]) == ("string",
                                                                            "integer")
        assert search.input_schema["required"] == ["query"]
        assert search.output_schema is not None
        assert search.annotations is not None and search.annotations.read_only_hint is True
        assert search.annotations.destructive_hint is False
        found = await client.call_tool("search_skills",
                                       {"query": "how do I read the text of a PDF?", "limit": 3})
        assert not found.is_error
        assert found.structured_content is not None
        (best, *_) = found.structured_content["result"]
        assert best == {"name": "pdf", "description": "Read PDFs.", "uri": "skill://pdf/SKILL.md",
                        "score": best["score"]} and best["score"] > 0
        some = await client.call_tool("search_skills", {"query": "extra skill", "limit": 2})
        assert some.structured_content is not None
        assert [hit["name"] for hit in some.structured_content["result"]][:2] == [
            "extra-0", "extra-1"] or len(some.structured_content["result"]) == 2
        for arguments in ({"query": "?!"}, {"query": "pdf", "limit": 0},
                          {"query": "pdf", "limit": 51}):
            refused = await client.call_tool("search_skills", arguments)
            assert refused.is_error, arguments
    tree.run(test)


def test_search_skills_leaves_out_what_the_catalog_keeps_from_the_model(
        tmp_path: Path, db_url: str, env: Environment) -> None:
    root = tmp_path / "skills"
    write_skill(root, "invoice-reader", description="Reads invoices.")
    write_skill(root, "invoice-purge", "name: invoice-purge\ndescription: Deletes invoices.\n"
                "disable-model-invocation: true\n")
    with SkillIndex.open(root_settings(root), db=db_url, env=env) as index:
        index.reindex()
        assert {hit.name for hit in index.search("invoices")} == {"invoice-reader",
                                                                  "invoice-purge"}

        async def test(client: Client) -> None:
            found = await client.call_tool("search_skills", {"query": "invoices"})
            assert found.structured_content is not None
            assert [hit["name"] for hit in found.structured_content["result"]] == [
                "invoice-reader"]
        Tree(root, index).run(test)


def test_instructions_that_leave_skills_out_say_how_many_and_name_search_skills(
        tmp_path: Path, db_url: str, env: Environment) -> None:
    root = tmp_path / "skills"
    for number in range(120):
        write_skill(root, f"tool-{number:03d}",
                    description=f"Tool {number} turns one kind of document into another, "
                    "keeping its layout, tables and images as they were.")
    with SkillIndex.open(root_settings(root), db=db_url, env=env) as index:
        index.reindex()

        async def test(client: Client) -> None:
            instructions = client.instructions or ""
            assert "search_skills" in instructions.splitlines()[0]
            last = instructions.splitlines()[-1]
            assert last.startswith("<!-- ") and last.endswith(
                " more skills are not listed here; the search_skills tool finds them by what "
                "they do. -->")
            listed = instructions.count("<skill>")
            assert last == (f"<!-- {120 - listed} more skills are not listed here; the "
                            "search_skills tool finds them by what they do. -->")
        Tree(root, index).run(test)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_the_handshake_hosts_use_declares_the_extension_and_a_changing_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    # What Claude Code, Codex and the MCP Inspector send: the SDK alone trims `extensions`
    # from this era's answer and says resources never change, though a reindex is announced.
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    write_skill(tmp_path / "skills", "pdf")
    assert CliRunner().invoke(cli, ["reindex"]).exit_code == 0
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": version, "capabilities": {},
                             "clientInfo": {"name": "host", "version": "1"}}}
    done = subprocess.run([sys.executable, "-m", "skillindex", "serve"],
                          input=json.dumps(initialize) + "\n", capture_output=True, text=True,
                          timeout=60, check=False)
    answer = json.loads(done.stdout.splitlines()[0])["result"]
    assert answer["protocolVersion"] == version
    capabilities = answer["capabilities"]
    assert capabilities["extensions"] == {skills.EXTENSION: {"directoryRead": True}}
    assert capabilities["resources"]["listChanged"] is True


def test_every_tool_is_read_only_and_idempotent(tree: Tree) -> None:
    async def test(client: Client) -> None:
        tools = (await client.list_tools()).tools
        assert len(tools) == 4
        for tool in tools:
            hints = tool.annotations
            assert hints is not None, tool.name
            assert (hints.read_only_hint, hints.idempotent_hint, hints.destructive_hint) == (
                True, True, False), tool.name
    tree.run(test)


def test_serve_help_names_every_tool(tree: Tree) -> None:
    async def test(client: Client) -> None:
        text = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
        for tool in (await client.list_tools()).tools:
            assert tool.name in text
    tree.run(test)
