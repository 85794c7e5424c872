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
# the roots of this directory and the accepted status are applied.
_SQLITE = """
    SELECT c.id, c.name, m.score
    FROM (SELECT rowid AS id, -bm25(candidate_fts, :w_name, :w_description, :w_text) AS score
          FROM candidate_fts WHERE candidate_fts MATCH :match) m
    JOIN candidate c ON c.id = m.id
    JOIN root r ON r.id = c.root_id
    WHERE r.index_name = :index_name AND r.path IN :paths AND c.status = 'accepted'
    ORDER BY m.score DESC, c.id
    LIMIT :limit
"""
_SQLITE_DOCUMENTS = "SELECT doc FROM candidate_fts_vocab WHERE term = :term"
# Scoring a match costs FTS5 a read of its positions: a word most skills hold would make one
# search read them all. Words are taken rarest first until this many matches, so a search's cost
# follows its rare words (a common word adds little to a BM25 score). The price is relevance in
# a very large index, where a query's words are mostly common: see docs/decisions.md.
MATCH_BUDGET = 2_000
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
    """The accepted candidates of accepted candidates of these roots matching any of the terms,
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
        terms = _affordable(session, terms, MATCH_BUDGET if budget is None else budget)
        params["match"] = " OR ".join(f'"{term}"' for term in terms)
        params.update(w_name=weights.name, w_description=weights.description,
                      w_text=weights.text)
    rows = session.execute(_statement(dialect), params)
    return [SearchMatch(int(cid), str(name), float(score)) for cid, name, score in rows]


def _affordable(session: Session, terms: Sequence[str], budget: int) -> list[str]:
    """The rarest terms whose matches add up to at most `budget` (always the rarest one)."""
    documents = {term: session.execute(text(_SQLITE_DOCUMENTS), {"term": term}).scalar() or 0
                 for term in terms}
    kept: list[str] = []
    total = 0
    for term in sorted(terms, key=documents.__getitem__):
        if kept and total + documents[term] > budget:
            break
        kept.append(term)
        total += documents[term]
    return kept
