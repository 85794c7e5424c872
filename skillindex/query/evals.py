"""Trigger evals as values: an author's queries read from their file, and what the host's ranking
made of each of them, scored per skill (recall, false triggers, the skills that took its place)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skillindex import inputs
from skillindex.errors import ConfigError
from skillindex.model import FileFinding, Gravity

# Where a skill keeps its trigger evals, as the Agent Skills guidance names the file.
EVAL_FILES = ("eval_queries.json", "evals/eval_queries.json")
MAX_EVAL_BYTES = inputs.MIB  # some twenty queries are meant; a megabyte is thousands
MAX_QUERIES = 1_000
MAX_QUERY_CHARS = 2_000
# The host sees the ten best matches: `search_skills` gives ten unless the model asks otherwise.
SEARCH_K = 10
# How deep a query's ranking is read, so that a miss still says where the skill came.
RANK_DEPTH = 50
RANKINGS = ("search", "catalog")
# How an entry of the catalog ranked by the query showed the skill.
WHOLE, SHORTENED, NAME_ONLY, LEFT_OUT = "whole", "shortened", "name-only", "left-out"
MISS, FALSE_TRIGGER = "eval-miss", "eval-false-trigger"


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One request and whether the skill should be chosen for it."""

    query: str
    should_trigger: bool


def eval_file(folder: Path) -> Path | None:
    """The skill folder's trigger evals file (EVAL_FILES, in that order), None without one."""
    for name in EVAL_FILES:
        path = folder / name
        if path.is_file():
            return path
    return None


def read_queries(path: Path) -> tuple[EvalQuery, ...]:
    """The queries of an eval file: a JSON array of `{"query": text, "should_trigger": bool}`.

    Raises ConfigError naming the file when it is not a regular file, too large, not such an
    array, or holds no query.
    """
    try:
        document = inputs.read_document(path, "json", max_bytes=MAX_EVAL_BYTES,
                                        what="trigger evals file").data
    except FileNotFoundError:
        raise ConfigError("no such file", source=str(path)) from None
    if not isinstance(document, list):
        raise ConfigError('must be a JSON array of {"query": ..., "should_trigger": ...}',
                          source=str(path))
    if not document:
        raise ConfigError("holds no query", source=str(path))
    if len(document) > MAX_QUERIES:
        raise ConfigError(f"holds {len(document)} queries; at most {MAX_QUERIES} are read",
                          source=str(path))
    queries = []
    for number, item in enumerate(document, start=1):
        query = item.get("query") if isinstance(item, dict) else None
        should = item.get("should_trigger") if isinstance(item, dict) else None
        if not isinstance(query, str) or not query.strip() or not isinstance(should, bool):
            raise ConfigError(f"query {number} must be an object with a non-empty text "
                              '"query" and a true or false "should_trigger"', source=str(path))
        if len(query) > MAX_QUERY_CHARS:
            raise ConfigError(f"query {number} is over {MAX_QUERY_CHARS} characters",
                              source=str(path))
        queries.append(EvalQuery(query, should))
    return tuple(queries)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What the ranking made of one query for the skill under test."""

    query: str
    should_trigger: bool
    rank: int | None  # 1 the best; None below RANK_DEPTH or not matched at all
    catalog: str | None  # WHOLE, SHORTENED, NAME_ONLY or LEFT_OUT in the catalog ranked by
    # the query; None when the run ranks by search alone
    triggered: bool  # chosen by the ranking the run judges by
    ahead: tuple[str, ...]  # the skills ranked above it, best first (at most SEARCH_K)

    @property
    def passed(self) -> bool:
        return self.triggered is self.should_trigger

    def as_dict(self) -> dict[str, object]:
        return {"query": self.query, "should_trigger": self.should_trigger, "rank": self.rank,
                "catalog": self.catalog, "triggered": self.triggered, "passed": self.passed,
                "ahead": list(self.ahead)}


@dataclass(frozen=True, slots=True)
class SkillEval:
    """One skill's trigger evals run against its neighbours."""

    name: str
    entry: Path  # its SKILL.md, where the author edits it
    description_line: int | None
    queries_file: Path
    results: tuple[QueryResult, ...]
    problem: str | None = None  # why it could not be evaluated (rejected, withheld)

    @property
    def positives(self) -> list[QueryResult]:
        return [r for r in self.results if r.should_trigger]

    @property
    def negatives(self) -> list[QueryResult]:
        return [r for r in self.results if not r.should_trigger]

    @property
    def recall(self) -> float | None:
        """Of the queries that should choose it, the share that did."""
        return _share(self.positives, triggered=True)

    @property
    def false_rate(self) -> float | None:
        """Of the queries that should not choose it, the share that did."""
        return _share(self.negatives, triggered=True)

    def confusables(self) -> list[tuple[str, int]]:
        """The skills ranked above it on its misses, the most often first (then by name)."""
        counts = Counter(name for r in self.positives if not r.triggered for name in r.ahead)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def as_dict(self, base: Path) -> dict[str, object]:
        return {"name": self.name, "path": shown(self.entry, base),
                "queries_file": shown(self.queries_file, base), "problem": self.problem,
                "recall": self.recall, "false_trigger_rate": self.false_rate,
                "should_trigger": len(self.positives), "should_not_trigger": len(self.negatives),
                "confusables": [{"name": n, "misses": c} for n, c in self.confusables()],
                "queries": [r.as_dict() for r in self.results]}

    def findings(self) -> list[FileFinding]:
        """Each miss and false trigger located at the description, where the fix is written."""
        found = []
        for result in self.results:
            if result.passed:
                continue
            where = f"ranked {result.rank}" if result.rank else f"not in the first {RANK_DEPTH}"
            if result.should_trigger:
                ahead = f"; ahead of it: {', '.join(result.ahead)}" if result.ahead else ""
                found.append(FileFinding(
                    MISS, Gravity.WARNING,
                    f"not chosen for {result.query!r} ({where}){ahead}",
                    self.entry, self.description_line, self.name))
            else:
                found.append(FileFinding(
                    FALSE_TRIGGER, Gravity.WARNING,
                    f"chosen for {result.query!r}, which should not choose it ({where})",
                    self.entry, self.description_line, self.name))
        if self.problem:
            found.append(FileFinding("eval-not-run", Gravity.ERROR, self.problem, self.entry,
                                     None, self.name))
        return found


def _share(results: Sequence[QueryResult], *, triggered: bool) -> float | None:
    if not results:
        return None
    return round(sum(r.triggered is triggered for r in results) / len(results), 4)


@dataclass(frozen=True, slots=True)
class EvalReport:
    """A run of trigger evals: the skills, and how they were ranked."""

    skills: tuple[SkillEval, ...]
    against: str  # what the skills were ranked among, in words
    neighbours: int  # the skills of that catalog besides the ones under test
    ranking: str  # the ranking that decides whether a query chose the skill (RANKINGS)
    k: int
    max_chars: int  # the catalog's budget
    seconds: float
    queries: int

    def described_neighbours(self) -> str:
        return f"{self.against} ({self.neighbours:,} other skills)"

    def fails(self, *, min_recall: float | None, max_false: float | None) -> list[str]:
        """The skills below the thresholds, each with why, in words; a skill that could not be
        evaluated fails whenever a threshold is set."""
        failing = []
        for skill in self.skills:
            if skill.problem and (min_recall is not None or max_false is not None):
                failing.append(f"{skill.name}: {skill.problem}")
                continue
            recall, false = skill.recall, skill.false_rate
            if min_recall is not None and recall is not None and recall < min_recall:
                failing.append(f"{skill.name}: recall {recall:.2f} < {min_recall:.2f}")
            if max_false is not None and false is not None and false > max_false:
                failing.append(f"{skill.name}: false-trigger rate {false:.2f} > {max_false:.2f}")
        return failing

    def findings(self) -> list[FileFinding]:
        return [found for skill in self.skills for found in skill.findings()]

    def as_dict(self, base: Path, *, min_recall: float | None = None,
                max_false: float | None = None) -> dict[str, object]:
        failing = self.fails(min_recall=min_recall, max_false=max_false)
        return {"ok": not failing, "failing": failing, "against": self.against,
                "neighbours": self.neighbours, "ranking": self.ranking, "k": self.k,
                "max_chars": self.max_chars, "queries": self.queries,
                "seconds": round(self.seconds, 3),
                "skills": [skill.as_dict(base) for skill in self.skills]}


def shown(file: Path, base: Path) -> str:
    """A path relative to `base` with `/` when inside it, else whole."""
    try:
        return file.relative_to(base).as_posix()
    except ValueError:
        return str(file)


def catalog_state(entry_truncated: bool | None, described: bool) -> str:
    """How a catalog showed a skill: not at all (None), by name only, shortened or whole."""
    if entry_truncated is None:
        return LEFT_OUT
    if not described:
        return NAME_ONLY
    return SHORTENED if entry_truncated else WHOLE
