"""Search: the winners of this directory whose text matches a query, best first. The words are
looked up in the full-text index (store/search.py); the stored resolution says which matches
win. Where none is stored (a root quarantines), only the candidates sharing a matched name can
bear on whether it wins, so only those are resolved, with quarantine applied."""

from __future__ import annotations

from skillindex.errors import ConfigError
from skillindex.query import lookup, resolve, search, winners
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.query.search import SearchHit
from skillindex.store import fts, queries


def search_hits(store: Library, here: Here, query: str, *, limit: int) -> list[SearchHit]:
    """At most `limit` hits; any text may be given (its words are looked up, never parsed as
    query syntax); a text without a letter or digit raises SearchQueryError."""
    if limit < 1:
        raise ConfigError(f"limit must be 1 or more, not {limit}")
    words = search.terms(query)
    wanted = fts.first_depth(limit)
    with store.session() as session:
        set_id = store.resolution_set(session, here)  # first: it may end the transaction
        while True:
            ranked = store.matches(session, here, words, depth=wanted)
            matches = ranked.matches
            if set_id is not None:
                reader = winners.Reader(session, set_id, here.roots)
                hits = search.winning_hits(matches,
                                           reader.among([m.candidate_id for m in matches]))
            else:
                # Only the candidates sharing a matched name can bear on whether it wins.
                found = queries.candidates(session, here.index_name, here.paths,
                                           names=sorted({m.name for m in matches}),
                                           all_findings=False)
                # Held back by risk_policy = quarantine as the catalog and read hold them.
                hits = search.winning_hits(matches, lookup.withheld(
                    store, here, resolve.resolve(found, here.roots, here.rules)))
            if len(hits) >= limit or ranked.complete:
                return hits[:limit]
            wanted *= 4
