"""Benchmark figures of full-text search: speed and size at N skills, relevance on real skills."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scripts import relevance
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


def relevance_report(corpus: Path, size: int, work: Path) -> dict[str, Any]:
    """Index the corpus as one root, draw the query sets, score search and the baseline."""
    config = work / "relevance.toml"
    config.write_text(f'[skills]\npresets = false\nvalidation = "lenient"\n\n[[roots]]\n'
                      f'path = "{corpus}"\nprecedence = 10\nrequire_description = false\n')
    db = work / "relevance.sqlite"
    with SkillIndex.open(str(config), db=str(db), cwd=str(work)) as index:
        started = time.perf_counter()
        index.reindex()
        indexed = time.perf_counter() - started
        skills = relevance.load_skills(index.winners())
        tune, held = relevance.query_sets(skills, size)

        def search(text: str) -> list[str]:
            return [hit.location for hit in index.search(text, limit=relevance.DEPTH)]

        report: dict[str, Any] = {"skills": len(skills), "reindex_s": indexed,
                                  "db_bytes": stored_bytes(db, full_text=True),
                                  "db_bytes_without_full_text": stored_bytes(db,
                                                                             full_text=False)}
        try:
            baseline: relevance.Ranker | None = relevance.bm25_baseline(skills)
        except ImportError:
            baseline = None  # rank-bm25 comes with the `bench` extra
        for label, queries in (("tuning", tune), ("held_out", held)):
            report[label] = {"search": relevance.score(search, queries)}
            if baseline is not None:
                report[label]["bm25_descriptions"] = relevance.score(baseline, queries)
    return report


def relevance_table(report: dict[str, Any]) -> str:
    lines = [f"relevance on {report['skills']:,} real skills (queries: {relevance.QUERY_WORDS} "
             "words of a body line; MRR over the first "
             f"{relevance.DEPTH}); database {report['db_bytes'] / 2**20:.1f} MiB, "
             f"{report['db_bytes_without_full_text'] / 2**20:.1f} MiB without full text",
             "| set | ranker | queries | recall@1 | recall@5 | MRR |",
             "|---|---|---:|---:|---:|---:|"]
    for label in ("tuning", "held_out"):
        for ranker, figures in report[label].items():
            lines.append(f"| {label} | {ranker} | {figures['queries']} | "
                         f"{figures['recall@1']:.3f} | {figures['recall@5']:.3f} | "
                         f"{figures['mrr']:.3f} |")
    if "bm25_descriptions" not in report["tuning"]:
        lines.append("(BM25 baseline skipped: pip install -e '.[bench]')")
    return "\n".join(lines)
