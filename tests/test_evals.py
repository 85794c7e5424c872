"""`skillindex eval`: trigger evals ranked among a small catalog whose answers are known."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from skillindex import evaluate
from skillindex.cli import cli
from skillindex.config import Environment, load_settings
from skillindex.errors import ConfigError
from skillindex.query import evals
from tests import sarifschema
from tests.conftest import isolate_cli, write_skill

INSTALLED = {
    "pdf-forms": "Fill in PDF forms, flatten PDF forms and sign PDF forms.",
    "csv-tools": "Convert, clean and merge CSV files.",
    "git-helper": "Write commit messages and rebase git branches.",
    "flight-status": "Check whether a flight is delayed and its gate.",
}


def queries(*items: tuple[str, bool]) -> str:
    return json.dumps([{"query": q, "should_trigger": s} for q, s in items])


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed catalog, indexed in the settings' SQLite file, and an author's folder of
    skills under test beside it (the current folder is tmp_path)."""
    root = tmp_path / "installed"
    for name, description in INSTALLED.items():
        write_skill(root, name, description=description)
    isolate_cli(tmp_path, monkeypatch, root)
    assert run_cli("reindex").exit_code == 0
    work = tmp_path / "work"
    write_skill(work, "invoice",
                description="Create invoices and bill clients: totals, tax and due dates.")
    (work / "invoice" / "eval_queries.json").write_text(queries(
        ("make an invoice for my client", True), ("bill the client for March", True),
        ("rebase my feature branch", False), ("merge these csv files", False)))
    write_skill(work, "forms", description="Helps with paperwork such as PDF forms.")
    (work / "forms" / "evals").mkdir()
    (work / "forms" / "evals" / "eval_queries.json").write_text(queries(
        ("fill in this pdf form", True), ("help with paperwork", True),
        ("convert a csv file", False)))
    write_skill(work, "weather-alerts",
                description="Weather forecasts and weather alerts for a city or a flight.")
    (work / "weather-alerts" / "eval_queries.json").write_text(queries(
        ("will it rain in Paris tomorrow", True), ("weather alerts for Lyon", True),
        ("is my flight delayed", False), ("which gate is my flight at", False)))
    return work


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def report_of(*args: str, code: int = 0) -> dict[str, Any]:
    result = run_cli("eval", "--json", *args)
    assert result.exit_code == code, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def skill_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["skills"] if s["name"] == name)
    return found


def index_bytes(tmp_path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tmp_path.glob("cli.sqlite*"))}


def test_a_skill_that_wins_its_queries(world: Path) -> None:
    report = report_of("work/invoice")

    invoice = skill_of(report, "invoice")
    assert invoice["problem"] is None
    assert (invoice["recall"], invoice["false_trigger_rate"]) == (1.0, 0.0)
    assert [q["rank"] for q in invoice["queries"]] == [1, 1, None, None]
    assert invoice["path"] == "work/invoice/SKILL.md"
    assert invoice["confusables"] == []
    assert report["k"] == evals.SEARCH_K and report["neighbours"] == len(INSTALLED)
    assert report["ok"] is True


def test_a_skill_shadowed_by_a_neighbour_names_it(world: Path, tmp_path: Path) -> None:
    env = Environment.from_os(cwd=tmp_path)
    against = evaluate.Against(url=f"sqlite:///{tmp_path / 'cli.sqlite'}")

    report = evaluate.run(load_settings(None, env), env, against, [world / "forms"], k=1)

    forms = report.skills[0]
    first = forms.results[0]
    assert (first.query, first.rank, first.triggered) == ("fill in this pdf form", 2, False)
    assert first.ahead == ("pdf-forms",)
    assert forms.recall == 0.5 and forms.confusables() == [("pdf-forms", 1)]
    miss = forms.findings()[0]
    assert miss.code == evals.MISS and miss.line == 3  # the description's line
    assert "ahead of it: pdf-forms" in miss.message


def test_a_skill_that_triggers_on_its_negatives(world: Path) -> None:
    report = report_of("work/weather-alerts")

    weather = skill_of(report, "weather-alerts")
    assert weather["recall"] == 0.5  # "will it rain" has no word of its description
    assert weather["false_trigger_rate"] == 1.0
    assert [q["triggered"] for q in weather["queries"]] == [False, True, True, True]


def test_thresholds_pass_and_fail_as_set(world: Path) -> None:
    assert run_cli("eval", "work/invoice", "--min-recall", "1", "--max-false", "0").exit_code == 0

    failing = run_cli("eval", "work", "--min-recall", "0.6", "--max-false", "0.5")

    assert failing.exit_code == 1
    assert "failing: weather-alerts: recall 0.50 < 0.60" in failing.output
    assert "failing: weather-alerts: false-trigger rate 1.00 > 0.50" in failing.output
    assert [line for line in failing.output.splitlines() if line.startswith("failing:")] == [
        "failing: weather-alerts: recall 0.50 < 0.60",
        "failing: weather-alerts: false-trigger rate 1.00 > 0.50"]
    assert run_cli("eval", "work", "--max-false", "1").exit_code == 0
    assert report_of("work", "--max-false", "0.9", code=1)["failing"] == [
        "weather-alerts: false-trigger rate 1.00 > 0.90"]


def test_the_users_index_is_unchanged_byte_for_byte(world: Path, tmp_path: Path) -> None:
    before = index_bytes(tmp_path)

    assert run_cli("eval", "work").exit_code == 0
    assert run_cli("eval", "work", "--by", "catalog").exit_code == 0

    assert index_bytes(tmp_path) == before
    names = [w["name"] for w in json.loads(run_cli("--json", "list").stdout)]
    assert sorted(names) == sorted(INSTALLED)  # the skills under test were not added to it


def test_the_same_index_and_files_give_the_same_figures(world: Path) -> None:
    first, second = report_of("work"), report_of("work")
    for report in (first, second):
        report.pop("seconds")
    assert first == second


def test_sarif_locates_each_miss_at_the_description(world: Path) -> None:
    result = run_cli("eval", "work", "--format", "sarif")

    log = json.loads(result.stdout)
    assert sarifschema.errors(log) == []
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {evals.MISS, evals.FALSE_TRIGGER}
    for found in results:
        location = found["locations"][0]["physicalLocation"]
        assert location["region"]["startLine"] == 3
        assert location["artifactLocation"]["uri"].startswith("work/")


def test_text_shows_each_query_and_a_summary(world: Path) -> None:
    result = run_cli("eval", "work/weather-alerts")

    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == ("weather-alerts  work/weather-alerts/SKILL.md  recall 0.50, "
                        "false triggers 1.00")
    assert "  FALSE   #2 should not is my flight delayed" in lines
    assert "  MISS     - should     will it rain in Paris tomorrow" in lines
    by_catalog = run_cli("eval", "work/weather-alerts", "--by", "catalog").output.splitlines()
    assert "  FALSE   #2 whole     should not is my flight delayed" in by_catalog
    assert lines[-1].startswith("1 skill, 4 queries (search, k=10, catalog of 8,000 characters)"
                                " against the index")


def test_a_folder_of_distractors_instead_of_the_index(world: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_skill(other, "billing", description="Bill clients and create invoices for them.")

    report = report_of("work/invoice", "--against", "other")

    assert report["neighbours"] == 1
    first = skill_of(report, "invoice")["queries"][0]
    assert first["rank"] in (1, 2) and first["triggered"] is True


def test_queries_outside_the_folder_and_errors_in_one_line(world: Path, tmp_path: Path) -> None:
    outside = tmp_path / "q.json"
    outside.write_text(queries(("sign a pdf form", True)))
    report = report_of("work/forms", "--queries", str(outside))
    assert [q["query"] for q in skill_of(report, "forms")["queries"]] == ["sign a pdf form"]

    (tmp_path / "bad.json").write_text('{"query": "x"}')
    bad = run_cli("eval", "work/forms", "--queries", "bad.json")
    assert bad.exit_code == 2
    assert bad.output.strip().endswith("must be a JSON array of "
                                       '{"query": ..., "should_trigger": ...}')
    write_skill(world, "bare", description="No evals.")
    bare = run_cli("eval", "work/bare")
    assert bare.exit_code == 2 and "has no trigger evals" in bare.output
    postgres = run_cli("eval", "work/invoice", "--against", "postgresql://h/db")
    assert postgres.exit_code == 2 and "SQLite" in postgres.output
    assert len(postgres.output.splitlines()) == 1


@pytest.mark.parametrize(("text", "why"), [
    ("[]", "holds no query"),
    ('[{"query": "", "should_trigger": true}]', "query 1 must be"),
    ('[{"query": "a", "should_trigger": "yes"}]', "query 1 must be"),
    ("[" * 100_000, "nests deeper"),
    ("\xff", "not UTF-8"),
    ("[1, 2", "not valid JSON"),
], ids=["empty", "empty-query", "not-bool", "deep", "not-utf8", "not-json"])
def test_eval_files_are_judged(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "eval_queries.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError, match=why):
        evals.read_queries(path)


def test_without_paths_every_skill_of_the_index_with_evals(world: Path, tmp_path: Path) -> None:
    (tmp_path / "installed" / "csv-tools" / "eval_queries.json").write_text(queries(
        ("merge two csv files", True), ("fill a pdf form", False)))

    report = report_of()

    assert [s["name"] for s in report["skills"]] == ["csv-tools"]
    assert skill_of(report, "csv-tools")["recall"] == 1.0


def test_files_a_hook_hands_over_name_their_skills(world: Path, tmp_path: Path) -> None:
    write_skill(world, "bare", description="No evals.")
    (tmp_path / "README.md").write_text("not a skill")
    files = ["work/invoice/SKILL.md", "work/invoice/eval_queries.json", "work/bare/SKILL.md",
             "README.md"]

    report = report_of(*files)

    assert [s["name"] for s in report["skills"]] == ["invoice"]
    nothing = run_cli("eval", "README.md", "work/bare/SKILL.md", "--min-recall", "1")
    assert nothing.exit_code == 0
    assert nothing.output == "no skill with trigger evals among the paths\n"


def test_by_catalog_a_skill_counts_when_its_entry_stays_whole(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    root = tmp_path / "installed"
    for number in range(60):  # some 12,000 characters of descriptions: over the 8,000 budget
        write_skill(root, f"tool-{number:02}", description=f"Tool {number} handles " + " ".join(
            f"chore{number}x{word}" for word in range(20)))
    isolate_cli(tmp_path, monkeypatch, root)
    assert run_cli("reindex").exit_code == 0
    write_skill(tmp_path / "work", "invoice",
                description="Create invoices and bill clients: totals, tax and due dates.")
    (tmp_path / "work" / "invoice" / "eval_queries.json").write_text(queries(
        ("make an invoice for my client", True), ("chore7x3 for tool 7", False)))

    report = report_of("work/invoice", "--by", "catalog")

    results = skill_of(report, "invoice")["queries"]
    assert [(r["catalog"], r["triggered"]) for r in results] == [
        ("whole", True), ("left-out", False)]
    assert results[1]["rank"] is None  # not matched by the search either


def test_an_index_in_use_is_copied_as_a_reader_shares_it(world: Path, tmp_path: Path) -> None:
    database = tmp_path / "cli.sqlite"
    holder = sqlite3.connect(database)  # another process's connection keeps a write-ahead log
    try:
        holder.execute("SELECT count(*) FROM candidate").fetchall()
        assert (tmp_path / "cli.sqlite-wal").exists()
        before = hashlib.sha256(database.read_bytes()).hexdigest()

        report = report_of("work/invoice", "--against", str(database))

        assert skill_of(report, "invoice")["recall"] == 1.0
        assert report["neighbours"] == len(INSTALLED)
        assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    finally:
        holder.close()


def test_a_missing_index_is_named_in_one_line(world: Path, tmp_path: Path) -> None:
    result = run_cli("eval", "work/invoice", "--against", str(tmp_path / "none.sqlite"))

    assert result.exit_code == 3
    assert result.output.startswith(f"skillindex: error: no index at {tmp_path / 'none.sqlite'}")
    assert len(result.output.splitlines()) == 1
    assert not (tmp_path / "none.sqlite").exists()
