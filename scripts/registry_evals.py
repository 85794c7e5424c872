"""Trigger evals of 20 real skills of the public registry, each against the other 61,000 or so.

`python -m scripts.registry_evals --registry DIR --db FILE [--work DIR] [--by search|catalog]`
DIR is the extracted registry (`registry-skills.tar.xz`: `<owner--repo--skill>/SKILL.md`); FILE
its index, built on the first run (some minutes) and reused after. Each skill of
scripts/relevance_data/evals/ (ten requests that should choose it and ten near misses, written
by hand) is copied with its eval file to --work and the twenty are run by `skillindex eval`'s
own code in one run, against a temporary copy of FILE: the figures are recall and false-trigger
rate per skill and over all, the whole run's time, and the time per query.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from skillindex import evaluate
from skillindex.api import SkillIndex
from skillindex.config import Environment, load_settings

EVALS = Path(__file__).resolve().with_name("relevance_data") / "evals"


def settings_file(work: Path, registry: Path) -> Path:
    config = work / "registry.toml"
    config.write_text("[skills]\npresets = false\nvalidation = \"lenient\"\n\n[[roots]]\n"
                      f"path = {json.dumps(str(registry))}\nprecedence = 100\n"
                      "require_description = false\n")
    return config


def skills_under_test(work: Path, registry: Path) -> list[Path]:
    folders = []
    for evals in sorted(EVALS.glob("*.json")):
        folder = work / "skills" / evals.stem
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(registry / evals.stem, folder)
        shutil.copyfile(evals, folder / "eval_queries.json")
        folders.append(folder)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--by", choices=("search", "catalog"), default="search")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="registry-evals-"))
    work.mkdir(parents=True, exist_ok=True)
    env = Environment.from_os(cwd=work)
    settings = load_settings(settings_file(work, args.registry.resolve()), env)
    if not args.db.exists():
        started = time.perf_counter()
        with SkillIndex.open(settings, db=str(args.db), env=env) as index:
            index.reindex()
        print(f"indexed the registry in {time.perf_counter() - started:.0f} s")
    folders = skills_under_test(work, args.registry)
    marks: list[float] = []
    report = evaluate.run(settings, env, evaluate.Against(url=f"sqlite:///{args.db.resolve()}"),
                          folders, ranking=args.by,
                          ranked=lambda done, total: marks.append(time.perf_counter()))
    print(f"{'skill':28} recall  false  confusables (misses)")
    hits = should = false = should_not = 0
    for skill in report.skills:
        hits += sum(r.triggered for r in skill.positives)
        should += len(skill.positives)
        false += sum(r.triggered for r in skill.negatives)
        should_not += len(skill.negatives)
        confusables = ", ".join(f"{n} ({c})" for n, c in skill.confusables()[:3])
        print(f"{skill.name[:28]:28} {skill.recall or 0:6.2f} {skill.false_rate or 0:6.2f}  "
              f"{skill.problem or confusables}")
    per_query = (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else 0.0
    print(f"\n{len(report.skills)} skills, {report.queries} queries, by {report.ranking} "
          f"(k={report.k}), against {report.neighbours:,} other skills")
    print(f"recall {hits}/{should} = {hits / max(should, 1):.3f}; false triggers "
          f"{false}/{should_not} = {false / max(should_not, 1):.3f}")
    print(f"whole run {report.seconds:.1f} s (copy, index the 20, rank), "
          f"{per_query * 1000:.0f} ms a query once ranking")


if __name__ == "__main__":
    main()
