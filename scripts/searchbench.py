"""Benchmark figures of full-text search: speed and size at N skills, relevance on real skills."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scripts import benchkit, relevance
from skillindex import SkillIndex
from skillindex.index import searchtext

FULL_TEXT_SQL = (
    "DROP TRIGGER candidate_fts_insert", "DROP TRIGGER candidate_fts_delete",
    "DROP TRIGGER candidate_fts_update",
    "DROP TABLE candidate_fts",
)


@contextmanager
def without_full_text(db: Path) -> Iterator[None]:
    """A migrated SQLite index whose reindex writes no full-text index and no search text:
    the baseline the full-text index's cost is measured against."""
    connection = sqlite3.connect(db)
    with connection:
        for statement in FULL_TEXT_SQL:
            connection.execute(statement)
    connection.close()
    original = searchtext.search_text
    searchtext.search_text = lambda *args, **kwargs: None
    try:
        yield
    finally:
        searchtext.search_text = original


def stored_bytes(db: Path, *, full_text: bool) -> int:
    """The size of a copy of the database after VACUUM, with or without its full-text index."""
    copy = db.with_name(db.name + ".size")
    source = sqlite3.connect(db)
    connection = sqlite3.connect(copy)
    source.backup(connection)  # a file copy would miss what the write-ahead log still holds
    source.close()
    connection.isolation_level = None
    if not full_text:
        for statement in FULL_TEXT_SQL:
            connection.execute(statement)
        connection.execute("UPDATE candidate SET search_text = NULL")
    connection.execute("VACUUM")
    size = int(connection.execute("PRAGMA page_count").fetchone()[0]
               * connection.execute("PRAGMA page_size").fetchone()[0])
    connection.close()
    for path in (copy, copy.with_name(copy.name + "-wal"), copy.with_name(copy.name + "-shm")):
        path.unlink(missing_ok=True)
    return size


def speed(index: SkillIndex, db: Path, count: int,
          median_time: Callable[[Callable[[], object], int], float]) -> dict[str, Any]:
    """Search and a query-ranked catalog in-process; the stored size with and without the
    full-text index. Two queries: words every generated skill has (the worst case: every
    skill matches), and a word only one skill's name holds."""
    common = "report export review"
    selective = f"{count // 2:06d} review"
    index.search(common)
    results: dict[str, Any] = {
        "search_common_s": median_time(lambda: index.search(common), 10),
        "search_selective_s": median_time(lambda: index.search(selective), 20),
        "catalog_query_s": median_time(lambda: index.catalog(query=selective), 5),
    }
    results["db_bytes"] = stored_bytes(db, full_text=True)
    results["db_bytes_without_full_text"] = stored_bytes(db, full_text=False)
    return results


def relevance_report(sample: Path, registry: Path | None, public: list[Path],
                     work: Path) -> dict[str, Any]:
    """The prompts' figures (scripts/relevance.py) with the sample as the registry root, then
    with every skill of the registry (`registry`: its folder, or the archive, extracted into
    `work`), each index built afresh; the `search` process beside `python -c pass` at the
    largest size."""
    prompts = relevance.load_prompts()
    folders = [("sample", sample)]
    if registry is not None:
        folders.append(("registry", registry if registry.is_dir() else _extracted(registry,
                                                                                 work)))
    report: dict[str, Any] = {"public": [str(path) for path in public], "sizes": []}
    for label, folder in folders:
        config = work / f"relevance-{label}.toml"
        config.write_text(relevance.settings_text(public, folder))
        db = work / f"relevance-{label}.sqlite"
        with SkillIndex.open(str(config), db=str(db), cwd=str(work)) as index:
            started = time.perf_counter()
            index.reindex()
            size: dict[str, Any] = {"label": label, "registry": str(folder),
                                    "skill_files": _skill_files(folder),
                                    "reindex_s": time.perf_counter() - started}
            size.update(relevance.evaluate(index, prompts))
        size["db_bytes"] = stored_bytes(db, full_text=True)
        report["sizes"].append(size)
    report["process"] = search_processes(config, db, work, prompts)
    return report


def _extracted(archive: Path, work: Path) -> Path:
    """The archive's skills, unpacked once into `work` (a folder of `<skill>/SKILL.md`)."""
    target = work / "registry"
    if not target.is_dir():
        target.mkdir()
        subprocess.run(["tar", "-xJf", str(archive), "-C", str(target)], check=True)
    return target


def _skill_files(folder: Path) -> int:
    return sum(1 for entry in os.scandir(folder) if entry.is_dir())


def search_processes(config: Path, db: Path, cwd: Path, prompts: list[relevance.Prompt],
                     count: int = 10) -> dict[str, float]:
    """`skillindex search` as a whole process for the first `count` held-out prompts, in
    turn with `python -c pass`: the medians, and the worst search."""
    base = [sys.executable, "-m", "skillindex", "--config", str(config), "--db", str(db),
            "--cwd", str(cwd), "search"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    chosen = [p.text for p in prompts if p.part == "held-out"][:count]
    searches: list[float] = []
    floors: list[float] = []
    for text in chosen:
        subprocess.run([*base, text], check=True, capture_output=True, env=env)
        for argv, times in (([sys.executable, "-c", "pass"], floors), ([*base, text], searches)):
            started = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - started)
    return {"search_process_s": statistics.median(searches),
            "search_process_worst_s": max(searches),
            "python_start_s": statistics.median(floors)}


def relevance_table(report: dict[str, Any]) -> str:
    public = ", ".join(report["public"])
    lines = [f"relevance of {relevance.PROMPTS.name}'s prompts (R@k: the skill among the first "
             f"k; MRR over the first {relevance.DEPTH}); public skills: {public}",
             "| skills | set | ranker | prompts | R@1 | R@5 | MRR | catalog keeps it whole |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for size in report["sizes"]:
        for part in relevance.SETS:
            for ranker, label in (("search", "skillindex search"),
                                  ("bm25", "rank-bm25, name + description")):
                figures = size[part].get(ranker)
                if figures is None:
                    continue
                kept = (f"{size[part]['catalog_kept_whole']:.2f}" if ranker == "search"
                        else "")
                lines.append(f"| {size['skill_files']:,} | {part} | {label} | "
                             f"{figures['prompts']} | {figures['recall@1']:.2f} | "
                             f"{figures['recall@5']:.2f} | {figures['mrr']:.3f} | {kept} |")
    lines.append("")
    lines.append("| skills | search, median | search, worst | CPU, median | CPU, worst | "
                 "CPU / engine floor, median | worst | database |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for size in report["sizes"]:
        speed = size["speed"]
        ratios = (f"{speed['cpu_median_ratio']:.2f} | {speed['cpu_worst_ratio']:.2f}"
                  if "cpu_median_ratio" in speed else "- | -")
        lines.append(f"| {size['skill_files']:,} | {speed['median_s'] * 1000:.1f} ms | "
                     f"{speed['worst_s'] * 1000:.1f} ms | {speed['cpu_median_s'] * 1000:.1f} ms "
                     f"| {speed['cpu_worst_s'] * 1000:.1f} ms | {ratios} | "
                     f"{size['db_bytes'] / 2**20:.0f} MiB |")
    checked = {size["skill_files"]: size.get("bm25_checked") for size in report["sizes"]}
    lines.append("")
    lines.append("rank-bm25's scores equal BM25Okapi's definition (3 prompts): " + ", ".join(
        f"{count:,}: {'yes' if ok else 'NO' if ok is not None else '-'}"
        for count, ok in checked.items()))
    process = report["process"]
    lines.append("")
    lines.append(f"`skillindex search` process at {report['sizes'][-1]['skill_files']:,}: "
                 f"median {process['search_process_s'] * 1000:.0f} ms, worst "
                 f"{process['search_process_worst_s'] * 1000:.0f} ms; `python -c pass` "
                 f"{process['python_start_s'] * 1000:.0f} ms (difference "
                 f"{(process['search_process_s'] - process['python_start_s']) * 1000:.0f} ms, "
                 f"ratio {process['search_process_s'] / process['python_start_s']:.2f})")
    return "\n".join(lines)


def cold_cost(count: int, repeat: int, work: Path) -> dict[str, Any]:
    """What the full-text index adds to a cold index, with and without it alternated `repeat`
    times on one generated tree: medians of wall time and of CPU time, the latter steadier on a
    shared machine. In one process (jobs=1): worker processes start afresh, so they would build
    the search text even for the index without it, and hide that cost from the ratio."""
    roots = benchkit.generate(work / "tree", count)
    config = benchkit.settings_file(work, roots)
    figures: dict[str, list[float]] = {key: [] for key in (
        "wall_s", "wall_without_s", "cpu_s", "cpu_without_s")}
    for number in range(repeat):
        # Alternating which goes first: in a fixed order the second cold index of one tree ran
        # 15-18% slower (two runs of scripts/bench.py at 10,000 skills).
        for full_text in ((True, False) if number % 2 == 0 else (False, True)):
            db = work / f"cold-{number}-{full_text}.sqlite"
            with SkillIndex.open(str(config), db=str(db), cwd=str(work)) as index:
                context = _nothing() if full_text else without_full_text(db)
                with context:
                    before, started = os.times(), time.perf_counter()
                    index.reindex(jobs=1)
                    wall, after = time.perf_counter() - started, os.times()
            cpu = sum(after[:4]) - sum(before[:4])
            suffix = "_s" if full_text else "_without_s"
            figures["wall" + suffix].append(wall)
            figures["cpu" + suffix].append(cpu)
            db.unlink()
    result: dict[str, Any] = {key: statistics.median(values) for key, values in figures.items()}
    result["wall_ratio"] = result["wall_s"] / result["wall_without_s"]
    result["cpu_ratio"] = result["cpu_s"] / result["cpu_without_s"]
    result["skills"], result["repeat"] = count, repeat
    return result


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def search_speed(count: int, work: Path) -> dict[str, Any]:
    """Search, the query-ranked catalog and the database size on one cold index of N generated
    skills, without the rest of scripts/bench.py (whose floors and reindex figures take hours
    at 100,000 skills on a small machine)."""
    roots = benchkit.generate(work / "tree", count)
    config = benchkit.settings_file(work, roots)
    db = work / "index.sqlite"
    with SkillIndex.open(str(config), db=str(db), cwd=str(work)) as index:
        started = time.perf_counter()
        index.reindex()
        result = {"skills": count, "cold_s": time.perf_counter() - started}
        index.catalog()
        result["catalog_call_s"] = benchkit.median_time(index.catalog, 5)
        result.update(speed(index, db, count, benchkit.median_time))
    result["database / without full text"] = (result["db_bytes"]
                                              / result["db_bytes_without_full_text"])
    return result


def main() -> None:
    """`python -m scripts.searchbench cold N [--repeat R]`: the cold-index cost alone;
    `python -m scripts.searchbench speed N`: search speed and size alone."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("what", choices=["cold", "speed"])
    parser.add_argument("count", type=int)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="searchbench-", dir=args.work))
    try:
        result = (cold_cost(args.count, args.repeat, work) if args.what == "cold"
                  else search_speed(args.count, work))
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
