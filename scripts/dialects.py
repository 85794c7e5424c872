"""Counts how a corpus of real skills uses other hosts' fields, placeholders and load-time
commands, as skillindex reads them (lenient frontmatter, index/dialect.py, the risk rules).

    python scripts/dialects.py [--corpus DIR] [--json]

The corpus is a folder of skill folders (`<skill>/SKILL.md`); it defaults to
../shared/corpus/registry-sample beside the project.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillindex.index import dialect, frontmatter, risk

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    report = census(options.corpus)
    if options.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['skills']} skills in {report['corpus']}, "
          f"{report['frontmatter parsed']} with a usable frontmatter")
    for title in ("fields", "facts"):
        counts = report[title]
        assert isinstance(counts, dict)
        for key, value in counts.items():
            print(f"  {key:42} {value:6}")


if __name__ == "__main__":
    main()
