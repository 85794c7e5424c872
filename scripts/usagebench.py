"""Benchmark figures of `usage` and `report`: usage over a window of N audit events, against a
plain SQL count of the same rows; the report at the size of a public registry, against `list`.

    python scripts/usagebench.py --events 1000000 \
        --corpus ../shared/corpus/registry-skills.tar.xz   # or the folder it extracts to

Events are written straight into a migrated SQLite index, linked into the chain as the store
links them, spread evenly over 90 days over 2,000 skills (Zipf-like popularity) and 5,000
sessions; a 30-day window then holds a third of them, the whole-log window all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SPAN_DAYS = 90
SKILLS = 2_000
SESSIONS = 5_000
OUTCOMES = ["ok"] * 92 + ["refused"] * 3 + ["not-found"] * 3 + ["mismatch", "missing", "error"]
# The table's indexes and triggers are dropped while the rows go in and made again after: one
# sort per index instead of a million random inserts, and no trigger looking for an event the
# new one would overwrite, which without its index is a scan of the table per row (what is
# measured is the reading, not the bulk load; the rows are linked as the store links them).
BULK_DROPPED = ("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'load_event' "
                "AND type IN ('index', 'trigger') AND sql IS NOT NULL")
FLOOR = ("SELECT skill, COUNT(*) FROM load_event WHERE index_name = ? AND time >= ? "
         "AND time < ? GROUP BY skill")


def write_events(db: Path, count: int, now: datetime) -> None:
    """`count` events of index `default` in a migrated SQLite file, ending at `now`."""
    from skillindex.model import AuditRecord
    from skillindex.store import chain, sql
    from skillindex.store import usage as store_usage

    rng = random.Random(7)
    names = [f"skill-{number:06d}" for number in range(SKILLS)]
    picks = rng.choices(names, [1 / (rank + 1) for rank in range(SKILLS)], k=count)
    start = now - timedelta(days=SPAN_DAYS)
    step = (now - start) / count
    connection = sqlite3.connect(db)
    dropped = connection.execute(BULK_DROPPED).fetchall()
    head = None
    with connection:
        for kind, name, _ in dropped:
            connection.execute(f"DROP {kind.upper()} {name}")
        batch = []
        for number in range(count):
            outcome, level = rng.choice(OUTCOMES), 2 if rng.random() < 0.6 else 3
            record = AuditRecord(
                event="skill.read" if level == 2 else "resource.read", level=level,
                outcome=outcome, skill=picks[number],
                resource=None if level == 2 else "references/guide.md",
                bytes=rng.randrange(500, 5000) if outcome == "ok" else 0,
                session=f"s-{rng.randrange(SESSIONS)}", reason="bench")
            row = chain.linked(chain.fields_of("default", record), head, start + step * number)
            head = (row["row_hash"], row["time"])
            batch.append(row)
            if len(batch) == 50_000:
                connection.executemany(sql.AUDIT_APPEND.replace(" RETURNING id", ""), batch)
                batch.clear()
        connection.executemany(sql.AUDIT_APPEND.replace(" RETURNING id", ""), batch)
        for _, _, definition in dropped:
            connection.execute(definition)
        # The rollup's trigger was among those dropped: the rollup is made from the events, as
        # migration 0014 makes it.
        connection.execute(store_usage.CLEAR, {"index_name": "default"})
        connection.execute(store_usage.REBUILD, {"index_name": "default"})
    connection.execute("ANALYZE")
    connection.close()


def usage_figures(count: int, work: Path, repeat: int, *,
                  chain: bool = True) -> dict[str, Any]:
    """`SkillIndex.usage` over the last 30 days and over the whole log, each beside a plain
    count of the same window (medians, wall clock and CPU of this process); with `chain`,
    what recomputing the whole audit chain takes (once: the report does it every time)."""
    from scripts.benchkit import median_wall_and_cpu
    from skillindex import SkillIndex
    from skillindex.store import chain as audit_chain

    base = work / f"usage-{count}"
    base.mkdir(parents=True)
    config = base / "config.toml"
    config.write_text("[skills]\npresets = false\n")
    db = base / "index.sqlite"
    now = datetime.now(UTC)
    with SkillIndex.open(config, db=str(db), cwd=base):
        pass  # migrated
    started = time.perf_counter()
    write_events(db, count, now)
    results: dict[str, Any] = {"events": count, "generate_s": time.perf_counter() - started,
                               "load_average": os.getloadavg()}
    connection = sqlite3.connect(db)
    with SkillIndex.open(config, db=str(db), cwd=base) as index:
        for label, days in (("30d", 30), ("all", SPAN_DAYS + 1)):
            since = now - timedelta(days=days)
            window = (audit_chain.stored_time(since), audit_chain.stored_time(datetime.now(UTC)))

            def floor(window: tuple[str, str] = window) -> object:
                return connection.execute(FLOOR, ("default", *window)).fetchall()

            def usage(since: datetime = since) -> object:
                return index.usage(since=since)

            results[f"floor_{label}_s"], results[f"floor_{label}_cpu_s"] = (
                median_wall_and_cpu(floor, repeat))
            results[f"usage_{label}_s"], results[f"usage_{label}_cpu_s"] = (
                median_wall_and_cpu(usage, repeat))
        results["rows_30d"] = sum(row.attempts for row in index.usage(since="30d").skills)
        if chain:
            wall, cpu = time.perf_counter(), time.process_time()
            verified = index.verify_audit()
            results["chain_s"] = time.perf_counter() - wall
            results["chain_cpu_s"] = time.process_time() - cpu
            results["chain_events"] = verified.events
    connection.close()
    results["load_average_after"] = os.getloadavg()
    results["db_bytes"] = db.stat().st_size
    shutil.rmtree(base)
    return results


def report_figures(corpus: Path, work: Path, repeat: int) -> dict[str, Any]:
    """`skillindex report --html` on every skill of a registry (`corpus`: its tarball, or the
    folder it was extracted to, read in place), beside `skillindex list` (whole processes,
    medians of wall clock and CPU) on the same index, with loads of 300 skills in the log."""
    from scripts.benchkit import run_process

    base = work / "registry"
    base.mkdir(parents=True)
    started = time.perf_counter()
    skills = corpus
    if not corpus.is_dir():
        skills = base / "skills"
        skills.mkdir()
        with tarfile.open(corpus) as archive:
            archive.extractall(skills, filter="data")
    config = base / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{skills}"\n'
                      "precedence = 10\n")
    command = [sys.executable, "-m", "skillindex", "--config", str(config), "--db",
               str(base / "index.sqlite"), "--cwd", str(base)]
    subprocess.run([*command, "reindex", "-q"], check=True)
    results: dict[str, Any] = {"setup_s": time.perf_counter() - started,
                               "load_average": os.getloadavg()}
    listing = json.loads(subprocess.run([*command, "--json", "list"], check=True,
                                        capture_output=True, text=True).stdout)
    results["skills"] = len(listing)
    from skillindex import SkillIndex

    with SkillIndex.open(config, db=str(base / "index.sqlite"), cwd=base) as index:
        for entry in listing[:300]:
            index.read(f"skill://{entry['name']}", session="bench")
    out = base / "report.html"
    for key, argv in (("list", [*command, "list"]),
                      ("report", [*command, "report", "--html", str(out)])):
        run_process(argv)  # warm: the page cache holds the database
        walls, cpus = zip(*(run_process(argv) for _ in range(repeat)), strict=True)
        results[f"{key}_process_s"] = statistics.median(walls)
        results[f"{key}_process_cpu_s"] = statistics.median(cpus)
    summary = json.loads(subprocess.run([*command, "--json", "report", "--html", str(out)],
                                        check=True, capture_output=True, text=True).stdout)
    results["chain_s"] = summary["chain_seconds"]
    results["report_bytes"] = out.stat().st_size
    results["load_average_after"] = os.getloadavg()
    shutil.rmtree(base)
    return results


def table(usage: dict[str, Any] | None, report: dict[str, Any] | None) -> str:
    lines = ["| measure | wall | CPU |", "|---|---:|---:|"]
    if usage is not None:
        lines += [
            f"| events in the log / in the 30-day window | {usage['events']:,} | "
            f"{usage['rows_30d']:,} |",
            _row("plain count per skill, 30 days", usage, "floor_30d"),
            _row("`usage`, 30 days (library call)", usage, "usage_30d"),
            _row("plain count per skill, whole log", usage, "floor_all"),
            _row("`usage`, whole log", usage, "usage_all"),
            _ratio("ratio: usage / plain count, 30 days", usage, "usage_30d", "floor_30d"),
            _ratio("ratio: usage / plain count, whole log", usage, "usage_all", "floor_all"),
        ]
        if "chain_s" in usage:
            lines.append(_row(f"audit chain recomputed ({usage['chain_events']:,} events)",
                              usage, "chain"))
        lines.append(f"| database; load average before, after | "
                     f"{usage['db_bytes'] / 2**20:.0f} MiB | {_load(usage)} |")
    if report is not None:
        lines += [
            f"| skills in the catalog | {report['skills']:,} | |",
            _row("`skillindex list` process", report, "list_process"),
            _row("`skillindex report --html` process", report, "report_process"),
            _ratio("ratio: report / list", report, "report_process", "list_process"),
            f"| of which the audit chain | {report['chain_s']:.2f} s | |",
            f"| page; load average before, after | {report['report_bytes'] / 2**20:.1f} MiB | "
            f"{_load(report)} |",
        ]
    return "\n".join(lines)


def _row(label: str, figures: dict[str, Any], key: str) -> str:
    return f"| {label} | {figures[key + '_s']:.3f} s | {figures[key + '_cpu_s']:.3f} s |"


def _ratio(label: str, figures: dict[str, Any], key: str, base: str) -> str:
    return (f"| {label} | {figures[key + '_s'] / figures[base + '_s']:.2f}x | "
            f"{figures[key + '_cpu_s'] / figures[base + '_cpu_s']:.2f}x |")


def _load(figures: dict[str, Any]) -> str:
    return f"{figures['load_average'][0]:.1f}, {figures['load_average_after'][0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="audit events (0: skip)")
    parser.add_argument("--corpus", type=Path,
                        help="registry-skills.tar.xz or the folder it extracts to, for the report")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-chain", action="store_true",
                        help="skip recomputing the chain of N events (minutes at 1,000,000)")
    parser.add_argument("--work", type=Path, help="where to build (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    work = Path(tempfile.mkdtemp(prefix="skillindex-usagebench-", dir=args.work))
    try:
        usage = (usage_figures(args.events, work, args.repeat, chain=not args.no_chain)
                 if args.events else None)
        report = (report_figures(args.corpus, work, max(1, args.repeat // 2))
                  if args.corpus else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"usage": usage, "report": report}, indent=2))
    else:
        print(table(usage, report))


if __name__ == "__main__":
    main()
