"""What the benchmark scripts share: the generated skill trees and their settings file, timing,
and a process's CPU time. It imports no other script, so every script may import it."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOTS = 4
COLLISION_EVERY = 20  # every 20th name exists in two roots


def skill_text(number: int, name: str, version: int = 0) -> str:
    description = (f"Skill {number} handles task family {number % 97}, use it when the user asks "
                   f"for report {number}, export {number % 13} or review {version}. ")
    body = "\n".join(f"Step {line}: do the thing carefully for case {number}-{line}."
                     for line in range(18 + number % 12))
    return (f"---\nname: {name}\ndescription: {description * 2}\nlicense: MIT\n"
            f"metadata:\n  author: bench\n  version: '{version}'\n---\n# {name}\n\n{body}\n")


def generate(base: Path, count: int) -> list[Path]:
    roots = [base / f"root-{n}" for n in range(ROOTS)]
    for number in range(count):
        root = roots[number % ROOTS]
        name = f"skill-{number:06d}"
        if number % COLLISION_EVERY == 1:
            name = f"skill-{number - 1:06d}"  # same name as its neighbour in the previous root
        directory = root / f"{name}"
        (directory / "references").mkdir(parents=True)
        (directory / "scripts").mkdir()
        (directory / "SKILL.md").write_text(skill_text(number, name))
        (directory / "references" / "guide.md").write_text(f"# Guide {number}\n" + "text " * 120)
        (directory / "references" / "api.md").write_text(f"# API {number}\n" + "call " * 80)
        (directory / "scripts" / "run.py").write_text(f"print({number})\n" * 10)
    return roots


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def median_time(function: Callable[[], object], repeat: int,
                before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def settings_file(base: Path, roots: list[Path]) -> Path:
    path = base / "config.toml"
    lines = ["[skills]", "presets = false", ""]
    for number, root in enumerate(roots):
        lines += ["[[roots]]", f'path = "{root}"', f"precedence = {100 - number}", ""]
    path.write_text("\n".join(lines))
    return path


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (Linux /proc): unlike wall time, it barely
    moves with what else the machine is running."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median_wall_and_cpu(function: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of `function` in this process, after one warm-up
    call; on a loaded machine the CPU figure is the one that compares across runs."""
    function()
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def run_process(argv: Sequence[str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user and system, its children's included) of one process
    run to its end; its output is discarded, a failure raises."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
