"""Freshness and output figures at registry size: the public registry's skills (one folder per
skill) as one root of precedence 100, a small root of precedence 200 whose names also appear in
the registry, and for a size above the registry's, generated copies of registry skills in a
third root of precedence 100 (registered after the registry, so a copy that keeps its name
loses the tie).

    python scripts/registrybench.py --registry DIR --work DIR [--size N] [--repeat R]

The index is built once into `<work>/base-<N>.sqlite` (a cold index of the registry takes many
minutes on a small machine) and copied for every experiment. An index built by an older
version whose change keys or rules differ is read again whole by the watcher's first pass.
Figures, medians of R:

- `index.reindex(paths=[one skill])` in one process, for an added, an edited (its name kept:
  a new description) and a removed skill, beside the floor: the same targeted reindex of a
  skill that did not change. Then the first `catalog()` after it (no cached text).
- `skillindex watch`: the time from the write to the change being in the catalog (the pass's
  report, then a catalog read in this process), for an added, an edited and a removed skill.
- `--json list` and `--json candidates` as whole processes: wall and CPU time and peak
  memory, beside the floor of `--json roots` (a process that starts, opens the index and
  prints little).

Used by `scripts/bench.py --registry-scale DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOCAL_NAMES = 4  # names of the small root that the registry also holds
NAME = re.compile(r"^name:[ \t]*(.*?)[ \t]*$", re.MULTILINE)


def layout(registry: Path, work: Path, size: int) -> Path:
    """The roots and settings file for `size` skills; returns the settings file."""
    entries = sorted(entry for entry in os.listdir(registry)
                     if (registry / entry / "SKILL.md").is_file())
    local = work / "local"
    if not local.is_dir():
        for entry in entries[:: len(entries) // LOCAL_NAMES][:LOCAL_NAMES]:
            name = _name_of(registry / entry / "SKILL.md") or entry
            _write(local / name, name, f"The local copy of {name}, which shadows the registry's.")
    roots = [(local, 200), (registry, 100)]
    extra = size - len(entries) - LOCAL_NAMES
    if extra > 0:
        copies = work / f"copies-{size}"
        if not copies.is_dir():
            partial = copies.with_name(copies.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            for number in range(extra):
                source = registry / entries[number * len(entries) // extra] / "SKILL.md"
                text = source.read_text(errors="replace")
                name = _name_of(source) or f"copy-{number}"
                if number % 5:  # one copy in five keeps its name: a tie the registry wins
                    name = f"{name}-copy-{number}"
                    text = NAME.sub(f"name: {name}", text, count=1)
                directory = partial / f"copy-{number:06d}"
                directory.mkdir(parents=True)
                (directory / "SKILL.md").write_text(text)
            partial.rename(copies)
        roots.append((copies, 100))
    config = work / f"config-{size}.toml"
    lines = ["[skills]", "presets = false", ""]
    for path, precedence in roots:
        lines += ["[[roots]]", f'path = "{path}"', f"precedence = {precedence}", ""]
    config.write_text("\n".join(lines))
    return config


def _name_of(skill_md: Path) -> str | None:
    found = NAME.search(skill_md.read_text(errors="replace")[:4000])
    return found.group(1).strip("'\"") if found else None


def _write(directory: Path, name: str, description: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nThe steps.\n")


def base_index(config: Path, work: Path, size: int, start: Path | None) -> Path:
    """The index of the layout, built once (from `start`, an index of fewer roots, when
    given: only the new root is read) and kept."""
    from scripts.freshbench import cli

    base = work / f"base-{size}.sqlite"
    if base.exists():
        return base
    building = base.with_name(base.name + ".building")
    if start is not None:
        _copy(start, building)
    else:
        building.unlink(missing_ok=True)
    print(f"indexing {size:,} skills into {base} ...", file=sys.stderr, flush=True)
    subprocess.run(cli(config, building, work, "db", "upgrade"), check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(cli(config, building, work, "reindex", "-q"), check=True)
    _checkpoint(building)
    building.rename(base)
    return base


def _checkpoint(db: Path) -> None:
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def _copy(source: Path, target: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)


class Changes:
    """One added, one edited and one removed skill in the small root, and back."""

    def __init__(self, local: Path, registry_name: str) -> None:
        self.local = local
        self.added = local / "fresh-from-bench"
        # An edit keeps the name: the description changes, so the catalog shows it.
        self.edited = next(path for path in sorted(local.iterdir()) if path.is_dir())
        self.removed = local / "removed-by-bench"
        self.registry_name = registry_name
        self.original = (self.edited / "SKILL.md").read_text()

    def prepare(self) -> None:
        """The state before each change: the skill to remove exists, the one to add not."""
        _write(self.removed, "removed-by-bench", "Removed by the benchmark.")
        shutil.rmtree(self.added, ignore_errors=True)
        (self.edited / "SKILL.md").write_text(self.original)

    def apply(self, kind: str, number: int) -> tuple[Path, str | None, Callable[[str], bool]]:
        """Make the change; returns the path it touched, the query of the catalog that shows
        it (None: the default catalog, which at this size shows the first names without
        their descriptions) and how that catalog's text shows it."""
        if kind == "add":
            _write(self.added, "fresh-from-bench", "Added by the benchmark.")
            return self.added, None, lambda text: "<name>fresh-from-bench</name>" in text
        if kind == "edit":  # the catalog for a query shows the descriptions it matches
            marker = "benchmark" + "".join(chr(ord("a") + int(d)) for d in f"{number:04d}")
            skill_md = self.edited / "SKILL.md"
            skill_md.write_text(self.original.replace("description: ",
                                                      f"description: {marker} ", 1))
            return self.edited, marker, lambda text: marker in text
        shutil.rmtree(self.removed)
        return self.removed, None, lambda text: "<name>removed-by-bench</name>" not in text


KINDS = ("add", "edit", "remove")


def in_process(config: Path, base: Path, work: Path, repeat: int) -> dict[str, float]:
    """Targeted reindexes of one changed skill and the first catalog after each, beside the
    same reindex of an unchanged skill (the floor)."""
    from skillindex import SkillIndex

    db = work / "experiment.sqlite"
    changes = Changes(work / "local", "")
    times: dict[str, list[float]] = {}
    changes.prepare()
    _copy(base, db)
    with SkillIndex.open(config, db=str(db), cwd=work) as index:
        index.reindex(paths=[changes.local])  # the prepared state, then the warm cache
        index.catalog()
        for number in range(repeat):
            for kind in KINDS:
                changes.prepare()
                index.reindex(paths=[changes.removed, changes.added, changes.edited])
                index.catalog()
                started = time.perf_counter()
                index.reindex(paths=[changes.edited])  # nothing changed: the floor
                times.setdefault("floor_s", []).append(time.perf_counter() - started)
                path, query, shows = changes.apply(kind, number)
                wall, cpu = time.perf_counter(), time.process_time()
                index.reindex(paths=[path])
                times.setdefault(f"reindex_{kind}_s", []).append(time.perf_counter() - wall)
                times.setdefault(f"reindex_{kind}_cpu_s", []).append(time.process_time() - cpu)
                wall, cpu = time.perf_counter(), time.process_time()
                text = index.catalog(query=query).text
                times.setdefault(f"catalog_after_{kind}_s", []).append(
                    time.perf_counter() - wall)
                times.setdefault(f"catalog_after_{kind}_cpu_s", []).append(
                    time.process_time() - cpu)
                if not shows(text):
                    raise RuntimeError(f"the catalog does not show the {kind}")
        changes.prepare()
    return {key: statistics.median(values) for key, values in times.items()}


def watched(config: Path, base: Path, work: Path, repeat: int) -> dict[str, float]:
    """Write to visible in the catalog under `skillindex watch`, per kind of change."""
    from scripts.freshbench import cli, next_pass, settle, stop
    from skillindex import SkillIndex

    db = work / "watched.sqlite"
    changes = Changes(work / "local", "")
    changes.prepare()
    _copy(base, db)
    watcher = subprocess.Popen(cli(config, db, work, "--json", "watch"),
                               stdout=subprocess.PIPE, bufsize=0, stderr=subprocess.DEVNULL)
    times: dict[str, list[float]] = {}
    try:
        next_pass(watcher, 1800)  # the first, full pass
        # Then it sets its watches up (a walk of every folder): changes are made once it has
        # settled.
        settle(watcher, 600)
        _drain(watcher)
        with SkillIndex.open(config, db=str(db), cwd=work) as index:
            for number in range(repeat):
                for kind in KINDS:
                    changes.prepare()
                    next_pass(watcher, 120)
                    time.sleep(1)
                    _drain(watcher)
                    index.catalog()
                    started = time.perf_counter()
                    _path, query, shows = changes.apply(kind, 100 + number)
                    next_pass(watcher, 120)
                    committed = time.perf_counter()
                    text = index.catalog(query=query).text
                    done = time.perf_counter()
                    if not shows(text):
                        raise RuntimeError(f"the watcher's pass did not bring the {kind}")
                    times.setdefault(f"watch_{kind}_pass_s", []).append(committed - started)
                    times.setdefault(f"watch_{kind}_to_catalog_s", []).append(done - started)
                    time.sleep(1)
                    _drain(watcher)
        changes.prepare()
    finally:
        stop(watcher)
    return {key: statistics.median(values) for key, values in times.items()}


def _drain(watcher: subprocess.Popen[bytes]) -> None:
    from scripts.freshbench import next_pass

    assert watcher.stdout is not None
    while select.select([watcher.stdout], [], [], 0)[0]:
        next_pass(watcher, 1)


def outputs(config: Path, base: Path, work: Path, repeat: int) -> dict[str, float]:
    """`--json list` and `--json candidates` as processes (wall time, peak memory), beside
    `--json roots`; the output's digest, to compare across versions byte for byte."""
    import hashlib

    from scripts.freshbench import peak_mb

    db = work / "outputs.sqlite"
    _copy(base, db)
    common = ["--config", str(config), "--db", str(db), "--cwd", str(work)]
    subprocess.run([sys.executable, "-m", "skillindex", *common, "catalog"], check=True,
                   stdout=subprocess.DEVNULL)  # the resolution stored, the caches warm
    results: dict[str, float] = {}
    for label, arguments in (("roots", ["--json", "roots"]), ("list", ["--json", "list"]),
                             ("candidates", ["--json", "candidates"])):
        walls, cpus, peaks = [], [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            peak, wall = peak_mb([*common, *arguments])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            peaks.append(peak)
        results[f"{label}_json_s"] = statistics.median(walls)
        results[f"{label}_json_cpu_s"] = statistics.median(cpus)
        results[f"{label}_json_peak_mb"] = max(peaks)
        output = subprocess.run([sys.executable, "-m", "skillindex", *common, *arguments],
                                check=True, capture_output=True).stdout
        results[f"{label}_json_sha256"] = hashlib.sha256(output).hexdigest()  # type: ignore[assignment]
    return results


def table(size: int, results: dict[str, Any]) -> str:
    floor = results.get("floor_s")
    lines = [f"| figure at {size:,} skills | added | edited | removed |", "|---|---:|---:|---:|"]

    def row(title: str, key: str, ratio: bool = False) -> None:
        cells = []
        for kind in KINDS:
            value = results.get(key.format(kind=kind))
            if value is None:
                cells.append("")
            elif ratio and floor:
                cells.append(f"{value:.3f} s ({value / floor:.1f}x)")
            else:
                cells.append(f"{value:.3f} s")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")

    row("`reindex(paths=[it])` (x floor)", "reindex_{kind}_s", ratio=True)
    row("its CPU time", "reindex_{kind}_cpu_s")
    row("first catalog after it (`query=` the edit's word)", "catalog_after_{kind}_s")
    row("its CPU time", "catalog_after_{kind}_cpu_s")
    row("`watch`: write to pass committed", "watch_{kind}_pass_s")
    row("`watch`: write to visible in `catalog`", "watch_{kind}_to_catalog_s")
    if floor:
        lines.append(f"\nfloor: `reindex(paths=[an unchanged skill])` {floor:.3f} s")
    if "list_json_s" in results:
        lines += ["", f"| command at {size:,} skills | wall | x `--json roots` | CPU "
                  "| x `--json roots` | peak RSS |", "|---|---:|---:|---:|---:|---:|"]
        below, below_cpu = results["roots_json_s"], results["roots_json_cpu_s"]
        for label in ("roots", "list", "candidates"):
            wall, cpu = results[f"{label}_json_s"], results[f"{label}_json_cpu_s"]
            lines.append(f"| `--json {label}` | {wall:.2f} s | {wall / below:.1f}x | "
                         f"{cpu:.2f} s | {cpu / below_cpu:.1f}x | "
                         f"{results[f'{label}_json_peak_mb']:.0f} MB |")
    return "\n".join(lines)


def default_sizes(registry: Path) -> list[int]:
    """The registry's own size (with the small root) and 100,000."""
    count = sum(1 for entry in os.listdir(registry) if (registry / entry / "SKILL.md").is_file())
    return [count + LOCAL_NAMES, max(100_000, count + LOCAL_NAMES + 1)]


def run(registry: Path, work: Path, size: int, repeat: int, *,
        parts: tuple[str, ...] = ("reindex", "watch", "outputs"),
        seed: Path | None = None) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    count = sum(1 for entry in os.listdir(registry) if (registry / entry / "SKILL.md").is_file())
    smaller = work / f"base-{count + LOCAL_NAMES}.sqlite"
    config = layout(registry, work, size)
    start = smaller if size > count + LOCAL_NAMES and smaller.exists() else seed
    base = base_index(config, work, size, start)
    results: dict[str, Any] = {"skills": size}
    if "reindex" in parts:
        results.update(in_process(config, base, work, repeat))
    if "watch" in parts:
        results.update(watched(config, base, work, repeat))
    if "outputs" in parts:
        results.update(outputs(config, base, work, repeat))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, required=True,
                        help="the registry extracted: one folder per skill")
    parser.add_argument("--work", type=Path, required=True,
                        help="where the small roots, copies and kept indexes live")
    parser.add_argument("--size", type=int, action="append",
                        help="skills in all (repeatable; default: the registry's and 100,000)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("reindex", "watch", "outputs"), action="append")
    parser.add_argument("--seed", type=Path,
                        help="an index (SQLite file) of the registry root to start from: only "
                        "what it lacks is read")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sizes = args.size or default_sizes(args.registry)
    parts = tuple(args.only or ("reindex", "watch", "outputs"))
    for size in sizes:
        results = run(args.registry, args.work, size, args.repeat, parts=parts, seed=args.seed)
        print(json.dumps(results) if args.json else table(size, results), flush=True)


if __name__ == "__main__":
    main()
