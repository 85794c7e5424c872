"""Relevance of search on real skills: task prompts phrased as people ask for help, each naming
the skill that should come first, scored beside plain BM25 over the same winners' names and
descriptions, on a tuning half and a held-out half.

`python -m scripts.relevance --registry DIR --db FILE-OR-URL [--public DIR ...] [--set tuning]`
scores one index (kept at --db, so a second run only rechecks it); scripts/bench.py reports
both halves at the sizes of the registry sample and of the whole registry (scripts/searchbench.py).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().with_name("relevance_data")
PROMPTS = DATA / "prompts.tsv"
# The project's stand-ins for the public anthropics/skills and openai/skills folders.
STAND_INS = DATA / "skills"
PUBLIC_PRECEDENCE = 200
REGISTRY_PRECEDENCE = 100
DEPTH = 20  # a skill found below this rank counts as not found (MRR@20)
SETS = ("tuning", "held-out")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Prompt:
    part: str  # tuning or held-out
    source: str  # public or registry
    skill: str  # the name of the skill that should come first
    text: str


def load_prompts(path: Path = PROMPTS) -> list[Prompt]:
    prompts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            part, source, skill, text = line.split("\t")
            prompts.append(Prompt(part, source, skill, text))
    return prompts


def settings_text(public: Sequence[Path], registry: Path) -> str:
    """Lenient settings with the public roots above the registry, no presets."""
    lines = ["[skills]", "presets = false", 'validation = "lenient"', ""]
    for path, precedence in [*((p, PUBLIC_PRECEDENCE) for p in public),
                             (registry, REGISTRY_PRECEDENCE)]:
        lines += ["[[roots]]", f"path = {json.dumps(str(path))}", f"precedence = {precedence}",
                  "require_description = false", ""]
    return "\n".join(lines)


Ranker = Callable[[str], Sequence[str]]  # a prompt -> skill names, best first


def ranks(ranker: Ranker, prompts: Sequence[Prompt]) -> list[int | None]:
    """The rank of each prompt's skill (from 1), None when not in the first DEPTH."""
    found = []
    for prompt in prompts:
        names = list(ranker(prompt.text))[:DEPTH]
        found.append(names.index(prompt.skill) + 1 if prompt.skill in names else None)
    return found


def figures(found: Sequence[int | None]) -> dict[str, float]:
    return {"recall@1": sum(r == 1 for r in found) / len(found),
            "recall@5": sum(r is not None and r <= 5 for r in found) / len(found),
            "mrr": statistics.fmean(1 / r if r else 0.0 for r in found),
            "prompts": len(found)}


def tokens(text: str) -> list[str]:
    """Lower-cased runs of letters and digits: `mcp-builder` is `mcp`, `builder`."""
    return [word.lower() for word in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class Baseline:
    """rank-bm25's BM25Okapi over each skill's name and description (words lower-cased, no
    stemming), every skill scored: what the search is measured against."""

    names: list[str]
    documents: list[list[str]]
    model: Any

    @classmethod
    def of(cls, skills: Sequence[tuple[str, str]]) -> Baseline:
        from rank_bm25 import BM25Okapi  # the `bench` extra

        documents = [tokens(f"{name} {description}") or ["-"] for name, description in skills]
        return cls([name for name, _ in skills], documents, BM25Okapi(documents))

    def __call__(self, text: str) -> list[str]:
        scores = self.model.get_scores(tokens(text))
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:DEPTH]
        return [self.names[i] for i in best if scores[i] > 0]

    def checked(self, texts: Sequence[str]) -> bool:
        """Whether rank-bm25 gave these requests the scores BM25Okapi's definition gives."""
        return all(math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)
                   for text in texts
                   for got, expected in zip(self.model.get_scores(tokens(text)),
                                            okapi(self.documents, tokens(text)), strict=True))


def okapi(documents: Sequence[Sequence[str]], query: Sequence[str], *, k1: float = 1.5,
          b: float = 0.75, epsilon: float = 0.25) -> list[float]:
    """BM25Okapi's scores written out from its definition (idf log((N - n + 0.5) / (n + 0.5)),
    a negative idf floored at epsilon times the mean idf), to check the baseline against."""
    count = len(documents)
    average = sum(map(len, documents)) / count
    held: dict[str, int] = {}
    for document in documents:
        for word in set(document):
            held[word] = held.get(word, 0) + 1
    idf = {word: math.log(count - n + 0.5) - math.log(n + 0.5) for word, n in held.items()}
    floor = epsilon * sum(idf.values()) / len(idf)
    idf = {word: value if value >= 0 else floor for word, value in idf.items()}
    scores = []
    for document in documents:
        score = 0.0
        for word in query:
            tf = document.count(word)
            score += idf.get(word, 0.0) * tf * (k1 + 1) / (
                tf + k1 * (1 - b + b * len(document) / average))
        scores.append(score)
    return scores


def kept_whole(catalog: Callable[[str], Any], prompts: Sequence[Prompt]) -> float:
    """The share of prompts whose skill keeps its full description in `catalog(prompt)`."""
    kept = 0
    for prompt in prompts:
        entries = {entry.name: entry for entry in catalog(prompt.text).entries}
        entry = entries.get(prompt.skill)
        kept += entry is not None and bool(entry.description) and not entry.truncated
    return kept / len(prompts)


def engine_floor(path: str) -> Callable[[str], object]:
    """The floor a search is measured against: FTS5's bm25 ranking every match of the prompt's
    words and keeping the best as many as a search first asks for, through sqlite3, nothing
    joined and no object made: what the engine's top-k costs by itself."""
    import sqlite3

    from skillindex.query.search import terms
    from skillindex.store import fts

    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    weights = fts.DEFAULT_WEIGHTS
    statement = ("SELECT rowid FROM candidate_fts WHERE candidate_fts MATCH ? "
                 "ORDER BY bm25(candidate_fts, ?, ?, ?), rowid LIMIT ?")

    def rank(text: str) -> object:
        return connection.execute(statement, (fts.any_of(terms(text)), weights.name,
                                              weights.description, weights.text,
                                              fts.first_depth(DEPTH))).fetchall()
    return rank


def timings(search: Callable[[str], object], prompts: Sequence[Prompt],
            floor: Callable[[str], object] | None = None) -> dict[str, float]:
    """The median and the worst time of one search per prompt, after one warm-up each: wall
    time, and this process's CPU time (SQLite runs in it), which a busy machine inflates less.
    With a `floor`, the same of it, run in turn with each search, and the ratios of the
    medians and of the worst times."""
    measured: dict[str, tuple[list[float], list[float]]] = {"": ([], [])}
    runs: list[tuple[str, Callable[[str], object]]] = [("", search)]
    if floor is not None:
        measured["floor_"] = ([], [])
        runs.append(("floor_", floor))
    for prompt in prompts:
        for prefix, run in runs:
            wall, cpu = measured[prefix]
            run(prompt.text)
            started, used = time.perf_counter(), time.process_time()
            run(prompt.text)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - used)
    report: dict[str, float] = {}
    for prefix, (wall, cpu) in measured.items():
        report.update({f"{prefix}median_s": statistics.median(wall),
                       f"{prefix}worst_s": max(wall),
                       f"{prefix}cpu_median_s": statistics.median(cpu),
                       f"{prefix}cpu_worst_s": max(cpu)})
    if floor is not None:
        for key in ("median_s", "worst_s", "cpu_median_s", "cpu_worst_s"):
            report[f"{key[:-2]}_ratio"] = report[key] / max(report[f"floor_{key}"], 1e-9)
    return report


def evaluate(index: Any, prompts: Sequence[Prompt], *, baseline: bool = True,
             ) -> dict[str, Any]:
    """Both halves' figures for search and, beside it, BM25 over the same winners; the
    catalog's share of whole descriptions and the search times, over every prompt given."""
    def search(text: str) -> list[str]:
        return [hit.name for hit in index.search(text, limit=DEPTH)]

    bm25 = None
    report: dict[str, Any] = {}
    if baseline:
        bm25 = Baseline.of([(w.name, w.candidate.description or "") for w in index.winners()])
        report["bm25_checked"] = bm25.checked([p.text for p in prompts[:3]])
    for part in SETS:
        chosen = [p for p in prompts if p.part == part]
        if not chosen:
            continue
        found = ranks(search, chosen)
        report[part] = {"search": figures(found),
                        "misses": [p.text for p, r in zip(chosen, found, strict=True)
                                   if r is None or r > 5]}
        if bm25 is not None:
            report[part]["bm25"] = figures(ranks(bm25, chosen))
        report[part]["catalog_kept_whole"] = kept_whole(
            lambda text: index.catalog(query=text), chosen)
    from skillindex.store.fastpath import sqlite_file

    path = sqlite_file(index.url)
    floor = None if path is None else engine_floor(path)
    report["speed"] = timings(search, prompts, floor)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, required=True,
                        help="folder of registry skills (the sample, or the extracted archive)")
    parser.add_argument("--public", type=Path, action="append",
                        help=f"a public skills folder (default: {STAND_INS})")
    parser.add_argument("--set", choices=SETS, help="one half only")
    parser.add_argument("--db", required=True,
                        help="the index to build or reuse: a SQLite file, or a database URL")
    parser.add_argument("--work", type=Path, default=Path("."),
                        help="where the settings file is written (default: here)")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    from skillindex import SkillIndex

    config = args.work / "relevance.toml"
    config.write_text(settings_text(args.public or [STAND_INS], args.registry.resolve()))
    prompts = [p for p in load_prompts() if args.set in (None, p.part)]
    with SkillIndex.open(str(config), db=args.db, cwd=str(args.work)) as index:
        index.reindex()
        report = evaluate(index, prompts, baseline=not args.no_baseline)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
