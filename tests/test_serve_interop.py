"""The manifests `skillindex serve` publishes equal agentskills-mcp-server's and the files' own."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from skillindex.api import SkillIndex
from skillindex.config import Environment
from skillindex.serve.mcp import create_server
from tests.conftest import root_settings, write_skill
from tests.test_serve_mcp import call

# agentskills-mcp-server (and agentskills-core under it) needs Python 3.12 or newer.
PROBE = "import agentskills_mcp_server, agentskills_fs"
ENV_PYTHON = "SKILLINDEX_AGENTSKILLS_PYTHON"


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def agentskills_python() -> str | None:
    """A Python that can run agentskills-mcp-server: this one, $SKILLINDEX_AGENTSKILLS_PYTHON,
    or the `.venv312` that `.ci/run` builds."""
    repo = Path(__file__).resolve().parent.parent
    for candidate in (sys.executable, os.environ.get(ENV_PYTHON),
                      str(repo / ".venv312" / "bin" / "python")):
        if candidate and shutil.which(candidate) and subprocess.run(
                [candidate, "-c", PROBE], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


PYTHON = agentskills_python()
needs_agentskills = pytest.mark.skipif(
    PYTHON is None, reason="agentskills-mcp-server is not installed under a Python >= 3.12 "
    f"(pip install agentskills-mcp-server agentskills-fs there, or set {ENV_PYTHON})")


def make_tree(root: Path) -> list[str]:
    pdf = write_skill(root, "pdf", 'name: pdf\ndescription: Read PDFs.\nlicense: MIT\n'
                      'metadata:\n  version: "1.0"\n', body="# PDF\r\nCRLF body\r\n")
    (pdf / "references").mkdir()
    (pdf / "references" / "forms.md").write_text("# Forms\n" * 50, encoding="utf-8")
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "fill.py").write_text("print('fill')\n", encoding="utf-8")
    (pdf / "assets").mkdir()
    (pdf / "assets" / "logo.png").write_bytes(bytes(range(256)) * 4)
    write_skill(root, "docx", 'name: docx\ndescription: "Édite des documents : « Word »."\n')
    notes = write_skill(root, "notes", body="")
    (notes / "empty.txt").write_bytes(b"")
    (notes / "deep" / "er").mkdir(parents=True)
    (notes / "deep" / "er" / "leaf.md").write_text("leaf\n", encoding="utf-8")
    return ["docx", "notes", "pdf"]


async def every_entry(client: Client) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    params: dict[str, Any] = {}
    while True:
        page = await call(client, "skills/list", params)
        entries.update({entry["uri"]: entry for entry in page["skills"]})
        if "nextCursor" not in page:
            return entries
        params = {"cursor": page["nextCursor"]}


def files_of(entry: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {r["uri"]: (r["digest"], r["size"]) for r in entry["resources"]}


@needs_agentskills
def test_digests_and_sizes_equal_agentskills_mcp_server_and_the_disk(
        tmp_path: Path, db_url: str, env: Environment) -> None:
    assert PYTHON is not None
    root = tmp_path / "skills"
    names = make_tree(root)
    config = tmp_path / "agentskills.json"
    config.write_text(json.dumps({
        "name": "reference", "page_size": 2,
        "skills": [{"id": name, "provider": "fs", "options": {"root": str(root)}}
                   for name in names]}), encoding="utf-8")
    reference = StdioServerParameters(command=PYTHON, args=[
        "-m", "agentskills_mcp_server", "--config", str(config)], env=dict(os.environ))
    with SkillIndex.open(root_settings(root), db=db_url, env=env) as index:
        index.reindex()

        async def main() -> tuple[dict[str, Any], dict[str, Any]]:
            async with Client(reference, read_timeout_seconds=60) as theirs:
                expected = await every_entry(theirs)
            async with Client(create_server(index, page_size=2)) as ours:
                return expected, await every_entry(ours)
        expected, published = anyio.run(main)

    assert sorted(published) == sorted(expected) == [f"skill://{n}/SKILL.md" for n in names]
    for uri, entry in published.items():
        assert files_of(entry) == files_of(expected[uri])
        assert entry["frontmatter"] == expected[uri]["frontmatter"]
        for file_uri, (digest, size) in files_of(entry).items():
            rel = file_uri.removeprefix("skill://")
            data = (root / rel).read_bytes()
            assert (digest, size) == ("sha256:" + hashlib.sha256(data).hexdigest(), len(data))
