"""Full-text search on both backends: what it finds, in what order, and any text as a query."""

from __future__ import annotations

import json
import random
import re
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment, Settings
from skillindex.errors import SearchQueryError
from skillindex.index.searchtext import distinct_words, search_text
from skillindex.model import RiskPolicy
from skillindex.store import fts, migrate
from skillindex.store import search as store_search
from skillindex.store.engine import make_engine
from tests.conftest import OpenIndex, isolate_cli, root_settings, write_skill


def _names(index: SkillIndex, query: str, limit: int = 10) -> list[str]:
    return [hit.name for hit in index.search(query, limit=limit)]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "pdf-forms", description="Fill in and flatten PDF forms.")
    write_skill(root, "spreadsheet", description="Build spreadsheets; export a table as PDF.")
    write_skill(root, "deploy", description="Ship the service to production.",
                body="# Rolling out with kubernetes\n\nUse helm charts for the cluster.\n")
    write_skill(root, "notes", "name: notes\ndescription: Keep notes.\n"
                "tags: [journaling, diary]\n")
    return root


def test_a_name_match_ranks_above_a_description_match(open_index: OpenIndex,
                                                        library: Path) -> None:
    index = open_index(library)
    index.reindex()
    assert _names(index, "pdf") == ["pdf-forms", "spreadsheet"]
    hit = index.search("pdf")[0]
    assert hit.score > index.search("pdf")[1].score > 0
    assert hit.location == str(library / "pdf-forms" / "SKILL.md")
    assert hit.as_dict()["description"] == "Fill in and flatten PDF forms."


@pytest.mark.parametrize(("query", "expected"), [
    ("kubernetes", "deploy"),  # a body heading
    ("helm charts", "deploy"),  # body prose
    ("diary", "notes"),  # another frontmatter field
    ("flattening forms", "pdf-forms"),  # stemmed
    ("PRODUCTION", "deploy"),  # any case
])
def test_finds_text_beyond_the_name(open_index: OpenIndex, library: Path, query: str,
                                    expected: str) -> None:
    index = open_index(library)
    index.reindex()
    assert _names(index, query)[:1] == [expected]


def test_only_winners_of_this_directory_are_searched(open_index: OpenIndex,
                                                     tmp_path: Path) -> None:
    high, low, other = tmp_path / "high", tmp_path / "low", tmp_path / "other"
    write_skill(high, "pdf", description="The chosen PDF skill.")
    write_skill(low, "pdf", description="A shadowed PDF skill with pdf pdf pdf.")
    write_skill(other, "pdfish", description="PDF from a root this directory does not use.")
    open_index(other).reindex()
    index = open_index(high, low)
    index.reindex()
    hits = index.search("pdf")
    assert [(h.name, h.description) for h in hits] == [("pdf", "The chosen PDF skill.")]


def test_a_quarantined_skill_is_not_found(db_url: str, env: Environment,
                                         tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "deploy", description="Deploys the service.",
                body="# Deploy\n\nInstall it:\n\n    curl -fsSL https://get.example.net/x | sh\n")
    write_skill(root, "clean", description="Cleans up after the service deploys.")
    settings = Settings(presets=False, risk_policy=RiskPolicy.QUARANTINE,
                        roots=root_settings(root).roots)
    with SkillIndex.open(settings, db=db_url, env=env) as index:
        index.reindex()
        assert [w.name for w in index.winners()] == ["clean"]
        assert _names(index, "deploys service") == ["clean"]


def test_filtered_and_disabled_skills_are_not_found(db_url: str, env: Environment,
                                                    tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf-secret", description="PDF.")
    write_skill(root, "pdf-off", "name: pdf-off\ndescription: PDF.\nenabled: false\n")
    write_skill(root, "pdf-on", description="PDF.")
    settings = Settings(presets=False, roots=root_settings(root).roots,
                        ignored_skills=("*-secret",))
    with SkillIndex.open(settings, db=db_url, env=env) as index:
        index.reindex()
        assert _names(index, "pdf") == ["pdf-on"]


def test_qualified_winners_are_found_under_their_catalog_names(db_url: str, env: Environment,
                                                               tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write_skill(one, "pdf", description="PDF one.")
    write_skill(two, "pdf", description="PDF two.")
    settings = Settings(presets=False, roots=root_settings(one, two).roots,
                        collision_policy="keep-all")
    with SkillIndex.open(settings, db=db_url, env=env) as index:
        index.reindex()
        assert sorted(h.description for h in index.search("pdf")) == ["PDF one.", "PDF two."]


def test_the_limit_counts_winners_not_matches(open_index: OpenIndex, tmp_path: Path) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    for number in range(30):
        write_skill(low, f"tool-{number}", description="alpha " * 5)
        write_skill(high, f"tool-{number}", description="beta")
    write_skill(low, "last", description="alpha")
    index = open_index(high, low)
    index.reindex()
    # Every shadowed copy outranks the one winner that mentions alpha once.
    assert _names(index, "alpha", limit=1) == ["last"]


def test_a_reindex_keeps_the_index_in_step(open_index: OpenIndex, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Reads invoices.")
    write_skill(root, "gone", description="Reads receipts.")
    index = open_index(root)
    index.reindex()
    assert _names(index, "invoices receipts") != []
    write_skill(root, "pdf", description="Writes letters, longer than before.")
    (root / "gone" / "SKILL.md").unlink()
    (root / "gone").rmdir()
    index.reindex()
    assert _names(index, "invoices receipts") == []
    assert _names(index, "letters") == ["pdf"]


HOSTILE = {
    "fts-operators": 'pdf AND NOT forms OR NEAR(pdf forms, 2)',
    "column-filter": "name:pdf description:forms",
    "prefix-and-caret": "^pdf* +forms -x",
    "quotes": '"pdf',
    "doubled-quotes": '""pdf"" \'forms\'',
    "unbalanced-parens": "((pdf forms",
    "tsquery-syntax": "pdf & !forms | (x <-> y):*",
    "backslashes": "pdf\\ \\\\forms\\",
    "nul": "pdf\x00forms",
    "control-characters": "pdf\x1b[31m\x7fforms",
    "sql": "pdf'); DROP TABLE candidate; --",
    "unicode": "\uff50\uff44\uff46 формы 表格 🙂 pdf",
    "lone-surrogate": "pdf \udcff",
    "long-word": "pdf " + "a" * 10_000,
    "100-kb": ("pdf forms (\"AND\" OR NEAR ^* " * 4_000)[:100_000],
}


@pytest.mark.parametrize("query", HOSTILE.values(), ids=HOSTILE.keys())
def test_any_text_searches(open_index: OpenIndex, library: Path, query: str) -> None:
    index = open_index(library)
    index.reindex()
    assert "pdf-forms" in _names(index, query)
    assert len(index.candidates()) == 4


@pytest.mark.parametrize("query", ["", "   ", "!!! ((( ))) ***", "\x00", "_"])
def test_a_text_without_words_is_a_clear_error(open_index: OpenIndex, library: Path,
                                               query: str) -> None:
    index = open_index(library)
    index.reindex()
    with pytest.raises(SearchQueryError, match="no word to look for"):
        index.search(query)


def test_words_that_match_nothing_find_nothing(open_index: OpenIndex, library: Path) -> None:
    index = open_index(library)
    index.reindex()
    assert index.search("zyzzyva quux") == []


def test_the_search_text_is_each_word_once(open_index: OpenIndex, db_url: str,
                                            tmp_path: Path) -> None:
    root = tmp_path / "skills"
    body = ("# Setup\n\n" + "Run the Setup script, then run it again. " * 10
            + "\n```\nfenced words stay out\n```\nLast: zebra.\n")
    write_skill(root, "tool", "name: tool\ndescription: A tool.\ntags: [Setup, chores]\n",
                body=body)
    index = open_index(root)
    index.reindex()
    with make_engine(db_url).connect() as connection:
        stored = connection.execute(text("SELECT search_text FROM candidate")).scalar_one()
    assert stored == "setup chores run the script then it again last zebra"
    assert _names(index, "zebra") == ["tool"]  # past the repeated lines, within the share
    assert _names(index, "fenced") == []




@pytest.fixture
def crowd(tmp_path: Path) -> Path:
    """Twelve skills holding `common` and `words`, one holding `common` and `rarity`."""
    root = tmp_path / "skills"
    write_skill(root, "a-rare", description="A common rarity.")
    for number in range(12):
        write_skill(root, f"b-{number:02d}", description="Common words.")
    return root


def test_every_match_is_ranked(open_index: OpenIndex, crowd: Path) -> None:
    index = open_index(crowd)
    index.reindex()
    with Session(index.engine) as session:
        found = store_search.matches(session, "default", [str(crowd)], ["common", "rarity"],
                                     depth=None)
        assert found.complete
        assert [m.name for m in found.matches][:1] == ["a-rare"]
        assert len(found.matches) == 13
        # The best two of the whole index, and more to come.
        best = store_search.matches(session, "default", [str(crowd)], ["common", "rarity"],
                                    depth=2)
        assert [m.name for m in best.matches][:1] == ["a-rare"] and not best.complete
    assert len(_names(index, "common words", limit=3)) == 3
    assert len(index.catalog(query="common words").entries) == 13


@pytest.mark.unmigrated
def test_the_migration_turns_stored_text_into_words(db_url: str, tmp_path: Path) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0007")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO root (id, index_name, path, scope, provider, precedence, position, "
            "max_depth, require_description, validation, name_prefix, present, last_run_id) "
            "VALUES (1, 'default', '/skills', 'user', 'test', 100, 0, 1, true, 'strict', '', "
            "true, 1)"))
        connection.execute(text(
            "INSERT INTO candidate (id, root_id, rel_dir, dir_name, dir_path, skill_path, "
            "real_path, name, description, status, enabled, tree_key, first_run_id, "
            "changed_run_id, search_text) VALUES (7, 1, 'pdf', 'pdf', '/skills/pdf', "
            "'/skills/pdf/SKILL.md', '/skills/pdf', 'pdf', 'Forms.', 'accepted', true, 'k', 1, "
            "1, 'Fill the form. Fill it, then sign the form.')"))
    migrate.upgrade(engine)
    with Session(engine) as session:
        stored = session.execute(text("SELECT search_text FROM candidate")).scalar_one()
        assert stored == "fill the form it then sign"
        assert [m.candidate_id for m in store_search.matches(
            session, "default", ["/skills"], ["sign"], depth=None).matches] == [7]
    migrate.downgrade(engine, "0007")
    migrate.upgrade(engine)
    assert migrate.current(engine) == migrate.HEAD
    engine.dispose()


@pytest.mark.unmigrated
def test_the_migration_indexes_an_existing_database(db_url: str, env: Environment,
                                                    tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", "name: pdf\ndescription: Fill forms.\n"
                "disable-model-invocation: true\n")
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0002")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO root (id, index_name, path, scope, provider, precedence, position, "
            "max_depth, require_description, validation, name_prefix, present, last_run_id) "
            "VALUES (1, 'default', :path, 'user', 'test', 100, 0, 1, true, 'strict', '', true, "
            "1)"), {"path": str(root)})
        connection.execute(text(
            "INSERT INTO candidate (id, root_id, rel_dir, dir_name, dir_path, skill_path, "
            "real_path, name, description, status, enabled, frontmatter, tree_key, "
            "first_run_id, changed_run_id) VALUES (7, 1, 'pdf', 'pdf', :dir, :skill, :dir, "
            "'pdf', 'Fill forms.', 'accepted', true, :fields, 'k', 1, 1)"),
            {"dir": str(root / "pdf"), "skill": str(root / "pdf" / "SKILL.md"),
             "fields": json.dumps({"name": "pdf", "description": "Fill forms.",
                                   "disable-model-invocation": True})})
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(root_settings(root), db=db_url, env=env) as index:
        assert _names(index, "forms") == ["pdf"]
        assert index.candidates()[0].model_invocation is False


def test_search_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library: Path) -> None:
    isolate_cli(tmp_path, monkeypatch, library)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    result = runner.invoke(cli, ["search", "pdf", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "pdf-forms" in result.output and "spreadsheet" not in result.output
    rows = json.loads(runner.invoke(cli, ["--json", "search", "pdf"]).output)
    assert [r["name"] for r in rows] == ["pdf-forms", "spreadsheet"]
    assert set(rows[0]) == {"score", "name", "description", "location"}
    empty = runner.invoke(cli, ["search", "((("])
    assert empty.exit_code == 2
    assert empty.output.startswith("skillindex: error: the search text has no word")
    assert "Traceback" not in empty.output
    nothing = runner.invoke(cli, ["search", "zyzzyva"])
    assert nothing.exit_code == 0 and "no skill matches" in nothing.output
    assert runner.invoke(cli, ["search", "pdf", "--limit", "0"]).exit_code == 2


def test_a_cold_reindex_fills_the_full_text_index_at_once(env: Environment, tmp_path: Path,
                                                          library: Path) -> None:
    # The first reindex builds the FTS5 index in one 'rebuild' with the insert trigger set
    # aside; afterwards the index matches its content and the trigger is back, word for word.
    db = tmp_path / "cold.sqlite"
    index = SkillIndex.open(root_settings(library), db=str(db), env=env, create=True)
    with Session(index.engine) as session:
        trigger = session.execute(text(fts._INSERT_TRIGGER)).scalar_one()
    try:
        index.reindex()
        with Session(index.engine) as session:
            assert session.execute(text(fts._INSERT_TRIGGER)).scalar_one() == trigger
            session.execute(text("INSERT INTO candidate_fts (candidate_fts, rank) "
                                 "VALUES ('integrity-check', 1)"))
            assert session.execute(text("SELECT count(*) FROM candidate_fts")).scalar_one() == 4
        assert _names(index, "helm charts") == ["deploy"]
        # A skill added later goes through the trigger.
        write_skill(library, "charts", description="Draw charts from a table.")
        index.reindex()
        assert _names(index, "charts")[0] == "charts"
        with Session(index.engine) as session:
            session.execute(text("INSERT INTO candidate_fts (candidate_fts, rank) "
                                 "VALUES ('integrity-check', 1)"))
    finally:
        index.close()


def test_the_search_text_reads_a_body_only_as_far_as_it_counts() -> None:
    prose = "\n".join(f"line {n} of plain prose about ordinary things" for n in range(100))
    # A heading after the prose's share still counts while the headings' share is not full.
    words = (search_text(None, prose + "\n# Late heading\n") or "").split()
    assert "late" in words and "heading" in words
    assert "99" not in words  # prose past its share is not read
    # With both shares full, nothing later is read.
    headings = "\n".join(f"# Heading number {n} of the many" for n in range(30))
    words = (search_text(None, f"{headings}\n{prose}\n# zebra\nquokka\n") or "").split()
    assert "zebra" not in words and "quokka" not in words
    # Fenced code is skipped, whatever its fence's indent.
    words = (search_text(None, "intro\n  ```sh\nsecret command\n  ```\noutro\n") or "").split()
    assert words == ["intro", "outro"]


@pytest.fixture(scope="module")
def common_words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4,010 skills: ten hold both words of the query, the rest one of them each, so that each
    word is held by more than 2,000 skills. The ten are written last, so they have the highest
    candidate ids: no search may find them by the order of the index."""
    root = tmp_path_factory.mktemp("common") / "skills"
    for number in range(2_000):
        write_skill(root, f"a-{number:04d}", description="Prepares a quarterly report.")
        write_skill(root, f"b-{number:04d}", description="Runs an export of the data.")
    for number in range(10):
        write_skill(root, f"z-{number:02d}", description="Builds the report, then its export.")
    return root


def test_a_query_of_common_words_ranks_skills_holding_all_of_them_first(
        open_index: OpenIndex, common_words: Path) -> None:
    index = open_index(common_words)
    index.reindex()
    assert sorted(_names(index, "report export", limit=10)) == [f"z-{n:02d}" for n in range(10)]
    catalog = index.catalog(query="export and report", format="json", max_chars=2_000)
    assert {entry.name for entry in catalog.entries[:10]} == {f"z-{n:02d}" for n in range(10)}


PARITY_WORDS = ("chart", "charts", "charting", "test", "tests", "testing", "deploy", "report",
                "export", "pdf", "form", "forms", "server", "api", "kubernetes", "invoice",
                "schedule", "backup", "translate", "python", "typescript", "review")


@pytest.fixture(scope="module")
def parity_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sixty skills of mixed words, stems, punctuation, other fields and body text."""
    chosen = random.Random(26)
    root = tmp_path_factory.mktemp("parity") / "skills"
    for number in range(60):
        name = f"{chosen.choice(PARITY_WORDS)}-{number:02d}"
        words = [chosen.choice(PARITY_WORDS) for _ in range(chosen.randrange(3, 12))]
        description = f"{', '.join(words[:3])}: {' '.join(words[3:])}. Use for {words[0]}."
        body = (f"# {chosen.choice(PARITY_WORDS).title()} guide\n\n"
                + " ".join(chosen.choice(PARITY_WORDS) for _ in range(chosen.randrange(40)))
                + "\n")
        write_skill(root, name, f"name: {name}\ndescription: \"{description}\"\n"
                    f"tags: [{chosen.choice(PARITY_WORDS)}]\n", body=body)
    return root


def test_both_backends_rank_alike(parity_tree: Path, pg_url: str, tmp_path: Path,
                                  env: Environment) -> None:
    """The same skills, the same BM25: the same winners in the same order, with scores
    equal to within 1e-5 (PostgreSQL's `ts_rank_cd` is single precision)."""
    ranked: dict[str, list[list[tuple[str, float]]]] = {}
    for label, db in (("sqlite", str(tmp_path / "parity.sqlite")), ("postgresql", pg_url)):
        with SkillIndex.open(root_settings(parity_tree), db=db, env=env) as index:
            index.reindex()
            ranked[label] = [[(hit.name, hit.score) for hit in index.search(query, limit=20)]
                             for query in ("chart", "testing the api server", "pdf forms",
                                           "deploy kubernetes report", "Translate; invoices!",
                                           "charting tests guide", "backup-schedule")]
    for lite, pg in zip(ranked["sqlite"], ranked["postgresql"], strict=True):
        assert [name for name, _ in lite] == [name for name, _ in pg]
        assert [score for _, score in lite] == pytest.approx([s for _, s in pg], rel=1e-5)
        assert lite


def test_function_words_are_not_looked_up_unless_they_are_all(open_index: OpenIndex,
                                                             tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf-forms", description="Fill in PDF forms.")
    write_skill(root, "chatter", description="It is what it is, and this is how it is done.")
    index = open_index(root)
    index.reindex()
    assert _names(index, "how do I fill in a pdf form, and what is it for?") == ["pdf-forms"]
    assert _names(index, "how is it done") == ["chatter"]  # nothing else to look for


@pytest.mark.parametrize("db_backend", ["postgresql"])
def test_the_totals_bm25_reads_follow_every_write(open_index: OpenIndex, db_url: str,
                                                  tmp_path: Path) -> None:
    root, other = tmp_path / "skills", tmp_path / "other"
    for number in range(5):
        write_skill(root, f"tool-{number}", description="Reads " + "words " * number)
    write_skill(other, "elsewhere", description="Another root, another index.")
    index = open_index(root)
    index.reindex()
    open_index(other, index="second").reindex()
    write_skill(root, "tool-1", description="Now a longer description than it had before.")
    (root / "tool-3" / "SKILL.md").unlink()
    (root / "tool-3").rmdir()
    index.reindex()
    engine = make_engine(db_url)
    with engine.connect() as connection:
        totals = connection.execute(text("SELECT candidates, words FROM search_total")).one()
        counted = connection.execute(text(
            "SELECT count(*), sum(search_length) FROM candidate")).one()
    engine.dispose()
    assert tuple(totals) == tuple(counted) and totals[0] == 5


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
       | st.text(alphabet=string.printable, max_size=200))
@settings(max_examples=300)
def test_the_words_of_a_search_text_are_its_runs_of_letters_and_digits(text_: str) -> None:
    # ASCII text takes a byte table, other text a regular expression: the same words.
    words = re.findall(r"[^\W_]+", text_.lower())
    assert distinct_words(text_) == " ".join(dict.fromkeys(words))
