"""Full-text matching of candidates behind one function: FTS5 on SQLite, tsvector on PostgreSQL."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Float, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from skillindex.model import SearchMatch


@dataclass(frozen=True, slots=True)
class Weights:
    """How much a match in each field counts; the name weighs most."""

    name: float = 3.0
    description: float = 2.0
    text: float = 1.0


DEFAULT_WEIGHTS = Weights()


# FTS5 ranks its own matches first (joining before would score each row through the join), then
# the roots of this directory and the accepted status are applied. `:bound` caps the rowids a
# search of only common words scores (see _affordable).
_SQLITE = """
    SELECT c.id, c.name, m.score
    FROM (SELECT rowid AS id, -bm25(candidate_fts, :w_name, :w_description, :w_text) AS score
          FROM candidate_fts WHERE candidate_fts MATCH :match AND rowid <= :bound) m
    JOIN candidate c ON c.id = m.id
    JOIN root r ON r.id = c.root_id
    WHERE r.index_name = :index_name AND r.path IN :paths AND c.status = 'accepted'
    ORDER BY m.score DESC, c.id
    LIMIT :limit
"""
# How many skills hold a word, counted no further than :cap: the walk stops there, so a word
# every skill holds costs as little to look up as a rare one.
_SQLITE_COUNT = """
    SELECT count(*) FROM (SELECT 1 FROM candidate_fts WHERE candidate_fts MATCH :match
                          LIMIT :cap)
"""
# The rowid of the :offset-th match (from 0), in the index's own (rowid) order.
_SQLITE_NTH = """
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
# ts_rank's weights run {D, C, B, A}; the vector holds name as A, description B, the rest C.
# Normalization 1 divides by 1 + log(document length), so a long text does not win by size.
_POSTGRESQL = """
    SELECT c.id, c.name, ts_rank(CAST(:weights AS real[]), c.search_vector, q.query, 1) AS score
    FROM candidate c
    JOIN root r ON r.id = c.root_id
    CROSS JOIN (SELECT to_tsquery('english'::regconfig, :match) AS query) q
    WHERE c.search_vector @@ q.query AND r.index_name = :index_name AND r.path IN :paths
      AND c.status = 'accepted'
    ORDER BY score DESC, c.id
    LIMIT :limit
"""


@functools.cache
def _statement(dialect: str) -> TextClause:
    if dialect == "sqlite":
        return text(_SQLITE).bindparams(bindparam("paths", expanding=True))
    if dialect == "postgresql":
        return text(_POSTGRESQL).bindparams(bindparam("paths", expanding=True),
                                            bindparam("weights", type_=ARRAY(Float)))
    raise NotImplementedError(f"full-text search is not available on {dialect}")


def matches(session: Session, index_name: str, paths: Sequence[str], terms: Sequence[str], *,
            limit: int | None, weights: Weights | None = None,
            budget: int | None = None) -> list[SearchMatch]:
    """The accepted candidates of these roots matching any of the terms,
    best first. Terms must be runs of letters and digits: they are quoted here, never parsed."""
    if not terms or not paths:
        return []
    weights = weights or DEFAULT_WEIGHTS
    dialect = session.get_bind().dialect.name
    params: dict[str, object] = {"index_name": index_name, "paths": list(paths),
                                 "limit": -1 if limit is None else limit}
    if dialect == "postgresql":
        params["match"] = " | ".join(terms)
        params["weights"] = [0.0, weights.text / weights.name,
                             weights.description / weights.name, 1.0]
        if limit is None:
            params["limit"] = None
    else:
        terms, bound = _affordable(session, terms, MATCH_BUDGET if budget is None else budget)
        params.update(match=_any_of(terms), bound=bound, w_name=weights.name,
                      w_description=weights.description, w_text=weights.text)
    rows = session.execute(_statement(dialect), params)
    return [SearchMatch(int(cid), str(name), float(score)) for cid, name, score in rows]


def _affordable(session: Session, terms: Sequence[str],
                budget: int) -> tuple[list[str], int]:
    """The rarest terms whose matches add up to at most `budget` (always the rarest one), and
    the highest rowid worth scoring; see COMMON_MATCHES for a query of common words only."""
    count = text(_SQLITE_COUNT)
    documents = {term: session.execute(count, {"match": _any_of([term]),
                                               "cap": budget + 1}).scalar_one()
                 for term in terms}
    kept: list[str] = []
    total = 0
    for term in sorted(terms, key=documents.__getitem__):
        if kept and total + documents[term] > budget:
            break
        kept.append(term)
        total += documents[term]
    if total <= budget:
        return kept, _UNBOUNDED
    longest = [max(terms, key=len)]
    last = session.execute(text(_SQLITE_NTH), {"match": _any_of(longest),
                                               "offset": min(budget, COMMON_MATCHES) - 1})
    return longest, int(last.scalar_one())


def _any_of(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{term}"' for term in terms)
