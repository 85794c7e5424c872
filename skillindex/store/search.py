"""Full-text matching of candidates behind one function: FTS5 on SQLite, tsvector on PostgreSQL."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Float, TextClause, bindparam, text
from sqlalchemy.orm import Session

from skillindex.model import SearchMatch
from skillindex.store import fts

# ts_rank's weights run {D, C, B, A}; the vector holds name as A, description B, the rest C.
# Normalization 1 divides by 1 + log(document length), so a long text does not win by size.
_POSTGRESQL = """
    SELECT c.id, c.name, ts_rank(CAST(:weights AS real[]), c.search_vector, q.query, 1) AS score
    FROM candidate c
    JOIN root r ON r.id = c.root_id
    CROSS JOIN (SELECT to_tsquery('english'::regconfig, :match) AS query) q
    WHERE c.search_vector @@ q.query AND r.index_name = :index_name AND r.path IN :paths
      AND c.status = 'accepted' AND c.id <= :bound
    ORDER BY score DESC, c.id
    LIMIT :limit
"""
# What fts.affordable asks of a term, as the FTS5 statements answer it on SQLite: how many
# candidates hold it (counted no further than :cap), and its match at :offset, oldest first.
_POSTGRESQL_COUNT = """
    SELECT count(*) FROM (SELECT 1 FROM candidate
                          WHERE search_vector @@ to_tsquery('english'::regconfig, :term)
                          LIMIT :cap) m
"""
_POSTGRESQL_NTH = """
    SELECT id FROM candidate WHERE search_vector @@ to_tsquery('english'::regconfig, :term)
    ORDER BY id LIMIT 1 OFFSET :offset
"""


@functools.cache
def _postgresql() -> TextClause:
    # Imported here: the PostgreSQL dialect's modules cost an index on SQLite 35 ms at start-up.
    from sqlalchemy.dialects.postgresql import ARRAY  # noqa: PLC0415

    return text(_POSTGRESQL).bindparams(bindparam("paths", expanding=True),
                                        bindparam("weights", type_=ARRAY(Float)))


def matches(session: Session, index_name: str, paths: Sequence[str], terms: Sequence[str], *,
            limit: int | None, weights: fts.Weights | None = None,
            budget: int | None = None) -> list[SearchMatch]:
    """The accepted candidates of these roots matching any of the terms a search can afford
    (`fts.affordable`: the rarest, within `budget` matches, on either backend), best first.
    Terms must be runs of letters and digits: they are quoted here, never parsed."""
    if not terms or not paths:
        return []
    weights = weights or fts.DEFAULT_WEIGHTS
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        def run(statement: str, params: dict[str, Any]) -> Iterable[Sequence[Any]]:
            return session.execute(text(statement), params)

        return fts.matches(run, index_name, paths, terms, limit=limit, weights=weights,
                           budget=fts.MATCH_BUDGET if budget is None else budget)
    if dialect != "postgresql":
        raise NotImplementedError(f"full-text search is not available on {dialect}")
    def count(term: str, cap: int) -> int:
        return int(session.execute(text(_POSTGRESQL_COUNT), {"term": term, "cap": cap})
                   .scalar_one())

    def nth(term: str, offset: int) -> int:
        return int(session.execute(text(_POSTGRESQL_NTH), {"term": term, "offset": offset})
                   .scalar_one())

    kept, bound = fts.affordable(count, nth, terms,
                                 fts.MATCH_BUDGET if budget is None else budget)
    params: dict[str, object] = {
        "index_name": index_name, "paths": list(paths), "limit": limit, "bound": bound,
        "match": " | ".join(kept),
        "weights": [0.0, weights.text / weights.name, weights.description / weights.name, 1.0]}
    rows = session.execute(_postgresql(), params)
    return [SearchMatch(int(cid), str(name), float(score)) for cid, name, score in rows]
