"""The publication the MCP server answers from: built as far as it is asked for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skillindex.model import ManifestFile, StoredSkill
from skillindex.serve import skills

TOTAL = skills.CHUNK * 3


class Source:
    """Stored skills in catalog order, counting how many were taken."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.taken = 0

    def __iter__(self) -> Iterator[StoredSkill]:
        for number in range(self.count):
            self.taken += 1
            name = f"skill-{number:04d}"
            files = (ManifestFile("SKILL.md", 10, "0" * 32, f"{number:064x}"),
                     ManifestFile("references/a b.md", 3, "0" * 32, "f" * 64))
            front: dict[str, object] = {"name": name, "description": f"Skill {number}."}
            if number % 7 == 3:
                front = {"name": "someone-else", "description": "Misnamed."}  # withheld
            yield StoredSkill(name, "key", front, files)


def test_the_first_skills_are_published_without_building_the_rest() -> None:
    source = Source(TOTAL)
    publication = skills.Publication("g", source)
    publication.extend(5)
    assert len(publication.skills) >= 5
    assert source.taken <= skills.CHUNK
    assert publication.served("skill-0011") is not None
    assert publication.served("skill-0010") is None  # withheld: known without going further
    assert source.taken <= skills.CHUNK
    assert not publication.done


def test_a_complete_publication_has_every_served_skill_in_order() -> None:
    source = Source(TOTAL)
    publication = skills.Publication("g", source).complete()
    assert publication.done and source.taken == TOTAL
    names = [skill.name for skill in publication.skills]
    assert names == [f"skill-{n:04d}" for n in range(TOTAL) if n % 7 != 3]
    assert [w.name for w in publication.withheld] == [
        f"skill-{n:04d}" for n in range(TOTAL) if n % 7 == 3]
    assert publication.entries == [skill.entry for skill in publication.skills]
    first = publication.entries[0]
    assert first["uri"] == "skill://skill-0000/SKILL.md"
    assert [r["uri"] for r in first["resources"]] == [
        "skill://skill-0000/SKILL.md", "skill://skill-0000/references/a%20b.md"]
    assert publication.files["skill://skill-0001/references/a%20b.md"].rel_path == (
        "references/a b.md")
    assert publication.served("skill-0003") is None


@pytest.mark.parametrize("path", ["SKILL.md", "a b%.txt", "é/x.md", "~._-/z", "a?b#c", ""],
                         ids=["plain", "space-percent", "non-ascii", "unreserved", "query",
                              "empty"])
def test_paths_are_quoted_as_quote_would(path: str) -> None:
    from urllib.parse import quote

    assert skills._quoted(path) == quote(path, safe="/")


def test_a_skill_that_cannot_be_published_is_withheld_and_the_others_served() -> None:
    def manifests() -> Iterator[StoredSkill]:
        yield StoredSkill("first", "key", {"name": "first", "description": "One."},
                          (ManifestFile("SKILL.md", 10, "0" * 32, "a" * 64),))
        # A row no reindex writes (edited by hand): a file without a path.
        yield StoredSkill("broken", "key", {"name": "broken", "description": "Two."},
                          (ManifestFile("SKILL.md", 10, "0" * 32, "b" * 64),
                           ManifestFile(None, 3, "0" * 32, "c" * 64)))  # type: ignore[arg-type]
        yield StoredSkill("last", "key", {"name": "last", "description": "Three."},
                          (ManifestFile("SKILL.md", 10, "0" * 32, "d" * 64),))

    publication = skills.Publication("g", manifests()).complete()

    assert [skill.name for skill in publication.skills] == ["first", "last"]
    [withheld] = publication.withheld
    assert withheld.name == "broken"
    assert withheld.reason.startswith("it cannot be published: TypeError")
    assert not [uri for uri in publication.files if "broken" in uri]
