"""URIs as a client may send them (a thousand segments, a backslash, a trailing slash, any
text): one verdict and the same bytes from the CLI, the library, the fast path and MCP."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError

from skillindex import NotFoundError, SkillIndexError
from skillindex.cli import cli
from skillindex.serve.mcp import create_server
from tests.conftest import isolate_home
from tests.fuzzing import examples
from tests.test_serve_mcp import call
from tests.test_uri import REFUSED, Root, Tree, every_surface

DEEP = "skill://pdf/" + "/".join(["a"] * 1000)


def pdf_tree(base: Path, db: str | None = None) -> Tree:
    tree = Tree(base, db or str(base / "index.sqlite"), [Root("r", 10)])
    tree.skill("r", "pdf", "pdf")
    tree.file("r/pdf/forms.md", b"forms\n")
    tree.file("r/pdf/back\\slash.md", b"a backslash\n")
    tree.file("r/pdf/a/a/a/a/deep.md", b"deep\n")
    tree.index()
    return tree


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str) -> Tree:
    """The tree, indexed on each backend (the store holds the manifests every surface reads)."""
    isolate_home(tmp_path, monkeypatch)
    return pdf_tree(tmp_path, db_url)


def test_a_uri_of_a_thousand_segments_is_not_found_by_the_library(tree: Tree) -> None:
    with tree.open() as index, pytest.raises(NotFoundError):
        index.read(DEEP)


def test_a_uri_of_a_thousand_segments_is_not_found_by_the_cli(tree: Tree) -> None:
    # Past 4,096 characters no file can be named (PATH_MAX): refused before any lookup.
    for uri, code in ((DEEP, 3), ("skill://" + "/".join(["pdf"] * 5000), 4)):
        result = CliRunner().invoke(cli, ["--config", str(tree.config), "--db", tree.db, "read",
                                          uri], catch_exceptions=False)
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output and "RecursionError" not in result.output


def test_a_file_with_a_backslash_gets_one_verdict_on_every_surface(tree: Tree) -> None:
    uris = ["skill://pdf/back%5Cslash.md", "skill://pdf/back\\slash.md",
            "skill://pdf/forms.md"]
    served, seen = every_surface(tree, uris)
    assert not any("%5C" in uri or "\\" in uri for uri in served.digests)
    for uri in uris[:2]:
        answers = seen[uri]
        assert answers["library"] == f"{REFUSED}: PathRefusedError", answers
        assert answers["mcp"] == REFUSED
        assert answers["fast"] in (None, answers["library"])
    assert seen["skill://pdf/forms.md"]["mcp"] == b"forms\n"


def directory(tree: Tree, uri: str) -> list[str] | str:
    async def main() -> list[str] | str:
        with tree.open() as index:
            async with Client(create_server(index)) as client:
                try:
                    listed = await call(client, "resources/directory/read", {"uri": uri})
                except MCPError:
                    return REFUSED
                return [item["uri"] for item in listed["resources"]]
    return anyio.run(main)


def test_a_folder_is_listed_by_the_uri_read_accepts_only(tree: Tree) -> None:
    assert directory(tree, "skill://pdf") == ["skill://pdf/SKILL.md", "skill://pdf/a",
                                              "skill://pdf/forms.md"]
    for uri in ("skill://pdf/", "skill://pdf//a", "skill://pdf/a/", "skill://pdf/%2E/a"):
        assert directory(tree, uri) == REFUSED, uri
    assert directory(tree, "skill://pdf/a/a") == ["skill://pdf/a/a/a"]


# -- Any URI, every surface ----------------------------------------------------------------

SEGMENT = st.one_of(st.sampled_from(["pdf", "a", "forms.md", "deep.md", "SKILL.md", "", ".",
                                     "..", "back\\slash.md", "back%5Cslash.md", "%2e", "%2F",
                                     "%00", "a%20b"]),
                    st.text(st.characters(codec="utf-8"), max_size=4))


@st.composite
def uris(draw: st.DrawFn) -> str:
    segments = draw(st.lists(SEGMENT, min_size=1, max_size=6))
    if draw(st.booleans()):
        segments += ["a"] * draw(st.integers(0, 1200))
    return draw(st.sampled_from(["skill://", "SKILL://", "skill:/", ""])) + "/".join(segments)


@settings(max_examples=examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(uris(), min_size=1, max_size=8))
def test_any_uri_gets_one_verdict_and_the_same_bytes_everywhere(asked: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        with pytest.MonkeyPatch.context() as patch:
            isolate_home(base, patch)
            tree = pdf_tree(base)
            served, seen = every_surface(tree, asked)
            cli_answers = {uri: cli_read(tree, uri) for uri in asked}
    for uri in asked:
        answers: dict[str, Any] = seen[uri]
        library = answers["library"]
        assert answers["fast"] in (None, library), (uri, answers)
        assert cli_answers[uri] == (library if isinstance(library, bytes) else REFUSED), uri
        if isinstance(library, bytes):
            assert answers["mcp"] in (library, REFUSED), (uri, answers)
        else:
            assert answers["mcp"] == REFUSED, (uri, answers)
    for uri in served.digests:
        assert isinstance(seen[uri]["library"], bytes)


def cli_read(tree: Tree, uri: str) -> bytes | str:
    result = CliRunner().invoke(cli, ["--config", str(tree.config), "--db", tree.db, "read",
                                      "--", uri], catch_exceptions=False)
    if result.exit_code == 0:
        return result.stdout_bytes
    assert result.exit_code in (2, 3, 4), result.output
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return REFUSED


def test_the_library_refuses_what_the_cli_refuses(tree: Tree) -> None:
    with tree.open() as index, pytest.raises(SkillIndexError):
        index.read("skill://pdf/")
