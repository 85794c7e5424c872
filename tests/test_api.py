"""The library facade's own use cases that no other module's tests cover."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from skillindex.errors import SkillNotFoundError
from skillindex.model import Validation
from tests.conftest import OpenIndex, write_skill


def test_manifest_is_the_stored_frontmatter_and_files(tmp_path: Path,
                                                      open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", "name: pdf\ndescription: Fill forms.\nmetadata:\n"
                        "  owner: docs\n")
    (skill / "references").mkdir()
    (skill / "references" / "forms.md").write_text("# Forms\n")
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()

    manifest = index.manifest("pdf")

    assert manifest.name == "pdf"
    assert manifest.frontmatter == {"name": "pdf", "description": "Fill forms.",
                                    "metadata": {"owner": "docs"}}
    assert [(f.rel_path, f.size, f.sha256) for f in manifest.files] == [
        (rel, (skill / rel).stat().st_size, hashlib.sha256((skill / rel).read_bytes()).hexdigest())
        for rel in ("SKILL.md", "references/forms.md")]


def test_manifest_fills_a_missing_name_and_knows_only_winners(tmp_path: Path,
                                                              open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "nameless", "description: No name field.\n")
    write_skill(root, "off", "name: off\ndescription: Switched off.\nenabled: false\n")
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()

    assert index.manifest("nameless").frontmatter["name"] == "nameless"
    with pytest.raises(SkillNotFoundError):
        index.manifest("off")
