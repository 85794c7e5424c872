"""Full-text matching on SQLite (FTS5) through any driver: SQL text with `:name` parameters and
the choice of terms a search can afford, run by a callable that executes one statement.

store/search.py runs it through SQLAlchemy; the one-shot `search` (query/oneshot.py) through
sqlite3, without importing SQLAlchemy. Both therefore match exactly the same candidates.
`filled_at_once` builds the index of a cold reindex in one pass (store/staging.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skillindex.model import SearchMatch

# Executes one statement with its parameters and returns its rows.
Run = Callable[[str, dict[str, Any]], Iterable[Sequence[Any]]]


@dataclass(frozen=True, slots=True)
class Weights:
    """How much a match in each field counts; the name weighs most."""

    name: float = 3.0
    description: float = 2.0
    text: float = 1.0


DEFAULT_WEIGHTS = Weights()

# FTS5 ranks its own matches first (joining before would score each row through the join), then
# the roots of this directory and the accepted status are applied. `:bound` caps the rowids a
# search of only common words scores (see affordable; store/search.py does the same on
# PostgreSQL).
MATCHES = """
    SELECT c.id, c.name, m.score
    FROM (SELECT rowid AS id, -bm25(candidate_fts, :w_name, :w_description, :w_text) AS score
          FROM candidate_fts WHERE candidate_fts MATCH :match AND rowid <= :bound) m
    JOIN candidate c ON c.id = m.id
    JOIN root r ON r.id = c.root_id
    WHERE r.index_name = :index_name AND r.path IN ({paths}) AND c.status = 'accepted'
    ORDER BY m.score DESC, c.id
    LIMIT :limit
"""
# How many skills hold a word, counted no further than :cap: the walk stops there, so a word
# every skill holds costs as little to look up as a rare one.
COUNT = """
    SELECT count(*) FROM (SELECT 1 FROM candidate_fts WHERE candidate_fts MATCH :match
                          LIMIT :cap)
"""
# The rowid of the :offset-th match (from 0), in the index's own (rowid) order.
NTH = """
    SELECT rowid FROM candidate_fts WHERE candidate_fts MATCH :match LIMIT 1 OFFSET :offset
"""
# Scoring a match costs FTS5 a read of its positions and sizes (a few microseconds), and bm25
# weighs each word by counting all its matches: a word most skills hold would make one search
# score them all. Words are taken rarest first until this many matches, so a search's cost
# follows its rare words (a common word adds little to a BM25 score). The price is relevance in
# a very large index, where a query's words are mostly common: see docs/decisions.md.
MATCH_BUDGET = 2_000
# When even the rarest word matches more than MATCH_BUDGET skills, no ranking of all its matches
# is affordable: the longest word (long words are the rarer ones) is searched alone, and only its
# first COMMON_MATCHES matches in the index's order (oldest first) are scored.
COMMON_MATCHES = 500
_UNBOUNDED = 2**63 - 1


def matches(run: Run, index_name: str, paths: Sequence[str], terms: Sequence[str], *,
            limit: int | None, weights: Weights, budget: int) -> list[SearchMatch]:
    """The accepted candidates of these roots matching any of the affordable terms, best
    first. Terms must be runs of letters and digits: they are quoted here, never parsed."""
    if not terms or not paths:
        return []
    kept, bound = affordable(
        lambda term, cap: _one(run(COUNT, {"match": any_of([term]), "cap": cap})),
        lambda term, offset: _one(run(NTH, {"match": any_of([term]), "offset": offset})),
        terms, budget)
    names = [f"p{n}" for n in range(len(paths))]
    statement = MATCHES.format(paths=", ".join(f":{name}" for name in names))
    params: dict[str, Any] = {
        "index_name": index_name, "limit": -1 if limit is None else limit,
        "match": any_of(kept), "bound": bound, "w_name": weights.name,
        "w_description": weights.description, "w_text": weights.text,
        **dict(zip(names, paths, strict=True))}
    return [SearchMatch(int(cid), str(name), float(score))
            for cid, name, score in run(statement, params)]


def affordable(count: Callable[[str, int], int], nth: Callable[[str, int], int],
               terms: Sequence[str], budget: int) -> tuple[list[str], int]:
    """The rarest terms whose matches add up to at most `budget` (always the rarest one), and
    the highest candidate id worth scoring; see COMMON_MATCHES for a query of common words
    only. Either backend says how many candidates hold a term, counted no further than a cap
    (`count(term, cap)`), and which id is a term's match at an offset, oldest first
    (`nth(term, offset)`), so both choose the same terms."""
    documents = {term: count(term, budget + 1) for term in terms}
    kept: list[str] = []
    total = 0
    for term in sorted(terms, key=documents.__getitem__):
        if kept and total + documents[term] > budget:
            break
        kept.append(term)
        total += documents[term]
    if total <= budget:
        return kept, _UNBOUNDED
    longest = max(terms, key=len)
    return [longest], nth(longest, min(budget, COMMON_MATCHES) - 1)


def _one(rows: Iterable[Sequence[Any]]) -> int:
    (row,) = rows
    return int(row[0])


def any_of(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{term}"' for term in terms)


_INSERT_TRIGGER = ("SELECT sql FROM sqlite_master WHERE type = 'trigger' "
                   "AND name = 'candidate_fts_insert'")


@contextmanager
def filled_at_once(execute: Callable[[str], Iterable[Sequence[Any]]]) -> Iterator[None]:
    """Rows inserted into an empty candidate table inside this block enter the full-text index
    in one FTS5 'rebuild' at its end, instead of through the insert trigger a row at a time
    (a cold reindex of 10,000 skills in one process: 1.15x the time without a full text, not
    1.18x, in CPU time). Anywhere else (rows already stored, no full-text index) the trigger
    does its work as always.

    Runs in the caller's write transaction, with `execute` running one statement on it: a
    failure inside rolls the transaction back, the dropped trigger with it."""
    trigger = None
    if not _one(execute("SELECT EXISTS (SELECT 1 FROM candidate)")):
        found = list(execute(_INSERT_TRIGGER))
        trigger = str(found[0][0]) if found else None
    if trigger is None:
        yield
        return
    execute("DROP TRIGGER candidate_fts_insert")
    yield
    execute("INSERT INTO candidate_fts (candidate_fts) VALUES ('rebuild')")
    execute(trigger)
