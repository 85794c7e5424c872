"""Counts how a corpus of real skills uses other hosts' fields, placeholders and load-time
commands, as skillindex reads them (lenient frontmatter, index/dialect.py, the risk rules).

    python scripts/dialects.py [--corpus DIR] [--catalog] [--json]

The corpus is a folder of skill folders (`<skill>/SKILL.md`); it defaults to
../shared/corpus/registry-sample beside the project.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillindex.config import Environment, RootConfig, Settings
from skillindex.index import dialect, frontmatter, risk
from skillindex.model import Scope, Validation

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/corpus/registry-sample"
FIELDS = ("when_to_use", "paths", "globs", "alwaysApply", "user-invocable", "argument-hint",
          "arguments", "disable-model-invocation")


def census(corpus: Path) -> dict[str, object]:
    fields: Counter[str] = Counter()
    facts: Counter[str] = Counter()
    skills = parsed = 0
    for entry in sorted(os.listdir(corpus)):
        try:
            data = (corpus / entry / "SKILL.md").read_bytes()
        except OSError:
            continue
        skills += 1
        front = frontmatter.parse(data, lenient=True)
        if front.fields is None:
            continue
        parsed += 1
        fields.update(key for key in FIELDS if key in front.fields)
        sidecar = corpus / entry / dialect.CODEX_SIDECAR
        host, findings = dialect.host_fields(
            front.fields, sidecar.read_bytes() if sidecar.is_file() else None)
        facts["any host field used"] += host != dialect.NONE
        facts["field of a wrong type"] += any(f.code == "field-type" for f in findings)
        facts["when_to_use joins the description"] += host.when_to_use is not None
        facts["conditional (paths or globs)"] += host.conditional
        facts["pinned (alwaysApply)"] += host.always_apply
        facts["not a command (user-invocable: false)"] += not host.user_invocable
        facts["manual-only (Codex policy)"] += not host.implicit
        facts["has agents/openai.yaml"] += sidecar.is_file()
        _, taken = dialect.substitute(front.body, "x", ["x"], names=host.arguments,
                                      skill_dir="/d")
        facts["body takes the arguments"] += taken
        facts["body names the skill directory"] += ("${CLAUDE_SKILL_DIR}" in front.body
                                                    or "${SKILL_DIR}" in front.body)
        facts["load-time-exec finding"] += any(
            r.code == risk.LOAD_TIME_EXEC for r in risk.judge_file("SKILL.md", data, 0o100644))
    return {"corpus": str(corpus), "skills": skills, "frontmatter parsed": parsed,
            "fields": {key: fields[key] for key in FIELDS}, "facts": dict(facts)}


def catalog_change(corpus: Path) -> dict[str, int]:
    """A cold index of the corpus as one lenient root, and its whole catalog (no budget)
    without and with dialects, and with one file in play: what the fields change."""
    from skillindex.api import SkillIndex

    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        env = Environment(home=home, cwd=home, config_home=home / ".config",
                          data_home=home / ".data")
        root = RootConfig(path=str(corpus), scope=Scope.USER, provider="corpus",
                          precedence=10, validation=Validation.LENIENT)
        seed = Settings(presets=False, roots=(root,))
        db = str(home / "index.sqlite")
        with SkillIndex.open(seed, db=db, env=env) as index:
            index.reindex()
            before = index.catalog(max_chars=1 << 30, format="json")
            gated = index.catalog(max_chars=1 << 30, format="json", files=["README.md"])
        with SkillIndex.open(replace(seed, dialects=True), db=db, env=env) as index:
            after = index.catalog(max_chars=1 << 30, format="json")
    old = {e.name: e.description for e in before.entries}
    new = {e.name: e.description for e in after.entries}
    return {"catalog entries without dialects": len(old),
            "catalog entries with dialects": len(new),
            "descriptions that change": sum(1 for n in new if n in old and new[n] != old[n]),
            "descriptions cut by catalog_entry_chars": sum(e.truncated for e in after.entries),
            "entries listed as conditional": sum(bool(e.conditional) for e in before.entries),
            "left out for --files README.md": len(before.entries) - len(gated.entries),
            "catalog characters without dialects": before.chars,
            "catalog characters with dialects": after.chars}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--catalog", action="store_true",
                        help="also index the corpus and compare its catalogs")
    options = parser.parse_args()
    report = census(options.corpus)
    if options.catalog:
        report["catalog"] = catalog_change(options.corpus)
    if options.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['skills']} skills in {report['corpus']}, "
          f"{report['frontmatter parsed']} with a usable frontmatter")
    for title in ("fields", "facts", "catalog"):
        counts = report.get(title, {})
        assert isinstance(counts, dict)
        for key, value in counts.items():
            print(f"  {key:42} {value:6}")


if __name__ == "__main__":
    main()
