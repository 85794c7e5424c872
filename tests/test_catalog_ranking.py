"""The catalog that picks: ranked by a search, by use, and shaped by per-skill modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import CatalogModes, Environment, Settings, parse_settings
from skillindex.errors import ConfigError, IntegrityError, SearchQueryError
from skillindex.model import Validation
from skillindex.query import modes as catalog_modes
from skillindex.query.catalog import (
    SEARCH_COMMAND,
    Catalog,
    CatalogItem,
    SearchHint,
    build,
    build_ranked,
)
from skillindex.query.quick import cached_catalog
from tests.conftest import isolate_cli, root_settings, write_skill

TOPICS = {
    "alpha": "Works with spreadsheets and formulas in tables.",
    "bravo": "Renders charts and plots from a dataset.",
    "charlie": "Fills in PDF forms and flattens them for printing.",
    "delta": "Sends email notifications through a mail server.",
    "echo": "Transcribes audio recordings into text.",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "skills"
    for name, description in TOPICS.items():
        write_skill(path, name, description=description)
    write_skill(path, "foxtrot", "name: foxtrot\ndescription: Deletes PDF files for good.\n"
                "disable-model-invocation: true\n")
    return path


def _open(db_url: str, env: Environment, root: Path, **settings: Any) -> SkillIndex:
    index = SkillIndex.open(Settings(presets=False, roots=root_settings(root).roots, **settings),
                            db=db_url, env=env)
    index.reindex()
    return index


def _names(catalog: Catalog) -> list[str]:
    return [entry.name for entry in catalog.entries]


def test_a_query_puts_the_relevant_skills_first(db_url: str, env: Environment,
                                                root: Path) -> None:
    with _open(db_url, env, root) as index:
        catalog = index.catalog(query="pdf form printing", format="json")
        assert catalog.ranked_by == "query"
        assert _names(catalog)[0] == "charlie"
        assert catalog.entries[0].description == TOPICS["charlie"]
        assert sorted(_names(catalog)) == sorted(TOPICS)  # everything fits: all are listed
        assert index.catalog(format="json").ranked_by == "precedence"


def test_a_tight_budget_keeps_the_most_relevant_in_full(db_url: str, env: Environment,
                                                        root: Path) -> None:
    with _open(db_url, env, root) as index:
        full = index.catalog(query="audio recordings", max_chars=10**6).entries
        first, second, *rest = (CatalogItem(e.name, e.description, e.location) for e in full)
        # Exactly the size of the best match in full and the next by name: whatever the length
        # of the locations, the third skill cannot fit, not even by name (without the line
        # that names the search, which has a test of its own).
        budget = len(build_ranked([first, CatalogItem(second.name, "", second.location)],
                                  max_chars=10**6, fmt="xml").text)
        catalog = index.catalog(query="audio recordings", max_chars=budget, search_hint=None)
        assert [(e.name, e.description, e.truncated) for e in catalog.entries] == [
            ("echo", TOPICS["echo"], False), (second.name, "", True)]
        assert {o.name for o in catalog.omitted} == {item.name for item in rest} | {
            "foxtrot"}  # manual-only
        assert len(catalog.text) == budget
        tiny = index.catalog(query="audio recordings", max_chars=180, search_hint=None)
        assert _names(tiny) == ["echo"]
        assert {o.name for o in tiny.omitted} >= {"alpha", "bravo"}
        assert tiny.as_dict()["ranked_by"] == "query"


def test_manual_only_skills_stay_out_of_the_catalog_but_load(db_url: str, env: Environment,
                                                             root: Path) -> None:
    modes = CatalogModes(manual_only=("delta",))
    with _open(db_url, env, root, catalog=modes) as index:
        catalog = index.catalog()
        assert "foxtrot" not in _names(catalog) and "delta" not in _names(catalog)
        reasons = {o.name: o.reason for o in catalog.omitted}
        assert "disable-model-invocation" in reasons["foxtrot"]
        assert "manual_only pattern 'delta'" in reasons["delta"]
        assert "foxtrot" not in _names(index.catalog(query="pdf"))
        assert index.read("skill://foxtrot", reason="asked by name").text == "# Body\n"
        assert [h.name for h in index.search("deletes pdf")][:1] == ["foxtrot"]
        assert index.explain("foxtrot").as_dict()["catalog_mode"] == {
            "mode": "manual-only", "reason": "its frontmatter says disable-model-invocation: "
            "true (loadable by /skill: and read, not listed for the model)"}


def test_pinned_skills_come_first_in_full(db_url: str, env: Environment, root: Path) -> None:
    modes = CatalogModes(pinned=("e*",), names_only=("bravo",))
    with _open(db_url, env, root, catalog=modes) as index:
        full = index.catalog(max_chars=10**6)
        assert _names(full)[0] == "echo"
        bravo = next(e for e in full.entries if e.name == "bravo")
        assert bravo.description == ""
        squeezed = index.catalog(max_chars=len(full.text) - 60)
        assert squeezed.entries[0].description == TOPICS["echo"]
        assert any(e.truncated for e in squeezed.entries[1:])
        ranked = index.catalog(query="pdf", max_chars=10**6)
        assert _names(ranked)[:2] == ["echo", "charlie"]
        assert index.explain("echo").catalog_mode == (
            "pinned", "name matches [skills.catalog] pinned pattern 'e*'")
        assert index.explain("alpha").catalog_mode is not None


def test_usage_order_follows_successful_loads(db_url: str, env: Environment,
                                              root: Path) -> None:
    with _open(db_url, env, root, catalog_order="usage") as index:
        assert _names(index.catalog())[:2] == ["alpha", "bravo"]  # no use yet: precedence
        for _ in range(2):
            index.read("skill://delta", reason="bench")
        write_skill(root, "charlie", description="Changed since the reindex.")
        for _ in range(5):  # refused loads count for nothing
            with pytest.raises(IntegrityError):
                index.read("skill://charlie", reason="refused")
        catalog = index.catalog()
        assert (catalog.ranked_by, _names(catalog)[0]) == ("usage", "delta")
        for _ in range(3):
            index.read("skill://bravo", reason="more")
        assert _names(index.catalog())[:2] == ["bravo", "delta"]  # the cache saw the loads


def test_the_cache_key_holds_the_query(tmp_path: Path, root: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[skills]\npresets = false\n[[roots]]\npath = "{root}"\n')
    db = str(tmp_path / "i.sqlite")
    request: dict[str, Any] = {"max_chars": 10**6, "context_window": None, "format": "xml",
                               "tools": ("read",)}
    with SkillIndex.open(str(config), db=db, cwd=tmp_path) as index:
        index.reindex()
        audio = index.catalog(query="audio", **request)
        assert cached_catalog(str(config), db=db, cwd=tmp_path, index=None, query="AUDIO!",
                              **request) == audio
        assert cached_catalog(str(config), db=db, cwd=tmp_path, index=None, query="pdf",
                              **request) is None
        assert cached_catalog(str(config), db=db, cwd=tmp_path, index=None,
                              **request) is None
        assert _names(index.catalog(query="pdf", **request))[0] == "charlie"
        assert _names(index.catalog(query="audio", **request))[0] == "echo"
        assert cached_catalog(str(config), db=db, cwd=tmp_path, index=None, query="(((",
                              **request) is None


@pytest.mark.parametrize("query", ['pdf" OR (', "pdf\x00", "NEAR(pdf", "x" * 100_000 + " pdf"])
def test_any_text_ranks_a_catalog(db_url: str, env: Environment, root: Path,
                                  query: str) -> None:
    with _open(db_url, env, root) as index:
        assert _names(index.catalog(query=query))[0] == "charlie"


def test_a_query_without_words_is_refused(db_url: str, env: Environment, root: Path) -> None:
    with _open(db_url, env, root) as index, pytest.raises(SearchQueryError):
        index.catalog(query="((( )))")


def test_ranked_building_reports_every_skill() -> None:
    items = [CatalogItem(f"s{n}", "d" * 40, f"/r/s{n}/SKILL.md") for n in range(20)]
    for limit in (0, 100, 400, 1_000, 10_000):
        catalog = build_ranked(items, max_chars=limit, fmt="markdown")
        assert len(catalog.text) <= limit
        assert len(catalog.entries) + len(catalog.omitted) == 20
        assert Catalog.from_cache(catalog.to_cache()) == catalog
        full = [e for e in catalog.entries if e.description]
        assert catalog.entries[:len(full)] == tuple(full)  # full ones first, then names


def test_pinned_items_survive_names_only_budgets() -> None:
    items = [CatalogItem("pin", "kept whole " * 5, "/p", "pinned"),
             *(CatalogItem(f"s{n}", "x" * 300, f"/r/{n}") for n in range(30))]
    catalog = build(items, max_chars=900, fmt="xml")
    assert catalog.entries[0].description == ("kept whole " * 5).strip()
    assert all(not e.description for e in catalog.entries[1:])


@pytest.mark.parametrize(("document", "message"), [
    ({"skills": {"catalog": {"pinnned": ["x"]}}}, "unknown setting skills.catalog.pinnned"),
    ({"skills": {"catalog": {"pinned": "x"}}}, "must be a list of strings"),
    ({"skills": {"catalog": ["x"]}}, "must be a table"),
    ({"skills": {"catalog_order": "random"}}, "catalog_order must be one of"),
    ({"skills": {"catalog_usage_days": 0}}, "catalog_usage_days must be a whole number"),
    ({"skills": {"catalog_usage_days": "7"}}, "catalog_usage_days must be a whole number"),
])
def test_catalog_settings_are_checked(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_settings(document)


def test_catalog_command_with_a_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      root: Path) -> None:
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    result = runner.invoke(cli, ["catalog", "--query", "email", "--format", "json", "--json"])
    assert result.exit_code == 0, result.output
    assert '"ranked_by": "query"' in result.output
    assert result.output.index('"delta"') < result.output.index('"alpha"')
    refused = runner.invoke(cli, ["catalog", "--query", "***"])
    assert refused.exit_code == 2 and "no word to look for" in refused.output
    explained = runner.invoke(cli, ["explain", "foxtrot"])
    assert "catalog mode: manual-only" in explained.output


def _everything(index: SkillIndex, modes: CatalogModes) -> list[CatalogItem]:
    """What the catalog would show, built the slow way: every winner with its description."""
    items = []
    for winner in index.winners():
        mode = catalog_modes.mode_of(winner, modes)
        if mode.mode is not catalog_modes.Mode.MANUAL_ONLY:
            why = f"mode: {mode.reason}" if mode.mode is catalog_modes.Mode.NAMES_ONLY else ""
            items.append(CatalogItem(winner.name, winner.candidate.description or "",
                                     str(winner.candidate.path), str(mode.mode), why=why))
    pinned = [item for item in items if item.mode == "pinned"]
    return pinned + [item for item in items if item.mode != "pinned"]


@pytest.mark.parametrize("fmt", ["xml", "markdown", "json"])
def test_descriptions_read_for_the_budget_only_give_the_same_catalog(
        db_url: str, env: Environment, tmp_path: Path, fmt: Any) -> None:
    # The catalog reads descriptions only for the skills its budget could show one for; at
    # every budget, from empty to everything, it must equal the catalog built from all of them.
    path = tmp_path / "many"
    for number in range(60):
        description = f"Skill {number} " + "does a useful <thing> & more. " * (number % 7 + 1)
        write_skill(path, f"s{number:02d}", description=description)
    modes = CatalogModes(pinned=("s07", "s41"), names_only=("s1*",), manual_only=("s33",))
    roots = root_settings(path, validation=Validation.LENIENT).roots
    with SkillIndex.open(Settings(presets=False, roots=roots, catalog=modes), db=db_url,
                         env=env) as index:
        index.reindex()
        items = _everything(index, modes)
        assert len(items) == 59
        full = len(build(items, max_chars=10**6, fmt=fmt).text)
        for limit in sorted({0, 40, 120, 300, 700, 1500, 3000, full // 2, full - 1, full}):
            expected = build(items, max_chars=limit, fmt=fmt,
                             hint=SearchHint(SEARCH_COMMAND))
            catalog = index.catalog(max_chars=limit, format=fmt)
            assert catalog.text == expected.text, limit
            assert catalog.entries == expected.entries, limit
            assert set(catalog.omitted_names) == set(expected.omitted_names) | {"s33"}, limit
            ranked = index.catalog(max_chars=limit, format=fmt, query="useful thing")
            assert {e.name for e in ranked.entries} <= {item.name for item in items}
            assert all(not e.truncated for e in ranked.entries if e.description)


def test_the_catalog_line_names_the_search_and_a_setting_turns_it_off(
        db_url: str, env: Environment, tmp_path: Path) -> None:
    root = tmp_path / "many"
    for number in range(80):
        write_skill(root, f"tool-{number:02d}",
                    description=f"Tool {number} converts documents into other formats.")
    with _open(db_url, env, root) as index:
        catalog = index.catalog(max_chars=1_500)
        assert catalog.omitted
        last = catalog.text.splitlines()[-1]
        assert last == (f"<!-- {len(catalog.omitted)} more skills are not listed here; the "
                        'command `skillindex search "what you need"` finds them by what they '
                        "do. -->")
        assert "search_skills" in index.catalog(max_chars=1_500,
                                                search_hint="the search_skills tool").text
        assert "not listed" not in index.catalog(max_chars=1_500, search_hint=None).text
        ranked = index.catalog(max_chars=1_500, query="convert documents", format="json")
        document = json.loads(ranked.text)
        assert document["not_listed"] == len(ranked.omitted)
        assert all(entry.chars > 0 for entry in ranked.entries)
        shown = json.loads(json.dumps(ranked.as_dict()))
        assert all("chars" in entry for entry in shown["entries"])
        assert any(o.reason.startswith("query rank ") for o in ranked.omitted)
    with _open(db_url, env, root, catalog_search_hint=False) as index:
        assert "not listed" not in index.catalog(max_chars=1_500).text


def test_the_search_hint_setting_is_read_and_checked(tmp_path: Path) -> None:
    assert parse_settings({"skills": {"catalog_search_hint": False}}).catalog_search_hint is False
    with pytest.raises(ConfigError, match="catalog_search_hint must be true or false"):
        parse_settings({"skills": {"catalog_search_hint": "no"}})
