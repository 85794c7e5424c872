"""What the benchmark scripts share: the generated skill trees and their settings file, timing,
and a process's CPU time. It imports no other script, so every script may import it."""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOTS = 4
COLLISION_EVERY = 20  # every 20th name exists in two roots
LINK_EVERY = 50  # in a users' tree, every 50th skill folder is a symlink to one kept elsewhere
NESTED_ROOT = ROOTS - 1  # in a users' tree, the last root holds its skills in groups
GROUPS = 10
SHAPES = ("users", "plain")


def skill_text(number: int, name: str, version: int = 0) -> str:
    description = (f"Skill {number} handles task family {number % 97}, use it when the user asks "
                   f"for report {number}, export {number % 13} or review {version}. ")
    body = "\n".join(f"Step {line}: do the thing carefully for case {number}-{line}."
                     for line in range(18 + number % 12))
    return (f"---\nname: {name}\ndescription: {description * 2}\nlicense: MIT\n"
            f"metadata:\n  author: bench\n  version: '{version}'\n---\n# {name}\n\n{body}\n")


class Tree(list[Path]):
    """The roots of a generated tree, with where each skill's SKILL.md is (by its number) and
    the depth each root is walked to."""

    def __init__(self, roots: list[Path]) -> None:
        super().__init__(roots)
        self.skill_md: dict[int, Path] = {}
        self.depth: dict[Path, int] = {}


def generate(base: Path, count: int, shape: str = "users") -> Tree:
    """`count` skills over four roots, skill n under root n % 4 as `skill-n`.

    `plain`: every 20th name (n % 20 == 1) is its neighbour's, which sits at the same place in
    the previous root's sorted listing. `users`, what people have: every 20th skill of a root
    after the first takes the name of a skill of the previous root drawn at random (the copy
    sits anywhere in its listing), every 50th skill folder is a symlink to a folder kept
    outside the roots, and the last root holds its skills in ten groups (walked two levels
    deep).
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown tree shape {shape!r}")
    tree = Tree([base / f"root-{n}" for n in range(ROOTS)])
    users = shape == "users"
    draw = random.Random(count)
    names: list[list[str]] = [[] for _ in tree]
    for number in range(count):
        at = number % ROOTS
        root = tree[at]
        name = f"skill-{number:06d}"
        if not users and number % COLLISION_EVERY == 1:
            name = f"skill-{number - 1:06d}"  # same name as its neighbour in the previous root
        elif users and at and (number // ROOTS) % COLLISION_EVERY == COLLISION_EVERY // 2:
            name = draw.choice(names[at - 1])
            if name in names[at]:
                name = f"skill-{number:06d}"
        names[at].append(name)
        parent = root / f"group-{number % GROUPS}" if users and at == NESTED_ROOT else root
        directory = parent / name
        if users and number % LINK_EVERY == LINK_EVERY - 1:
            # The kept folder has the skill's name: a host that refuses links is given it.
            kept = base / "kept" / str(at) / name
            _write_skill(kept, number, name)
            parent.mkdir(parents=True, exist_ok=True)
            directory.symlink_to(kept, target_is_directory=True)
        else:
            _write_skill(directory, number, name)
        tree.skill_md[number] = directory / "SKILL.md"
    for root in tree:
        tree.depth[root] = 2 if users and root == tree[NESTED_ROOT] else 1
    return tree


def _write_skill(directory: Path, number: int, name: str) -> None:
    (directory / "references").mkdir(parents=True)
    (directory / "scripts").mkdir()
    (directory / "SKILL.md").write_text(skill_text(number, name))
    (directory / "references" / "guide.md").write_text(f"# Guide {number}\n" + "text " * 120)
    (directory / "references" / "api.md").write_text(f"# API {number}\n" + "call " * 80)
    (directory / "scripts" / "run.py").write_text(f"print({number})\n" * 10)


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
    depth = roots.depth if isinstance(roots, Tree) else {}
    for number, root in enumerate(roots):
        lines += ["[[roots]]", f'path = "{root}"', f"precedence = {100 - number}"]
        if depth.get(root, 1) > 1:
            lines.append(f"max_depth = {depth[root]}")
        lines.append("")
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
