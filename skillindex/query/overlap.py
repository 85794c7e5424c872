"""Descriptions that ask for the same requests: pairs of skills whose names and descriptions share
so many of the words a search matches on that a request meant for one would pick the other."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from skillindex.query.search import _WORD, FUNCTION_WORDS

# Chosen on a hand-labelled sample of pairs of the public registry's skills, for a precision of
# 0.9 or more: `python -m scripts.overlap` (docs/decisions.md).
THRESHOLD = 0.6
# A description this short says too little to be judged by its words.
MIN_WORDS = 4
# A word in the prefixes of this many skills proposes no more pairs: exact for a set of up to
# this many skills (a repository's), bounded in time and memory for a registry's 60,000.
MAX_HOLDERS = 64
# Words nearly every description holds beside what the skill is for ("Use when the user asks
# to ..."): shared by two skills, they say nothing about the requests either answers.
BOILERPLATE = frozenset({
    "use", "used", "uses", "using", "when", "whenever", "skill", "skills", "user", "users",
    "asks", "ask", "asked", "help", "helps", "helping", "need", "needs", "want", "wants",
    "like", "also", "e", "g", "etc", "including", "include", "includes", "via", "based",
    "any", "new", "make", "making", "work", "working", "task", "tasks", "trigger",
    "triggers", "request", "requests", "requested", "mentions", "mention", "claude", "agent",
    "agents", "ai", "provides", "provide", "guide", "guidance", "support", "supports",
    "mode", "one", "two", "get", "set", "run", "runs", "within", "across", "specific",
})


def words(text: str | None) -> frozenset[str]:
    """The words of a name or description a request would be matched on."""
    return frozenset(word for word in _WORD.findall((text or "").replace("-", " ").lower())
                     if word not in FUNCTION_WORDS and word not in BOILERPLATE
                     and not word.isdigit())


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """How much of the two sets of words is shared (Dice: 0 none, 1 the same words)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


@dataclass(frozen=True, slots=True)
class Overlap:
    """Two skills (their positions in the set) and the similarity of their words."""

    first: int
    second: int
    score: float
    shared: tuple[str, ...]


def overlaps(skills: Sequence[tuple[str | None, str | None]], *,
             threshold: float = THRESHOLD) -> list[Overlap]:
    """The pairs of (name, description) whose words are `threshold` alike or more, each pair
    once (first < second), in order of position; found through the rare words they share,
    so a set of thousands costs what those words cost."""
    described = [words(description) for _, description in skills]
    sets = [words(name) | found for (name, _), found in zip(skills, described, strict=True)]
    judged = [i for i, found in enumerate(described) if len(found) >= MIN_WORDS]
    frequency: Counter[str] = Counter(word for i in judged for word in sets[i])
    # Prefix filtering: with each set's words ordered rarest first, two sets alike enough
    # share a word among the first |set| - ceil(j |set|) + 1 of either (j the threshold as a
    # Jaccard similarity), so only those words propose pairs, and common words rarely do.
    jaccard = threshold / (2 - threshold)
    holders: dict[str, list[int]] = defaultdict(list)
    found_pairs = []
    for i in judged:
        ordered = sorted(sets[i], key=lambda word: (frequency[word], word))
        candidates: set[int] = set()
        for word in ordered[:len(ordered) - math.ceil(jaccard * len(ordered) - 1e-9) + 1]:
            held = holders[word]
            if len(held) < MAX_HOLDERS:
                candidates.update(held)
                held.append(i)
        for other in sorted(candidates):
            score = similarity(sets[other], sets[i])
            if score >= threshold:
                found_pairs.append(Overlap(other, i, round(score, 4),
                                           tuple(sorted(sets[other] & sets[i]))))
    found_pairs.sort(key=lambda pair: (pair.first, pair.second))
    return found_pairs
