"""Full-text matching on SQLite (FTS5) through any driver: SQL text with `:name` parameters,
run by a callable that executes one statement.

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

# FTS5's bm25 scores every match of any of the words (its idf and document lengths are those of
# the whole table), and its best :depth are kept before anything is joined: a join first would
# cost a lookup of every match. Each says whether it is of these roots and accepted, so that a
# caller knows both what it found and whether there may be more (see Ranked).
MATCHES = """
    SELECT m.id, c.name, m.score,
           r.index_name = :index_name AND r.path IN ({paths}) AND c.status = 'accepted'
    FROM (SELECT rowid AS id, -bm25(candidate_fts, :w_name, :w_description, :w_text) AS score
          FROM candidate_fts WHERE candidate_fts MATCH :match
          ORDER BY score DESC, rowid LIMIT :depth) m
    JOIN candidate c ON c.id = m.id
    JOIN root r ON r.id = c.root_id
    ORDER BY m.score DESC, m.id
"""


def first_depth(limit: int) -> int:
    """How many of the best matches a search of `limit` winners asks for first: room for the
    matches resolution sets aside, since the engine's top-k costs about the same for a hundred
    matches as for ten, and asking again ranks every match again."""
    return limit * 4 + 40


@dataclass(frozen=True, slots=True)
class Ranked:
    """The matches of these roots among the `depth` best of the whole index, best first, and
    whether they are all there are: fewer than `depth` matched, or no depth was set."""

    matches: list[SearchMatch]
    complete: bool


def matches(run: Run, index_name: str, paths: Sequence[str], terms: Sequence[str], *,
            depth: int | None, weights: Weights) -> Ranked:
    """The accepted candidates of these roots among the `depth` best matches of any of the
    terms (every match when None), best first. Terms must be runs of letters and digits:
    they are quoted here, never parsed."""
    if not terms or not paths:
        return Ranked([], True)
    names = [f"p{n}" for n in range(len(paths))]
    statement = MATCHES.format(paths=", ".join(f":{name}" for name in names))
    params: dict[str, Any] = {
        "index_name": index_name, "depth": -1 if depth is None else depth,
        "match": any_of(terms), "w_name": weights.name,
        "w_description": weights.description, "w_text": weights.text,
        **dict(zip(names, paths, strict=True))}
    rows = list(run(statement, params))
    return Ranked([SearchMatch(int(cid), str(name), float(score))
                   for cid, name, score, ours in rows if ours],
                  depth is None or len(rows) < depth)


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
