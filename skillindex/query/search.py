"""Turns a search text into terms and matched candidates into ranked winners, as pure functions."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillindex.errors import SearchQueryError
from skillindex.model import SearchMatch
from skillindex.query.resolve import Resolution, Winner

# Any text is a query: only runs of letters and digits count, so no character of it can reach
# the database's query syntax. The bounds keep a pasted document from costing more than a query.
MAX_TERMS = 32
MAX_TERM_CHARS = 64
_WORD = re.compile(r"[^\W_]+")
# Words that say nothing of what a skill is for (the Snowball project's English stop words, the
# list PostgreSQL's `english` configuration drops): a request is searched without them unless
# it holds nothing else. In prose-heavy skills they are held by a third to nine tenths of all
# skills, so BM25 still weighs "it" or "that", and every search scored nearly every skill;
# without them recall on the tuning prompts was the same at a third of the time
# (docs/decisions.md).
FUNCTION_WORDS = frozenset({
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours",
    "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself",
    "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which",
    "who", "whom", "this", "that", "these", "those", "am", "is", "are", "was", "were", "be",
    "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an",
    "the", "and", "but", "if", "or", "because", "as", "until", "while", "of", "at", "by",
    "for", "with", "about", "against", "between", "into", "through", "during", "before",
    "after", "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over",
    "under", "again", "further", "then", "once", "here", "there", "when", "where", "why",
    "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no",
    "nor", "not", "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will",
    "just", "don", "should", "now"
})


def terms(text: str) -> tuple[str, ...]:
    """The distinct lower-cased words of `text`, in order, at most MAX_TERMS of them; without
    the function words, unless those are all it holds."""
    meant: dict[str, None] = {}
    function: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if len(word) <= MAX_TERM_CHARS:
            (function if word in FUNCTION_WORDS else meant).setdefault(word, None)
            if len(meant) == MAX_TERMS:
                break
    if not meant and not function:
        raise SearchQueryError("the search text has no word to look for (letters or digits)")
    return tuple(meant or function)[:MAX_TERMS]


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


def by_candidate(resolution: Resolution) -> dict[int, list[Winner]]:
    """The winners of a resolution by their candidate's id (a name qualified by several roots:
    several), as the stored resolution gives them for a search."""
    found: dict[int, list[Winner]] = {}
    for winner in resolution.winners:
        found.setdefault(winner.candidate.id or 0, []).append(winner)
    return found


def winning_hits(matches: Sequence[SearchMatch],
                 winners: Mapping[int, Sequence[Winner]]) -> list[SearchHit]:
    """The matches that are winners (`winners`: by candidate id), best first (ties in
    precedence order)."""
    return [SearchHit(match.score, winner) for match in matches
            for winner in winners.get(match.candidate_id, ())]
