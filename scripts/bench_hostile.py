"""Benchmark: how long judging one hostile 64 KiB frontmatter takes, against a real-sized one.

Each shape fills the frontmatter limit with what makes a parser or a pattern work hardest (long
runs of blanks in a repaired line, thousands of keys or values to re-read, nesting to libyaml's
limit, control characters), and is judged as a reindex judges it (`frontmatter.parse`, then
`policy.judge`, lenient and strict). Prints the best CPU time of several runs per shape, and its
ratio to the typical frontmatter measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from skillindex.index import frontmatter, policy
from skillindex.model import RootSpec, Scope, Validation

LIMIT = frontmatter.MAX_FRONTMATTER_CHARS - 64  # room for the lines around the hostile part


def shapes() -> dict[str, str]:
    return {
        "typical (baseline)": "name: pdf\ndescription: Read, fill and merge PDF forms: use when "
                              "the user asks about PDFs.\nmetadata:\n  author: someone\n",
        "blanks inside a repaired line": "a: x" + " " * LIMIT + "y\nb: [\n",
        "thousands of lines to repair": "".join(f"k{n}: a: b\n" for n in range(LIMIT // 12)),
        "thousands of blocks to repair": "".join(f"k{n}:\n  - x\n" for n in range(LIMIT // 14))
                                         + "b: [\n",
        "one list of 32,000 values": "m: [" + ",".join(["a"] * (LIMIT // 2)) + "]\n",
        "flow nesting to the limit": "m: " + "[" * 990 + "]" * 990 + "\n",
        "unclosed flow nesting": "m: " + "[" * LIMIT + "\n",
        "control characters": "description: \"" + "\\e" * (LIMIT // 2) + "\"\n",
        "one 64 KiB key": "a" + "." * LIMIT + "\n",
    }


def best_of(function: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        # CPU time of this process: on a shared machine, neighbours do not inflate it.
        started = time.process_time()
        function()
        times.append(time.process_time() - started)
    return min(times)


def judge_all(data: bytes) -> None:
    for mode in (Validation.LENIENT, Validation.STRICT):
        spec = RootSpec(Path("/bench"), Scope.USER, "bench", 1, validation=mode)
        parsed = frontmatter.parse(data, lenient=mode is Validation.LENIENT)
        policy.judge(parsed, dir_name="pdf", root=spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per shape (the best counts)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    measured: list[tuple[str, int, float]] = []
    for label, head in shapes().items():
        data = f"---\n{head}---\nbody\n".encode()
        assert len(head) <= frontmatter.MAX_FRONTMATTER_CHARS, label
        measured.append((label, len(head), best_of(partial(judge_all, data), args.repeat)))
    baseline = measured[0][2]
    if args.json:
        print(json.dumps([{"shape": label, "chars": chars, "seconds": seconds,
                           "ratio": seconds / baseline} for label, chars, seconds in measured],
                         indent=2))
        return
    print("| shape (judged lenient and strict) | chars | CPU time | ratio to typical |")
    print("|---|---:|---:|---:|")
    for label, chars, seconds in measured:
        print(f"| {label} | {chars:,} | {seconds * 1000:.2f} ms | {seconds / baseline:.0f}x |")


if __name__ == "__main__":
    main()
