"""Search: the winners of this directory whose text matches a query, best first. The words are
looked up in the full-text index (store/fts.py, store/search.py); the stored resolution says
which matches win. Where none is stored (a root quarantines), only the candidates sharing a
matched name can bear on whether it wins, so only those are resolved, with quarantine applied.

The library runs it with its sessions (query/library.py), the sqlite3 fast path with one
connection (query/oneshot.py), which answers only from a stored resolution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from skillindex.errors import ConfigError
from skillindex.query import lookup, search
from skillindex.query.reader import Here, NotStored
from skillindex.query.resolve import Winner, resolve
from skillindex.query.search import SearchHit
from skillindex.store.fts import Ranked, first_depth

# The matches among the best of the index, and which of them win, by candidate id.
Winning = tuple[Ranked, Mapping[int, Sequence[Winner]]]


class Store(lookup.Store, Protocol):
    """What a search reads, besides what finding a winner reads (the fallback's candidates)."""

    def winning_matches(self, here: Here, words: Sequence[str], *, depth: int) -> Winning:
        """The accepted candidates of `here`'s roots among the `depth` best matches of these
        words, best first, and those of them that win in the stored resolution, read together.
        NotStored when no resolution applies."""
        ...

    def ranked(self, here: Here, words: Sequence[str], *, depth: int) -> Ranked:
        """The matches alone, as `winning_matches` finds them."""
        ...


def search_hits(store: Store, here: Here, query: str, *, limit: int) -> list[SearchHit]:
    """At most `limit` hits; any text may be given (its words are looked up, never parsed as
    query syntax); a text without a letter or digit raises SearchQueryError."""
    if limit < 1:
        raise ConfigError(f"limit must be 1 or more, not {limit}")
    words = search.terms(query)
    wanted = first_depth(limit)
    while True:
        ranked, winners = _winning(store, here, words, depth=wanted)
        hits = search.winning_hits(ranked.matches, winners)
        if len(hits) >= limit or ranked.complete:
            return hits[:limit]
        wanted *= 4


def _winning(store: Store, here: Here, words: Sequence[str], *, depth: int) -> Winning:
    if not here.quarantining:
        try:
            return store.winning_matches(here, words, depth=depth)
        except NotStored:
            pass
    ranked = store.ranked(here, words, depth=depth)
    # Only the candidates sharing a matched name can bear on whether it wins.
    found = store.candidates(here, sorted({m.name for m in ranked.matches}), all_findings=False)
    # Held back by risk_policy = quarantine as the catalog and read hold them.
    resolution = lookup.withheld(store, here, resolve(found, here.roots, here.rules))
    return ranked, search.by_candidate(resolution)
