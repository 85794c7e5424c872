"""Hostile frontmatter in a whole reindex, on both backends: findings, never an aborted run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skillindex.api import SkillIndex
from skillindex.config import Environment
from skillindex.errors import StoreError
from skillindex.index import frontmatter
from skillindex.model import Status, Validation
from tests.conftest import OpenIndex, root_settings, write_skill


def outcome(index: SkillIndex, directory: str) -> tuple[str, list[str]]:
    for candidate in index.candidates():
        if candidate.directory.name == directory:
            return str(candidate.status), [f.code for f in candidate.findings]
    raise AssertionError(f"{directory} was not indexed")


def test_frontmatter_nested_to_the_parsers_limit_is_a_finding(tmp_path: Path,
                                                              open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    write_skill(root, "deep", "name: deep\ndescription: d\nmetadata: " + "[" * 990 + "]" * 990
                + "\n")
    index = open_index(root, validation=Validation.LENIENT)
    report = index.reindex()
    assert report.seen == 2
    assert outcome(index, "good") == (Status.ACCEPTED, [])
    assert outcome(index, "deep") == (Status.REJECTED, ["yaml-invalid"])


NUL_FIELDS = {
    "description": 'name: bad\ndescription: "a\\0b"\n',
    "name": 'name: "b\\0ad"\ndescription: d\n',
    "license": 'name: bad\ndescription: d\nlicense: "MIT\\0"\n',
    "metadata-value": 'name: bad\ndescription: d\nmetadata:\n  author: "x\\0y"\n',
    "metadata-key": 'name: bad\ndescription: d\nmetadata: {"a\\0": b}\n',
    "nested-list": 'name: bad\ndescription: d\nx-tags: [[a, "\\0"]]\n',
    "top-level-key": 'name: bad\ndescription: d\n"x\\0": y\n',
    "raw-byte-repaired": "name: bad\ndescription: a\0b: c\n",
}


@pytest.mark.parametrize("mode", [Validation.LENIENT, Validation.STRICT])
def test_nul_in_any_field_rejects_the_skill_and_the_reindex_goes_on(
        tmp_path: Path, open_index: OpenIndex, mode: Validation) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    for case, head in NUL_FIELDS.items():
        write_skill(root, case, head)
    index = open_index(root, validation=mode)
    index.reindex()
    assert outcome(index, "good") == (Status.ACCEPTED, [])
    for case in NUL_FIELDS:
        status, codes = outcome(index, case)
        assert status == Status.REJECTED, case
        expected = {"control-character", "name-invalid"}
        if case == "raw-byte-repaired" and mode is Validation.STRICT:
            expected = {"yaml-invalid"}  # strict mode never reads it line by line
        assert expected & set(codes), case
    for candidate in index.candidates():
        for text in (candidate.name, candidate.description,
                     *(finding.message for finding in candidate.findings)):
            assert "\0" not in (text or "")
    catalog = index.catalog(format="xml")
    assert "\0" not in catalog.text
    assert [entry.name for entry in catalog.entries] == ["good"]


def test_other_control_characters_are_kept_exactly_with_a_warning(
        tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "ctl", 'name: ctl\ndescription: "red \\e[31m bell \\a next \\x85 end"\n'
                'metadata:\n  note: "\\x9b"\n')
    index = open_index(root, validation=Validation.STRICT)
    index.reindex()
    [candidate] = index.candidates()
    assert candidate.status == Status.ACCEPTED
    assert candidate.description == "red \x1b[31m bell \x07 next \x85 end"
    messages = {f.message for f in candidate.findings if f.code == "control-character"}
    assert messages == {
        "field 'description' holds control characters (U+0007, U+001B, U+0085); kept, "
        "shown escaped",
        "field 'metadata' holds control characters (U+009B); kept, shown escaped"}


def test_a_name_with_an_invisible_character_is_never_a_second_skill(
        tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    write_skill(root, "pdf\u200b", "description: from the directory name\n")
    write_skill(root, "other", 'name: "pdf\\u202e"\ndescription: declared\n')
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()
    assert [winner.name for winner in index.winners()] == ["pdf"]
    assert outcome(index, "pdf\u200b")[0] == Status.REJECTED
    assert outcome(index, "other")[0] == Status.REJECTED


def test_a_failed_write_names_the_cause_in_one_line_without_the_skills_text(
        tmp_path: Path, pg_url: str, env: Environment) -> None:
    root = tmp_path / "skills"
    write_skill(root, "secret", description="TOP-SECRET-DESCRIPTION")
    with SkillIndex.open(root_settings(root), db=pg_url, env=env) as index:
        with index.engine.begin() as connection:
            connection.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'candidate writes are refused here'; END $$ LANGUAGE plpgsql")
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON candidate FOR EACH ROW "
                "EXECUTE FUNCTION refuse()")
        with pytest.raises(StoreError) as caught:
            index.reindex()
    message = caught.value.message
    assert "candidate writes are refused here" in message
    assert "\n" not in message.strip()
    assert "TOP-SECRET" not in message
    assert "INSERT" not in message


def test_a_lone_surrogate_from_the_pure_python_parser_rejects_the_skill(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where libyaml is missing, PyYAML turns the escape "\ud800" into a lone surrogate, which
    # neither backend can store as text.
    monkeypatch.setattr(frontmatter, "_Loader", yaml.SafeLoader)
    root = tmp_path / "skills"
    write_skill(root, "good")
    write_skill(root, "bad", 'name: bad\ndescription: "a\\ud800b"\nmetadata: {k: "\\udcff"}\n')
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()
    assert outcome(index, "good") == (Status.ACCEPTED, [])
    assert outcome(index, "bad") == (Status.REJECTED, ["control-character", "control-character"])
    [bad] = [c for c in index.candidates() if c.directory.name == "bad"]
    assert bad.description == "a\\ud800b"
