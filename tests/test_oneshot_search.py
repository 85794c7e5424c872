"""`skillindex search` through sqlite3: the hits of `SkillIndex.search`, from the stored
resolution, and the full path wherever that does not apply."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from skillindex.query import oneshot
from skillindex.query.search import SearchHit
from tests.conftest import write_skill
from tests.test_oneshot import Setup
from tests.test_oneshot import setup as setup  # noqa: PLC0414 (the fixture)

WORDS = ("pdf", "form", "chart", "table", "email", "audio", "video", "deploy", "review",
         "report", "export", "invoice", "translate", "summarize", "schedule", "backup")


def quick(setup: Setup, query: str, limit: int = 10) -> list[SearchHit] | None:
    return oneshot.search(str(setup.config), db=setup.db, cwd=setup.cwd, index=None,
                          query=query, limit=limit)


def shown(hits: list[SearchHit] | None) -> list[dict[str, object]]:
    assert hits is not None, "the sqlite3 path did not answer"
    return [hit.as_dict() for hit in hits]


@pytest.fixture
def crowd(setup: Setup) -> Setup:
    """Sixty more skills over both roots, words drawn at random, some names in both roots."""
    chosen = random.Random(7)
    for number in range(60):
        root = setup.root if number % 2 else setup.root.parent / "low"
        name = f"s{number % 45:02d}"
        words = " ".join(chosen.choice(WORDS) for _ in range(6))
        write_skill(root, name, f"name: {name}\ndescription: Helps with {words}.\n",
                    body=f"# {name}\n\n{' '.join(chosen.choice(WORDS) for _ in range(30))}\n")
    with setup.full() as index:
        index.reindex()
    return setup


@pytest.mark.parametrize("query", ["pdf", "pdf form", "use beta", "alpha", "report export "
                                   "invoice", "backup schedule translate", "s03", "nothing"])
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_a_search_finds_what_the_full_path_finds(crowd: Setup, query: str, limit: int) -> None:
    with crowd.full() as index:
        expected = [hit.as_dict() for hit in index.search(query, limit=limit)]
    assert shown(quick(crowd, query, limit)) == expected


def test_names_in_two_roots_give_the_winners_only(crowd: Setup) -> None:
    hits = shown(quick(crowd, "alpha"))
    assert [hit["name"] for hit in hits] == ["alpha"]
    assert str(crowd.root) in str(hits[0]["location"])  # the higher root's copy


def test_common_words_still_fill_the_limit(crowd: Setup) -> None:
    hits = shown(quick(crowd, "pdf form chart", limit=4))
    assert len(hits) == 4


@pytest.mark.parametrize("change", ["quarantine", "no-words", "limit", "stale"])
def test_what_it_cannot_answer_goes_to_the_full_path(setup: Setup, change: str) -> None:
    query, limit = "beta", 5
    if change == "quarantine":
        setup.change('precedence = 10\n', 'precedence = 10\nrisk_policy = "quarantine"\n')
    elif change == "no-words":
        query = "?! --"
    elif change == "limit":
        limit = 0
    else:
        write_skill(setup.root, "late")  # a reindex drops the stored resolution
        with setup.full() as index:
            index.reindex()
        setup.change('precedence = 10\n', 'precedence = 11\n')  # no resolution for these rules
    assert quick(setup, query, limit) is None


def test_the_cli_prints_what_the_library_finds(crowd: Setup) -> None:
    argv = ["--config", str(crowd.config), "--db", crowd.db, "--cwd", str(crowd.cwd)]
    done = CliRunner().invoke(cli, [*argv, "search", "pdf form", "--limit", "3"],
                              catch_exceptions=False)
    with crowd.full() as index:
        names = [hit.name for hit in index.search("pdf form", limit=3)]
    lines = done.stdout.splitlines()
    assert done.exit_code == 0 and len(lines) == 4
    assert [line.split()[1] for line in lines[1:]] == names
    empty = CliRunner().invoke(cli, [*argv, "search", "?!"])
    assert empty.exit_code == 2 and "no word" in empty.stderr
