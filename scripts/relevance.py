"""Relevance of `search` on real skills: queries taken from bodies, scored against a BM25
baseline over descriptions alone, on a tuning set and on a held-out set."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from skillindex.index import skillmd

QUERY_WORDS = 6
DEPTH = 20  # ranks past this count as misses (MRR@20)
_WORD = re.compile(r"[^\W_]+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PROSE = re.compile(r"^[A-Za-z]")  # a line of prose, not a list, table, quote or markup


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    location: str
    body: str


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    location: str  # the skill it was taken from


def load_skills(winners: Sequence[Any]) -> list[Skill]:
    skills = []
    for winner in winners:
        path = Path(winner.candidate.path)
        split = skillmd.split(skillmd.decode(path.read_bytes()))  # type: ignore[arg-type]
        body = split[1] if isinstance(split, tuple) else ""
        skills.append(Skill(winner.name, winner.candidate.description or "", str(path), body))
    return skills


def make_query(skill: Skill) -> str | None:
    """Six consecutive words of one prose line of the body, chosen by the skill's own seed;
    never words that also appear together in the description or the name."""
    lines, fenced = [], False
    for line in skill.body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _PROSE.match(line.strip()):
            words = _WORD.findall(line)
            if len(words) >= QUERY_WORDS + 2:
                lines.append(words)
    if not lines:
        return None
    rng = random.Random(xxhash.xxh3_64_intdigest(skill.location.encode()))
    words = rng.choice(lines)
    start = rng.randrange(0, len(words) - QUERY_WORDS + 1)
    text = " ".join(words[start:start + QUERY_WORDS])
    if text.lower() in " ".join(_WORD.findall(f"{skill.name} {skill.description}")).lower():
        return None
    return text


def query_sets(skills: Sequence[Skill], size: int) -> tuple[list[Query], list[Query]]:
    """A tuning set and a held-out set, split by a hash of the skill's path."""
    tune: list[Query] = []
    held: list[Query] = []
    for skill in sorted(skills, key=lambda s: xxhash.xxh3_64_intdigest(s.location.encode())):
        text = make_query(skill)
        if text is None:
            continue
        target = tune if xxhash.xxh3_64_intdigest((skill.location + "#set").encode()) % 2 else held
        if len(target) < size:
            target.append(Query(text, skill.location))
        if len(tune) >= size and len(held) >= size:
            break
    return tune, held


Ranker = Callable[[str], list[str]]  # query -> locations, best first


def score(ranker: Ranker, queries: Sequence[Query]) -> dict[str, float]:
    ranks = []
    for query in queries:
        found = ranker(query.text)[:DEPTH]
        ranks.append(found.index(query.location) + 1 if query.location in found else None)
    return {"recall@1": sum(r == 1 for r in ranks) / len(ranks),
            "recall@5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
            "mrr": statistics.fmean(1 / r if r else 0.0 for r in ranks),
            "queries": len(ranks)}


def bm25_baseline(skills: Sequence[Skill]) -> Ranker:
    """Plain BM25 (rank-bm25's Okapi) over the descriptions, words lower-cased, no stemming."""
    from rank_bm25 import BM25Okapi  # the `bench` extra

    def tokens(text: str) -> list[str]:
        return [word.lower() for word in _WORD.findall(text)]

    model = BM25Okapi([tokens(skill.description) or ["-"] for skill in skills])
    locations = [skill.location for skill in skills]

    def rank(text: str) -> list[str]:
        scores = model.get_scores(tokens(text))
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:DEPTH]
        return [locations[i] for i in best if scores[i] > 0]

    return rank
