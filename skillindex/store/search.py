"""Full-text matching of candidates behind one function: FTS5 on SQLite, tsvector on PostgreSQL,
both ranked by the same BM25."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Float, TextClause, bindparam, text
from sqlalchemy.orm import Session

from skillindex.model import SearchMatch
from skillindex.store import fts

# FTS5's bm25 written out, so that both backends rank alike: for each word, idf = ln((N - n +
# 0.5) / (n + 0.5)) (at least 1e-6), N the candidates of the whole table and n those holding it;
# a candidate's score is the sum over the words it holds of idf * f * (k1 + 1) / (f + k1 * (1 - b
# + b * length / average length)), f the word's occurrences weighted by field, k1 1.2, b 0.75.
# `ts_rank_cd` of a one-word query without normalization is exactly that f: the weight of each
# occurrence summed (weights 0..1, so divided by the name's weight and multiplied back). The
# vector holds name as A, description B, the rest C; `search_length` counts its positions and
# `search_total` keeps N and the sum of the lengths (migration 0010).
_POSTGRESQL = """
    WITH term AS MATERIALIZED (
        SELECT w.n, quote_literal(x.lexeme)::tsquery AS query
        FROM unnest(CAST(:terms AS text[])) WITH ORDINALITY AS w (word, n)
        CROSS JOIN LATERAL unnest(to_tsvector('skillindex_search'::regconfig, w.word)) AS x
    ),
    any_term AS MATERIALIZED (
        SELECT string_agg(query::text, ' | ')::tsquery AS query FROM term
    ),
    total AS MATERIALIZED (
        SELECT candidates::float8 AS candidates,
               words::float8 / greatest(candidates, 1) AS average FROM search_total
    ),
    hit AS MATERIALIZED (
        SELECT c.id, c.name, c.root_id, c.status, c.search_length, t.n,
               ts_rank_cd(CAST(:weights AS real[]), c.search_vector, t.query, 0) * :scale AS f
        FROM candidate c
        CROSS JOIN any_term a
        JOIN term t ON c.search_vector @@ t.query
        WHERE c.search_vector @@ a.query
    ),
    idf AS (
        SELECT h.n, greatest(ln((t.candidates - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf
        FROM hit h CROSS JOIN total t GROUP BY h.n, t.candidates
    )
    SELECT h.id, h.name,
           sum(i.idf * h.f * 2.2 / (h.f + 1.2 * (0.25 + 0.75 * h.search_length / t.average)))
               AS score
    FROM hit h
    JOIN idf i ON i.n = h.n
    CROSS JOIN total t
    JOIN root r ON r.id = h.root_id
    WHERE r.index_name = :index_name AND r.path IN :paths AND h.status = 'accepted'
    GROUP BY h.id, h.name
    ORDER BY score DESC, h.id
    LIMIT :depth
"""


@functools.cache
def _postgresql() -> TextClause:
    # Imported here: the PostgreSQL dialect's modules cost an index on SQLite 35 ms at start-up.
    from sqlalchemy.dialects.postgresql import ARRAY, TEXT  # noqa: PLC0415

    return text(_POSTGRESQL).bindparams(bindparam("paths", expanding=True),
                                        bindparam("weights", type_=ARRAY(Float)),
                                        bindparam("terms", type_=ARRAY(TEXT)))


def matches(session: Session, index_name: str, paths: Sequence[str], terms: Sequence[str], *,
            depth: int | None, weights: fts.Weights | None = None) -> fts.Ranked:
    """The accepted candidates of these roots among the `depth` best matches of any of the
    terms (every match when None), best first, on either backend. Terms must be runs of
    letters and digits: they are quoted here, never parsed."""
    if not terms or not paths:
        return fts.Ranked([], True)
    weights = weights or fts.DEFAULT_WEIGHTS
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        def run(statement: str, params: dict[str, Any]) -> Iterable[Sequence[Any]]:
            return session.execute(text(statement), params)

        return fts.matches(run, index_name, paths, terms, depth=depth, weights=weights)
    if dialect != "postgresql":
        raise NotImplementedError(f"full-text search is not available on {dialect}")
    params: dict[str, object] = {
        "index_name": index_name, "paths": list(paths), "terms": list(terms), "depth": depth,
        "weights": [0.0, weights.text / weights.name, weights.description / weights.name, 1.0],
        "scale": weights.name}
    found = [SearchMatch(int(cid), str(name), float(score))
             for cid, name, score in session.execute(_postgresql(), params)]
    return fts.Ranked(found, depth is None or len(found) < depth)
