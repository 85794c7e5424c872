"""Freshness and scale figures of the benchmark: whole-process reindexes beside their floors, the
cold index per worker count, the first catalog after a reindex, the watcher's latency and idle
CPU, and the peak memory of every command.

Used by scripts/bench.py; `python scripts/freshbench.py memory N` measures the peak memory of
every command alone at N skills (a tree of 100,000 takes a while to generate and index).
"""

from __future__ import annotations

import json
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cli(config: Path, db: Path, cwd: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skillindex", "--config", str(config), "--db", str(db),
            "--cwd", str(cwd), *args]


def run(command: list[str]) -> None:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def processes(config: Path, base: Path, cwd: Path, db: Path,
              floors: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """`skillindex reindex` as a whole process: unchanged (its walk shared by a process per core,
    and in one) beside floor A, cold with one process and with a worker per core beside floor
    B, each timed in turn with its floor; `list` (table and JSON) and `verify` as whole
    processes."""
    from skillindex.index.parallel import default_jobs

    cores = default_jobs()
    times: dict[str, list[float]] = {}

    def timed(key: str, function: Callable[[], object] | list[str]) -> None:
        started = time.perf_counter()
        run(function) if isinstance(function, list) else function()
        times.setdefault(key, []).append(time.perf_counter() - started)

    fresh = iter(range(10**6))
    for _ in range(repeat):
        timed("process_floor_a_s", floors["a"])
        timed("reindex_unchanged_process_s", cli(config, db, cwd, "reindex", "-q"))
        # The walk of an unchanged reindex is shared by a process per core: also in one.
        timed("reindex_unchanged_1_job_process_s",
              cli(config, db, cwd, "reindex", "-q", "--jobs", "1"))
        timed("process_floor_b_s", floors["b"])
        for jobs in sorted({1, cores}):
            target = base / f"process-cold-{next(fresh)}.sqlite"
            run(cli(config, target, cwd, "db", "upgrade"))
            timed(f"reindex_cold_process_{jobs}_jobs_s",
                  cli(config, target, cwd, "reindex", "-q", "--jobs", str(jobs)))
            target.unlink()
        timed("list_process_s", cli(config, db, cwd, "list"))
        timed("list_json_process_s", cli(config, db, cwd, "--json", "list"))
    timed("verify_process_s", cli(config, db, cwd, "verify"))  # hashes every file: once
    results = {key: statistics.median(values) for key, values in times.items()}
    results["cores"] = cores
    return results


def installs(config: Path, base: Path, cwd: Path, db: Path,
             floors: dict[str, Callable[[], object]], pythons: dict[str, str],
             repeat: int) -> dict[str, float]:
    """`skillindex reindex` as whole processes of each install in `pythons` (label: its
    interpreter, e.g. a non-editable install with compiled bytecode, as users have), every
    repetition timing each figure of each install in turn beside its floor: unchanged with
    the default jobs and with `--jobs 1` beside floor A, into a new database (schema
    included) with the default jobs and with `--jobs 1` beside floor B. Medians, keyed
    `<label>:<figure>`."""
    times: dict[str, list[float]] = {}

    def run_there(argv: list[str]) -> None:
        # Started in the tree's folder: `python -m` looks in the folder it starts in first,
        # which must not be a checkout of the package.
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=cwd)

    def timed(key: str, function: Callable[[], object] | list[str]) -> None:
        # CPU as well as wall time: the CPU of a process (and of the workers it waited for)
        # barely moves with what else the machine runs.
        started, cpu = time.perf_counter(), _cpu(isinstance(function, list))
        run_there(function) if isinstance(function, list) else function()
        times.setdefault(key, []).append(time.perf_counter() - started)
        times.setdefault(f"{key}:cpu", []).append(_cpu(isinstance(function, list)) - cpu)

    def command(python: str, target: Path, *args: str) -> list[str]:
        return [python, *cli(config, target, cwd, *args)[1:]]

    fresh = iter(range(10**6))
    for python in pythons.values():  # bytecode caches written, the index there
        run_there(command(python, db, "reindex", "-q"))
    for _ in range(repeat):
        timed("floor_a_s", floors["a"])
        for label, python in pythons.items():
            timed(f"{label}:unchanged_s", command(python, db, "reindex", "-q"))
            timed(f"{label}:unchanged_1_job_s", command(python, db, "reindex", "-q", "-j", "1"))
        timed("floor_b_s", floors["b"])
        for label, python in pythons.items():
            for key, jobs in (("cold_s", ()), ("cold_1_job_s", ("-j", "1"))):
                target = base / f"install-cold-{next(fresh)}.sqlite"
                timed(f"{label}:{key}", command(python, target, "reindex", "-q", *jobs))
                for path in base.glob(f"{target.name}*"):
                    path.unlink()
    return {key: statistics.median(values) for key, values in times.items()}


def _cpu(children: bool) -> float:
    """User and system CPU seconds of the processes this one waited for, or of this one."""
    if not children:
        return time.process_time()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


INSTALL_ROWS = (("`reindex`, nothing changed (default jobs)", "unchanged_s", "a"),
                ("the same with `--jobs 1`", "unchanged_1_job_s", "a"),
                ("`reindex` into an empty index (schema included)", "cold_s", "b"),
                ("the same, one process (`--jobs 1`)", "cold_1_job_s", "b"))


def installs_table(count: int, results: dict[str, float], labels: list[str]) -> str:
    """The figures of `installs` with each install's ratio to its floor, in wall and in CPU
    time (a process's own and its workers')."""
    lines = [f"| figure at {count:,} skills | " + " | ".join(
        f"{label} wall | ratio | {label} CPU | ratio" for label in labels) + " | floor wall, CPU |",
        "|---|" + "---:|---:|---:|---:|" * len(labels) + "---:|"]
    for title, key, floor in INSTALL_ROWS:
        below, below_cpu = results[f"floor_{floor}_s"], results[f"floor_{floor}_s:cpu"]
        cells = [f"{results[f'{label}:{key}']:.2f} s | {results[f'{label}:{key}'] / below:.2f}x | "
                 f"{results[f'{label}:{key}:cpu']:.2f} s | "
                 f"{results[f'{label}:{key}:cpu'] / below_cpu:.2f}x" for label in labels]
        lines.append(f"| {title} | " + " | ".join(cells)
                     + f" | {floor.upper()} {below:.2f} s, {below_cpu:.2f} s |")
    return "\n".join(lines)


def first_catalog(index: Any, touch: Callable[[], object], repeat: int) -> dict[str, float]:
    """The first catalog after a reindex that changed a skill (no cached text), and the next."""
    first, cached = [], []
    for _ in range(repeat):
        touch()
        index.reindex()
        started = time.perf_counter()
        index.catalog()
        first.append(time.perf_counter() - started)
        started = time.perf_counter()
        index.catalog()
        cached.append(time.perf_counter() - started)
    return {"first_catalog_after_reindex_s": statistics.median(first),
            "cached_catalog_s": statistics.median(cached)}


def watch(config: Path, db: Path, cwd: Path, skill_md: Path, repeat: int,
          idle_seconds: float = 5.0) -> dict[str, float]:
    """Time from a write to the change being in the catalog under `skillindex watch`, and the
    watcher's CPU while nothing changes."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        print("watchfiles is not installed: the watcher is not measured", file=sys.stderr)
        return {}
    from scripts.benchkit import cpu_seconds
    from skillindex import SkillIndex

    # Unbuffered: select() must see every pass line that has not been read yet.
    watcher = subprocess.Popen(cli(config, db, cwd, "--json", "watch"), stdout=subprocess.PIPE,
                               bufsize=0,
                               stderr=subprocess.DEVNULL)
    assert watcher.stdout is not None
    latencies, catalogs, total = [], [], []
    try:
        next_pass(watcher, 600)  # the first, full reindex
        # Then the watcher sets its watches up (a walk of every directory): idle is measured
        # once it has settled, and the time that took is reported.
        settled = settle(watcher, 300)
        before = cpu_seconds(watcher.pid)
        time.sleep(idle_seconds)
        idle = (cpu_seconds(watcher.pid) - before) / idle_seconds
        original = skill_md.read_text()
        with SkillIndex.open(config, db=str(db), cwd=cwd) as index:
            for number in range(repeat):
                marker = f"watched edit {number} {time.time_ns()}"
                started = time.perf_counter()
                skill_md.write_text(original.replace("description: ", f"description: {marker} ",
                                                     1))
                # The watcher reports each pass once its transaction has committed.
                next_pass(watcher, 120)
                committed = time.perf_counter()
                # The first catalog after a reindex; every skill in full, so the edit shows.
                if marker not in index.catalog(max_chars=10**9).text:
                    raise RuntimeError("the watcher's pass did not bring the edit")
                done = time.perf_counter()
                latencies.append(committed - started)
                catalogs.append(done - committed)
                total.append(done - started)
                time.sleep(0.5)
                while select.select([watcher.stdout], [], [], 0)[0]:
                    next_pass(watcher, 1)  # a burst split in two passes: not the next edit's
        skill_md.write_text(original)
    finally:
        stop(watcher)
    return {"watch_latency_s": statistics.median(latencies),
            "watch_latency_max_s": max(latencies),
            "watch_catalog_after_s": statistics.median(catalogs),
            "watch_to_catalog_s": statistics.median(total),
            "watch_settle_s": settled, "watch_idle_cpu_percent": idle * 100}


def stop(watcher: subprocess.Popen[bytes]) -> None:
    """End the watcher as Ctrl-C would, killed if it has not stopped within 30 s."""
    watcher.send_signal(signal.SIGINT)
    try:
        watcher.wait(30)
    except subprocess.TimeoutExpired:
        watcher.kill()


def settle(watcher: subprocess.Popen[bytes], limit: float) -> float:
    """Wait (at most `limit` seconds) until a second of the watcher costs under 2% of a core,
    as it does once its watches are set up; the seconds that took."""
    from scripts.benchkit import cpu_seconds

    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        before = cpu_seconds(watcher.pid)
        time.sleep(1)
        if cpu_seconds(watcher.pid) - before < 0.02:
            break
    return time.perf_counter() - began


def next_pass(watcher: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    assert watcher.stdout is not None
    ready, _, _ = select.select([watcher.stdout], [], [], timeout)
    if not ready:
        raise RuntimeError(f"the watcher reported no pass in {timeout:.0f} s")
    line = watcher.stdout.readline()
    if not line:
        raise RuntimeError("the watcher ended")
    return dict(json.loads(line))


# Runs the command line given in argv and reports the process's peak resident memory (VmHWM,
# not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec).
PEAK = textwrap.dedent("""
    import sys
    from skillindex.cli import main
    code = 0
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stdout.flush()
        peak = next(line.split()[1] for line in open('/proc/self/status')
                    if line.startswith('VmHWM'))
        print(f"VmHWM {peak}", file=sys.stderr)
""")


def peak_mb(arguments: list[str]) -> tuple[float, float]:
    """Peak memory (MB) and wall time of one command as a whole process."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", PEAK, *arguments], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - started
    lines = [line for line in result.stderr.splitlines() if line.startswith("VmHWM ")]
    if not lines:
        raise RuntimeError(f"no peak memory from {arguments}: {result.stderr[-500:]}")
    return int(lines[-1].split()[1]) / 1024, elapsed


def memory(config: Path, base: Path, cwd: Path, name: str) -> dict[str, dict[str, float]]:
    """Peak memory and wall time of every command at this tree's size."""
    db = base / "memory.sqlite"
    common = ["--config", str(config), "--db", str(db), "--cwd", str(cwd)]
    commands: list[tuple[str, list[str]]] = [
        ("reindex, cold, a worker per core", ["reindex", "-q"]),
        ("reindex, unchanged", ["reindex", "-q"]),
        ("list", ["list"]), ("list --json", ["--json", "list"]),
        ("candidates --json", ["--json", "candidates"]),
        ("rejections --json", ["--json", "rejections"]),
        ("roots", ["roots"]), ("explain", ["explain", name]),
        ("catalog", ["catalog"]), ("catalog --query", ["catalog", "--query", "report export"]),
        ("search", ["search", "report export review"]),
        ("read", ["read", f"skill://{name}"]),
        ("read a file", ["read", f"skill://{name}/references/guide.md"]),
        ("command", ["command", name, "now"]),
        ("risks", ["risks"]), ("audit", ["audit"]), ("audit verify", ["audit", "verify"]),
        ("lock", ["lock", "--output", str(base / "skills-lock.json")]),
        ("verify", ["verify"]),
        ("verify --lock", ["verify", "--lock", str(base / "skills-lock.json")]),
        ("context", ["context"]),
        ("trust", ["trust", name]), ("db current", ["db", "current"]),
    ]
    results: dict[str, dict[str, float]] = {}
    for label, arguments in commands:
        print(f"  memory: {label} ...", file=sys.stderr, flush=True)
        peak, elapsed = peak_mb([*common, *arguments])
        results[label] = {"peak_mb": peak, "wall_s": elapsed}
    cold = base / "memory-one-job.sqlite"
    peak, elapsed = peak_mb(["--config", str(config), "--db", str(cold), "--cwd", str(cwd),
                             "reindex", "-q", "--jobs", "1"])
    results["reindex, cold, one process"] = {"peak_mb": peak, "wall_s": elapsed}
    return results


def memory_table(count: int, results: dict[str, dict[str, float]]) -> str:
    lines = [f"| command at {count:,} skills | peak RSS | wall time |", "|---|---:|---:|"]
    lines += [f"| `{label}` | {r['peak_mb']:.0f} MB | {r['wall_s']:.2f} s |"
              for label, r in results.items()]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] != "memory":
        sys.exit("usage: freshbench.py memory N")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from scripts.benchkit import generate, settings_file

    count = int(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="skillindex-memory-") as work:
        base = Path(work)
        print(f"generating {count} skills ...", file=sys.stderr, flush=True)
        roots = generate(base / "tree", count)
        config = settings_file(base, roots)
        print(memory_table(count, memory(config, base, base, "skill-000002")))


if __name__ == "__main__":
    main()
