"""Benchmark: skillindex against the floors a persistent index is measured by, in one run.

Generates skill trees of N skills spread over four roots (with some name collisions), then times,
each as the median of several repetitions:

  floor A   os.scandir + stat of every file (what an unchanged reindex cannot beat)
  floor B   scandir + read + xxh3 + YAML parse of every file, no database (what a cold index
            cannot beat)
  cold / unchanged / 1%-changed reindex, the catalog library call and `skillindex catalog` as a
  whole process, `index.read` of a body and of a resource, and the peak memory of a cold index;
  search and a query-ranked catalog, and what the full-text index adds to a cold index's time
  and to the database's size (against the same reindex without it); `skillindex check` of the
  same trees (no database) in the library and as a whole process, beside floor B;

then the relevance of search on real skills: the task prompts of scripts/relevance_data (each
naming the skill that should come first) over the public stand-ins above the registry sample
(`--corpus`, default the one beside the repository) and above the whole registry (`--registry`,
the archive or its extracted folder): recall@1, recall@5 and MRR beside plain BM25 over the
same winners' names and descriptions (rank-bm25, the `bench` extra), on the tuning and the
held-out half; the share of prompts whose skill keeps its description in `catalog --query`,
the search's times and the `search` process.

Prints a table of absolute times and ratios to the floors (or JSON with --json). Ratios, never
absolute thresholds: the machine decides the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import xxhash
import yaml

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "registry-sample"
REGISTRY = CORPUS.with_name("registry-skills.tar.xz")


def floor_a(roots: list[Path]) -> int:
    files = 0
    stack = [str(r) for r in roots]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir():  # symlinked skill folders are walked, as the indexer does
                    stack.append(entry.path)
                else:
                    entry.stat()
                    files += 1
    return files


def floor_b(roots: list[Path]) -> int:
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    parsed = 0
    stack = [str(r) for r in roots]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir():
                    stack.append(entry.path)
                    continue
                with open(entry.path, "rb") as handle:
                    data = handle.read()
                xxhash.xxh3_128_hexdigest(data)
                if entry.name == "SKILL.md":
                    head = data.decode("utf-8").split("\n---\n", 1)[0][4:]
                    yaml.load(head, Loader=loader)
                    parsed += 1
    return parsed


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec, so
# a child of this (large) benchmark process would report the benchmark's own peak.
HIGH_WATER = (
    "print(next(int(line.split()[1]) for line in open('/proc/self/status') "
    "if line.startswith('VmHWM')))"
)
PEAK_SCRIPT = textwrap.dedent("""
    import sys
    from skillindex import SkillIndex
    with SkillIndex.open(sys.argv[1], db=sys.argv[2], cwd=sys.argv[3]) as index:
        index.reindex()
""") + HIGH_WATER
BASELINE_SCRIPT = textwrap.dedent("""
    import sys
    from skillindex import SkillIndex
    with SkillIndex.open(sys.argv[1], db=sys.argv[2], cwd=sys.argv[3]) as index:
        index.candidates()
""") + HIGH_WATER


def peak_kib(script: str, config: Path, db: Path, cwd: Path) -> int:
    output = subprocess.run([sys.executable, "-c", script, str(config), str(db), str(cwd)],
                            check=True, capture_output=True, text=True).stdout
    return int(output.strip().splitlines()[-1])


def check_rows(roots: list[Path], cwd: Path, repeat: int) -> dict[str, float]:
    """`skillindex check` of the trees (the set's name collisions make it exit 1) in the
    library and as a whole process, each with a worker per core and in one process, every
    figure timed in turn with floor B."""
    from scripts.benchkit import timed
    from skillindex.index.parallel import default_jobs
    from skillindex.query.check import check

    cores = default_jobs()
    command = [sys.executable, "-m", "skillindex", "check", "--format", "json",
               *map(str, roots)]
    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        for key, function in (
                ("check_floor_b_s", lambda: floor_b(roots)),
                ("check_call_s", lambda: check(roots, base=cwd, jobs=cores)),
                ("check_call_1_job_s", lambda: check(roots, base=cwd, jobs=1)),
                ("check_process_s", lambda: subprocess.run(command, capture_output=True,
                                                           check=False)),
                ("check_process_1_job_s", lambda: subprocess.run(
                    [*command, "--jobs", "1"], capture_output=True, check=False))):
            times.setdefault(key, []).append(timed(function))
    return {key: statistics.median(values) for key, values in times.items()}


def startup_rows(config: Path, db: Path, cwd: Path, repeat: int) -> dict[str, float]:
    """Whole `skillindex` processes of the one-shot commands beside `python -c pass`, medians.

    Each repetition runs every command once in turn, so a busy neighbour slows them alike. The
    processes may write and use bytecode caches (an installed package has them), and each
    command runs once before timing so that the caches exist.
    """
    base = [sys.executable, "-m", "skillindex", "--config", str(config), "--db", str(db),
            "--cwd", str(cwd)]
    commands = {
        "python_start_s": [sys.executable, "-c", "pass"],
        "read_process_s": [*base, "read", "skill://skill-000002", "--session", "startup"],
        "command_process_s": [*base, "command", "--session", "startup", "skill-000002", "go"],
        "audit_process_s": [*base, "audit", "--session", "startup"],
        "catalog_process_s": [*base, "catalog"],
        "search_process_s": [*base, "search", "report export"],
    }
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

    def run(argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True, env=env)

    times: dict[str, list[float]] = {key: [] for key in commands}
    for argv in commands.values():
        run(argv)
    for _ in range(max(repeat, 5)):
        for key, argv in commands.items():
            started = time.perf_counter()
            run(argv)
            times[key].append(time.perf_counter() - started)
    return {key: statistics.median(values) for key, values in times.items()}


SHAPE = ["users"]  # the generated trees' shape (--tree)
# `skillindex serve` over stdio is measured when the mcp extra is installed.
MCP_OPTIONS: dict[str, Any] = {"enabled": False, "agentskills": None}


def installs(count: int, repeat: int, work: Path, pythons: dict[str, str],
             shape: str) -> dict[str, Any]:
    """Only the `reindex` processes of each install beside floors A and B (`--install`)."""
    from scripts import freshbench
    from scripts.benchkit import generate, settings_file
    from skillindex import SkillIndex

    base = work / f"n{count}"
    roots = generate(base / "tree", count, shape)
    config = settings_file(base, roots)
    db = base / "index.sqlite"
    with SkillIndex.open(config, db=str(db), cwd=base) as index:
        index.reindex()
    results: dict[str, Any] = {"skills": count}
    results.update(freshbench.installs(config, base, base, db, {
        "a": lambda: floor_a(roots), "b": lambda: floor_b(roots)}, pythons, repeat))
    shutil.rmtree(base)
    return results


def bench(count: int, repeat: int, work: Path, *, memory: bool = False,
          watch: bool = True) -> dict[str, Any]:
    from scripts import freshbench, searchbench
    from scripts.benchkit import generate, median_time, settings_file, skill_text, timed
    from skillindex import SkillIndex

    base = work / f"n{count}"
    started = time.perf_counter()
    roots = generate(base / "tree", count, SHAPE[0])
    generated = time.perf_counter() - started
    config = settings_file(base, roots)
    cwd = base
    results: dict[str, Any] = {"skills": count, "files": count * 4, "generate_s": generated}
    fresh: list[Any] = []

    def open_empty() -> None:
        # A new, migrated, empty database: the migration is a one-time cost, not indexing.
        for index in fresh:
            index.close()
        fresh[:] = [SkillIndex.open(config, db=str(base / f"cold-{len(os.listdir(base))}.sqlite"),
                                    cwd=cwd)]

    # Each figure is timed in turn with its floor, so that a busy neighbour on a shared machine
    # slows both sides of a ratio alike rather than one of them.
    cold, floor_b_times, cold_one, cold_plain = [], [], [], []
    for number in range(repeat):
        open_empty()
        floor_b_times.append(timed(lambda: floor_b(roots)))
        cold.append(timed(fresh[0].reindex))
        # The full text's share in one process (worker processes would compute the text
        # whatever the switch says), the two sides in alternating order.
        for plain in (number % 2 == 0, number % 2 == 1):
            open_empty()
            if plain:
                with searchbench.without_full_text(Path(str(fresh[0].engine.url.database))):
                    cold_plain.append(timed(lambda: fresh[0].reindex(jobs=1)))
            else:
                cold_one.append(timed(lambda: fresh[0].reindex(jobs=1)))
    fresh[0].close()
    (results["floor_b_s"], results["cold_s"], results["cold_one_process_s"],
     results["cold_without_full_text_s"]) = map(statistics.median,
                                                 (floor_b_times, cold, cold_one, cold_plain))
    db = base / "index.sqlite"
    index = SkillIndex.open(config, db=str(db), cwd=cwd)
    index.reindex()
    floor_a_times, unchanged = [], []
    for _ in range(repeat):
        floor_a_times.append(timed(lambda: floor_a(roots)))
        unchanged.append(timed(index.reindex))
    results["floor_a_s"], results["unchanged_s"] = map(statistics.median,
                                                       (floor_a_times, unchanged))
    results.update(freshbench.processes(config, base, cwd, db, {
        "a": lambda: floor_a(roots), "b": lambda: floor_b(roots)}, repeat))
    results.update(check_rows(roots, cwd, repeat))

    changed = max(1, count // 100)
    version = iter(range(1, 10**6))

    def change_one_percent() -> None:
        v = next(version)
        for number in range(0, count, max(1, count // changed)):
            path = roots.skill_md[number]
            path.write_text(skill_text(number, path.parent.name, v))

    results["changed_1pct_s"] = median_time(index.reindex, repeat, before=change_one_percent)
    results["changed_skills"] = changed
    results.update(freshbench.first_catalog(index, change_one_percent, max(repeat, 3)))

    if hasattr(index, "catalog"):
        index.catalog()
        results["catalog_call_s"] = median_time(index.catalog, max(repeat, 5))
        # The `catalog` process and its floor, `python -c pass`, with the other one-shot
        # commands, each beside the others.
        results.update(startup_rows(config, db, cwd, repeat))
    if hasattr(index, "read"):
        name = "skill-000002"
        index.read(f"skill://{name}", reason="bench")
        results["read_body_s"] = median_time(
            lambda: index.read(f"skill://{name}", reason="bench"), max(repeat, 20))
        results["read_resource_s"] = median_time(
            lambda: index.read(f"skill://{name}/references/guide.md", reason="bench"),
            max(repeat, 20))
    if MCP_OPTIONS["enabled"]:
        from scripts.bench_mcp import bench_mcp

        results.update(bench_mcp(base, config=config, db=db, cwd=cwd, repeat=repeat,
                                 skill_dirs=[w.candidate.directory for w in index.winners()],
                                 agentskills=MCP_OPTIONS["agentskills"]))
    if hasattr(index, "search"):
        results.update(searchbench.speed(index, db, count, median_time))
    index.close()
    if watch:
        results.update(freshbench.watch(config, db, cwd, roots.skill_md[0],
                                        max(repeat, 5), idle_seconds=2 if repeat == 1 else 10))
    if memory:
        results["memory"] = freshbench.memory(config, base, cwd, "skill-000002")

    results["peak_rss_mb"] = peak_kib(PEAK_SCRIPT, config, base / "peak.sqlite", cwd) / 1024
    results["baseline_rss_mb"] = peak_kib(BASELINE_SCRIPT, config, base / "base.sqlite",
                                          cwd) / 1024
    shutil.rmtree(base)
    return results


def ratios(result: dict[str, Any]) -> dict[str, float]:
    out = {
        "unchanged / floor A": result["unchanged_s"] / result["floor_a_s"],
        "cold / floor B": result["cold_s"] / result["floor_b_s"],
        "1% changed / unchanged": result["changed_1pct_s"] / result["unchanged_s"],
        "cold / cold without full text, one process": (
            result["cold_one_process_s"] / result["cold_without_full_text_s"]),
    }
    if "reindex_unchanged_process_s" in result:
        cores = result["cores"]
        one, every = (result[f"reindex_cold_process_{jobs}_jobs_s"] for jobs in (1, cores))
        out["`reindex` process, unchanged / floor A"] = (result["reindex_unchanged_process_s"]
                                                        / result["process_floor_a_s"])
        out["`reindex` process, unchanged, 1 process / floor A"] = (
            result["reindex_unchanged_1_job_process_s"] / result["process_floor_a_s"])
        out["`reindex` process, cold, 1 process / floor B"] = one / result["process_floor_b_s"]
        out[f"`reindex` process, cold, {cores} workers / floor B"] = (
            every / result["process_floor_b_s"])
        out[f"cold speed-up, {cores} workers over 1 process"] = one / every
    if "check_call_s" in result:
        floor = result["check_floor_b_s"]
        out["check / floor B"] = result["check_call_s"] / floor
        out["check, 1 process / floor B"] = result["check_call_1_job_s"] / floor
        out["`check` process / floor B"] = result["check_process_s"] / floor
        out["`check` process, 1 process / floor B"] = result["check_process_1_job_s"] / floor
    if "first_catalog_after_reindex_s" in result:
        out["first catalog after a reindex / cached catalog"] = (
            result["first_catalog_after_reindex_s"] / result["cached_catalog_s"])
    if "mcp_start_s" in result:
        from scripts.bench_mcp import ratios as serve_ratios

        out.update(serve_ratios(result))
    if "db_bytes" in result:
        out["database / without full text"] = (result["db_bytes"]
                                                / result["db_bytes_without_full_text"])
    return out


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        ("floor A: scandir + stat", "floor_a_s"),
        ("floor B: read + xxh3 + YAML", "floor_b_s"),
        ("cold index", "cold_s"),
        ("unchanged reindex", "unchanged_s"),
        ("reindex, 1% changed", "changed_1pct_s"),
        ("floor A, beside the processes", "process_floor_a_s"),
        ("`skillindex reindex` process, unchanged", "reindex_unchanged_process_s"),
        ("`skillindex reindex` process, unchanged, 1 process (`--jobs 1`)",
         "reindex_unchanged_1_job_process_s"),
        ("floor B, beside the processes", "process_floor_b_s"),
        ("`skillindex reindex` process, cold, 1 process", "reindex_cold_process_1_jobs_s"),
        ("`skillindex reindex` process, cold, 2 workers", "reindex_cold_process_2_jobs_s"),
        ("`skillindex reindex` process, cold, 4 workers", "reindex_cold_process_4_jobs_s"),
        ("`skillindex list` process", "list_process_s"),
        ("`skillindex --json list` process", "list_json_process_s"),
        ("`skillindex verify` process (hashes every file)", "verify_process_s"),
        ("floor B, beside check", "check_floor_b_s"),
        ("check (library, a worker per core)", "check_call_s"),
        ("check (library, 1 process)", "check_call_1_job_s"),
        ("`skillindex check` process", "check_process_s"),
        ("`skillindex check` process, 1 process (`--jobs 1`)", "check_process_1_job_s"),
        ("first catalog after a reindex", "first_catalog_after_reindex_s"),
        ("the same catalog again (cached)", "cached_catalog_s"),
        ("watch: a write until its reindex has committed", "watch_latency_s"),
        ("watch: the slowest of those", "watch_latency_max_s"),
        ("watch: then the first catalog (every skill in full)", "watch_catalog_after_s"),
        ("watch: a write until the catalog shows it", "watch_to_catalog_s"),
        ("watch: its watches set up, after the first pass", "watch_settle_s"),
        ("catalog library call", "catalog_call_s"),
        ("`skillindex catalog` process", "catalog_process_s"),
        ("python -c pass (process floor)", "python_start_s"),
        ("`skillindex read` process", "read_process_s"),
        ("`skillindex command` process", "command_process_s"),
        ("`skillindex audit` process", "audit_process_s"),
        ("`skillindex search` process", "search_process_s"),
        ("read body (verify + audit)", "read_body_s"),
        ("read resource (verify + audit)", "read_resource_s"),
        ("serve: start-up to first skills/list page", "mcp_start_s"),
        ("serve: skills/list, every page", "mcp_list_all_s"),
        ("serve: one resources/read", "mcp_read_s"),
        ("serve, JSON-only client: start-up to first page", "mcp_raw_start_s"),
        ("serve, JSON-only client: skills/list, every page", "mcp_raw_list_all_s"),
        ("serve, JSON-only client: one resources/read", "mcp_raw_read_s"),
        ("serve CPU: start-up to first page", "mcp_raw_server_cpu_start_s"),
        ("serve CPU: skills/list, every page", "mcp_raw_server_cpu_list_all_s"),
        ("serve CPU: one resources/read", "mcp_raw_server_cpu_read_s"),
        ("serve: peak RSS after every page and the reads (MB)", "mcp_raw_server_peak_mb"),
        ("python -c 'import mcp.server' (serve's floor)", "mcp_import_floor_s"),
        ("agentskills-mcp-server: start-up to first page", "agentskills_start_s"),
        ("agentskills-mcp-server: skills/list, every page", "agentskills_list_all_s"),
        ("agentskills-mcp-server: one resources/read", "agentskills_read_s"),
        ("agentskills-mcp-server CPU: start-up to first page",
         "agentskills_raw_server_cpu_start_s"),
        ("agentskills-mcp-server CPU: skills/list, every page",
         "agentskills_raw_server_cpu_list_all_s"),
        ("agentskills-mcp-server CPU: one resources/read", "agentskills_raw_server_cpu_read_s"),
        ("agentskills-mcp-server: peak RSS (MB)", "agentskills_raw_server_peak_mb"),
        ("cold index, one process", "cold_one_process_s"),
        ("cold index without full text, one process", "cold_without_full_text_s"),
        ("search, words every skill has", "search_common_s"),
        ("search, a word one skill has", "search_selective_s"),
        ("catalog --query (library call)", "catalog_query_s"),
    ]
    header = "| measure | " + " | ".join(f"{r['skills']:,} skills" for r in results) + " |"
    lines = [header, "|---|" + "---:|" * len(results)]
    for label, key in rows:
        if not any(key in r for r in results):
            continue
        cells = [_time(r.get(key)) if not key.endswith("_mb") else f"{r[key]:.0f} MB"
                 if key in r else "-" for r in results]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if any("watch_idle_cpu_percent" in r for r in results):
        lines.append("| watch: CPU while idle | " + " | ".join(
            f"{r['watch_idle_cpu_percent']:.2f}%" if "watch_idle_cpu_percent" in r else "-"
            for r in results) + " |")
    lines.append("| peak RSS of a cold index | " + " | ".join(
        f"{r['peak_rss_mb']:.0f} MB" for r in results) + " |")
    lines.append("| peak RSS of open + migrate + query | " + " | ".join(
        f"{r['baseline_rss_mb']:.0f} MB" for r in results) + " |")
    for name in ratios(results[0]):
        lines.append(f"| ratio: {name} | " + " | ".join(
            f"{ratios(r)[name]:.2f}x" if name in ratios(r) else "-" for r in results) + " |")
    return "\n".join(lines)


def _time(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 0.1:
        return f"{value * 1000:.2f} ms"
    return f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, help="skill counts (default 1000 10000 "
                        "100000)")
    parser.add_argument("--quick", action="store_true", help="a small smoke run (200 skills)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per figure")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--work", type=Path, help="where to generate trees (default: a temp dir)")
    parser.add_argument("--agentskills-python", metavar="PYTHON",
                        help="a Python >= 3.12 with agentskills-mcp-server, to measure beside "
                        "`skillindex serve`")
    parser.add_argument("--corpus", type=Path, default=CORPUS,
                        help="the registry sample, for relevance (default: %(default)s)")
    parser.add_argument("--registry", type=Path, default=REGISTRY,
                        help="the whole registry, its archive or folder (default: %(default)s)")
    parser.add_argument("--public", type=Path, action="append",
                        help="a public skills folder instead of the project's stand-ins "
                        "(repeatable)")
    parser.add_argument("--no-relevance", action="store_true", help="skip the relevance figures")
    parser.add_argument("--relevance-only", action="store_true",
                        help="only the relevance figures (no generated trees)")
    parser.add_argument("--memory", action="store_true",
                        help="peak memory of every command at the largest size")
    parser.add_argument("--no-watch", action="store_true", help="skip the watcher's figures")
    parser.add_argument("--usage-events", type=int, metavar="N",
                        help="audit events for the `usage` figures (default 1,000,000; "
                        "--quick: 10,000; 0 skips them)")
    parser.add_argument("--report-corpus", type=Path, metavar="PATH",
                        help="registry-skills.tar.xz or the folder it extracts to: "
                        "`report --html` at its 61,452 skills")
    parser.add_argument("--no-agentskills", action="store_true",
                        help="skip agentskills-mcp-server (its start-up takes minutes at 10,000)")
    parser.add_argument("--tree", choices=("users", "plain"), default="users",
                        help="the trees' shape: repeated names anywhere in the next root, "
                        "symlinked skill folders and nested groups (users, the default), or "
                        "every name's copy beside it (plain, the earlier benchmark's)")
    parser.add_argument("--install", action="append", metavar="LABEL=PYTHON", default=[],
                        help="only the `reindex` processes, of each such install (an "
                        "interpreter whose environment has skillindex installed), in turn "
                        "(repeatable)")
    parser.add_argument("--http-load", type=int, nargs="*", metavar="CLIENTS",
                        help="only the load on `serve --http` (scripts/bench_http.py): this "
                        "many clients (default 20 then 5) reading skill files from a bare MCP "
                        "SDK server, then skillindex on SQLite and on PostgreSQL with 1 and 2 "
                        "replicas, as ratios to the bare server")
    parser.add_argument("--http-seconds", type=float, default=12.0,
                        help="how long each HTTP load runs")
    parser.add_argument("--registry-scale", type=Path, metavar="DIR",
                        help="only the freshness and output figures at registry size "
                        "(scripts/registrybench.py): DIR is the registry extracted, one folder "
                        "per skill; the sizes default to its own and 100,000; the indexes are "
                        "kept under --work for the next run")
    parser.add_argument("--signatures", action="store_true",
                        help="only what signatures cost (scripts/signbench.py): a cold index "
                        "of unsigned skills with signatures = record against off, and the "
                        "time to verify one signed skill (sizes default to 10,000)")
    args = parser.parse_args()
    SHAPE[0] = args.tree
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if args.signatures:
        from scripts import signbench

        work = Path(tempfile.mkdtemp(prefix="skillindex-signatures-", dir=args.work))
        try:
            for size in args.sizes or [10_000]:
                result = signbench.run(work, size, args.repeat)
                print(json.dumps(result) if args.json else signbench.table(result), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.registry_scale:
        from scripts import registrybench

        work = args.work or Path(tempfile.mkdtemp(prefix="skillindex-registry-"))
        for size in args.sizes or registrybench.default_sizes(args.registry_scale):
            result = registrybench.run(args.registry_scale, work, size, args.repeat)
            print(json.dumps(result) if args.json else registrybench.table(size, result),
                  flush=True)
        return
    if args.http_load is not None:
        from scripts import bench_http

        work = Path(tempfile.mkdtemp(prefix="skillindex-http-", dir=args.work))
        try:
            print("loading serve --http beside a bare MCP SDK server ...", file=sys.stderr,
                  flush=True)
            loaded = bench_http.bench_http(work, clients=args.http_load or bench_http.CLIENTS,
                                           seconds=args.http_seconds)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(loaded, indent=2) if args.json else bench_http.table(loaded))
        return
    if args.install:
        pythons = dict(item.split("=", 1) for item in args.install)
        from scripts import freshbench

        work = Path(tempfile.mkdtemp(prefix="skillindex-bench-", dir=args.work))
        try:
            for size in args.sizes or [10_000]:
                print(f"benchmarking the installs at {size} skills ...", file=sys.stderr,
                      flush=True)
                result = installs(size, args.repeat, work, pythons, args.tree)
                print(json.dumps(result) if args.json
                      else freshbench.installs_table(size, result, list(pythons)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("mcp is not installed: `skillindex serve` is not measured", file=sys.stderr)
    else:
        from scripts.bench_mcp import agentskills_python

        MCP_OPTIONS["enabled"] = True
        MCP_OPTIONS["agentskills"] = (None if args.no_agentskills
                                      else agentskills_python(args.agentskills_python))
    sizes = [200] if args.quick else (args.sizes or [1_000, 10_000, 100_000])
    if args.relevance_only:
        sizes = []
    repeat = 1 if args.quick else args.repeat
    work = Path(tempfile.mkdtemp(prefix="skillindex-bench-", dir=args.work))
    try:
        results = []
        for size in sizes:
            print(f"benchmarking {size} skills ...", file=sys.stderr, flush=True)
            results.append(bench(size, repeat, work, memory=args.memory and size == max(sizes),
                                 watch=not args.no_watch))
        from scripts import freshbench, searchbench
        from scripts.relevance import STAND_INS

        relevance = None
        if not args.no_relevance and args.corpus.is_dir():
            print(f"relevance on {args.corpus} ...", file=sys.stderr, flush=True)
            registry = None if args.quick or not args.registry.exists() else args.registry
            relevance = searchbench.relevance_report(
                args.corpus, registry, args.public or [STAND_INS], work)
        elif not args.no_relevance:
            print(f"no corpus at {args.corpus}: relevance skipped", file=sys.stderr)
        from scripts import usagebench

        events = args.usage_events if args.usage_events is not None else (
            10_000 if args.quick else 1_000_000)
        usage = usagebench.usage_figures(events, work, repeat) if events else None
        report = (usagebench.report_figures(args.report_corpus, work, repeat)
                  if args.report_corpus else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"sizes": [{**r, "ratios": ratios(r)} for r in results],
                          "relevance": relevance, "usage": usage, "report": report},
                         indent=2))
    else:
        if results:
            print(table(results))
        for result in results:
            if "memory" in result:
                print()
                print(freshbench.memory_table(result["skills"], result["memory"]))
        if relevance is not None:
            print()
            print(searchbench.relevance_table(relevance))
        if usage is not None or report is not None:
            print()
            print(usagebench.table(usage, report))


if __name__ == "__main__":
    main()
