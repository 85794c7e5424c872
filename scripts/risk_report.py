"""Measures the risk rules: precision and recall on the labelled set, what they flag in a corpus
of real skills, and what they add to a cold index of it (both timed in the same run).

    python scripts/risk_report.py [--corpus DIR] [--repeat N]

The corpus defaults to ../shared/corpus/registry-sample beside the project (2,049 SKILL.md
files from a public registry); a missing corpus skips those two parts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillindex.config import Environment, RootConfig, Settings
from skillindex.index import risk
from skillindex.model import Scope, Validation
from tests.riskcases import BENIGN, HOSTILE

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/corpus/registry-sample"


def labelled() -> None:
    print("Labelled set:", len(HOSTILE), "hostile files,", len(BENIGN), "benign look-alikes")
    print(f"{'code':<28}{'tp':>4}{'fp':>4}{'fn':>4}{'precision':>11}{'recall':>8}")
    for code in risk.CODES:
        tp = fp = fn = 0
        for case in (*HOSTILE, *BENIGN):
            found = {r.code for r in risk.judge_file(case.path, case.data, case.mode)}
            wanted = code in case.expected
            tp += wanted and code in found
            fn += wanted and code not in found
            fp += not wanted and code in found
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"{code:<28}{tp:>4}{fp:>4}{fn:>4}{precision:>11.2f}{recall:>8.2f}")


def corpus_counts(corpus: Path) -> None:
    skills = sorted(p for p in corpus.iterdir() if (p / "SKILL.md").is_file())
    per_code: Counter[str] = Counter()
    findings: Counter[str] = Counter()
    files = [(skill / "SKILL.md").read_bytes() for skill in skills]
    started = time.process_time()
    for data in files:
        codes = [r.code for r in risk.judge_file("SKILL.md", data, 0o100644)]
        findings.update(codes)
        per_code.update(set(codes))
    elapsed = time.process_time() - started
    print(f"\nCorpus: {len(skills)} skills ({corpus})")
    print(f"{'code':<28}{'skills':>7}{'findings':>10}")
    for code in risk.CODES:
        print(f"{code:<28}{per_code[code]:>7}{findings[code]:>10}")
    print(f"rules alone: {elapsed * 1000:.0f} ms of CPU for all files "
          f"({elapsed / max(len(skills), 1) * 1e6:.0f} us a file)")


def cold_index_cost(corpus: Path, repeat: int) -> None:
    from skillindex.api import SkillIndex

    settings = Settings(presets=False, roots=(RootConfig(
        path=str(corpus), scope=Scope.USER, provider="corpus", precedence=1,
        validation=Validation.LENIENT),))
    judge = risk.judge_file

    def cold(with_rules: bool) -> float:
        risk_judge = judge if with_rules else (lambda path, data, mode: [])
        risk.judge_file = risk_judge  # type: ignore[assignment]
        with tempfile.TemporaryDirectory() as home:
            env = Environment(home=Path(home), cwd=Path(home), config_home=Path(home),
                              data_home=Path(home))
            with SkillIndex.open(settings, db=os.path.join(home, "i.sqlite"), env=env) as index:
                started = time.perf_counter()
                # One process: worker processes would import the rules afresh, unswapped.
                index.reindex(jobs=1)
                return time.perf_counter() - started

    try:
        cold(True)  # warm the page cache and the imports
        pairs = [(cold(False), cold(True)) for _ in range(repeat)]
    finally:
        risk.judge_file = judge
    without = statistics.median(p[0] for p in pairs)
    with_rules = statistics.median(p[1] for p in pairs)
    print(f"\nCold index of the corpus, median of {repeat} interleaved pairs: "
          f"without the rules {without:.3f} s, with {with_rules:.3f} s: "
          f"{(with_rules / without - 1) * 100:+.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    labelled()
    if not args.corpus.is_dir():
        print(f"\nno corpus at {args.corpus}: skipped")
        return
    corpus_counts(args.corpus)
    cold_index_cost(args.corpus, args.repeat)


if __name__ == "__main__":
    main()
