"""Turns a search text into terms and matched candidates into ranked winners, as pure functions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillindex.errors import SearchQueryError
from skillindex.model import SearchMatch
from skillindex.query.resolve import Resolution, Winner

# Any text is a query: only runs of letters and digits count, so no character of it can reach
# the database's query syntax. The bounds keep a pasted document from costing more than a query.
MAX_TERMS = 32
MAX_TERM_CHARS = 64
_WORD = re.compile(r"[^\W_]+")


def terms(text: str) -> tuple[str, ...]:
    """The distinct lower-cased words of `text`, in order, at most MAX_TERMS of them."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if len(word) <= MAX_TERM_CHARS:
            found.setdefault(word, None)
            if len(found) == MAX_TERMS:
                break
    if not found:
        raise SearchQueryError("the search text has no word to look for (letters or digits)")
    return tuple(found)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A winning skill that matches a search, with its score (higher is better)."""

    score: float
    winner: Winner

    @property
    def name(self) -> str:
        return self.winner.name

    @property
    def description(self) -> str:
        return self.winner.candidate.description or ""

    @property
    def location(self) -> str:
        return str(self.winner.candidate.path)

    def as_dict(self) -> dict[str, object]:
        return {"score": round(self.score, 6), "name": self.name,
                "description": self.description, "location": self.location}


def winning_hits(matches: Sequence[SearchMatch], resolution: Resolution) -> list[SearchHit]:
    """The matches that are winners of the resolution, best first (ties in precedence order)."""
    winners: dict[int, list[Winner]] = {}
    for winner in resolution.winners:
        winners.setdefault(winner.candidate.id, []).append(winner)
    return [SearchHit(match.score, winner) for match in matches
            for winner in winners.get(match.candidate_id, ())]
