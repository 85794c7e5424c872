"""Renders located findings for code scanning: SARIF 2.1.0 logs and GitHub workflow annotations."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from skillindex import text as escape
from skillindex.index.codes import explained
from skillindex.model import Candidate, FileFinding, Gravity, RiskFinding, Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
# The folder relative URIs are relative to; a consumer maps it to its checkout.
SRCROOT = "%SRCROOT%"
TOOL = "skillindex"
FINGERPRINT = "skillindexFinding/v1"

# An author's advice is a note; what a scanner flags, a warning; what rejects, an error.
LEVELS = {Gravity.ERROR: "error", Gravity.RISK: "warning", Gravity.WARNING: "note"}
# GitHub ranks security alerts by this score (over 9 critical, 7 high, 4 medium, else low).
_SECURITY_SEVERITY = {"secret": "9.0", "remote-exec": "8.0", "prompt-injection": "7.5",
                      "hidden-unicode": "6.5", "binary-masquerade": "5.0",
                      "executable-outside-scripts": "4.0"}
_PROBLEM_SEVERITY = {Gravity.ERROR: "error", Gravity.RISK: "warning",
                     Gravity.WARNING: "recommendation"}
_NUMBERS = re.compile(r"\d+")


def log(findings: Iterable[FileFinding], *, base: Path, version: str,
        suppressed: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run: one rule per finding code, with its help, and one result
    per finding, located relative to `base` (`%SRCROOT%`) when the file lies inside it.
    A result whose fingerprint `suppressed` holds is marked suppressed, with that reason."""
    found = list(findings)
    prints = fingerprints(found, base=base)
    accepted = suppressed or {}
    codes = sorted({f.code for f in found})
    index = {code: number for number, code in enumerate(codes)}
    heaviest: dict[str, Gravity] = {}
    for finding in found:
        known = heaviest.get(finding.code)
        if known is None or finding.gravity.weight > known.weight:
            heaviest[finding.code] = finding.gravity
    results = []
    for finding, fingerprint in zip(found, prints, strict=True):
        result: dict[str, Any] = {
            "ruleId": finding.code, "ruleIndex": index[finding.code],
            "level": LEVELS[finding.gravity], "message": {"text": finding.message},
            "locations": [_location(finding, base)],
            "partialFingerprints": {FINGERPRINT: fingerprint},
        }
        if fingerprint in accepted:
            # `external`: the decision lives in a baseline file, not in the skill's source.
            result["suppressions"] = [{"kind": "external", "status": "accepted",
                                       "justification": accepted[fingerprint]}]
        results.append(result)
    return {
        "$schema": SCHEMA, "version": VERSION,
        "runs": [{
            "tool": {"driver": {"name": TOOL, "version": version, "semanticVersion": version,
                                "rules": [_rule(code, heaviest[code]) for code in codes]}},
            "originalUriBaseIds": {SRCROOT: {"uri": _folder_uri(base)}},
            "results": results,
        }],
    }


def fingerprints(findings: Sequence[FileFinding], *, base: Path) -> list[str]:
    """Each finding's stable fingerprint, in order: what SARIF consumers and baselines match on."""
    seen: Counter[tuple[str, str, str]] = Counter()
    prints = []
    for finding in findings:
        uri = _location(finding, base)["physicalLocation"]["artifactLocation"]["uri"]
        # Stable across runs: the line is left out (it moves when lines are added above) and
        # so are numbers in the message (columns, lengths); equal ones count in file order.
        key = (finding.code, uri, _NUMBERS.sub("#", finding.message))
        seen[key] += 1
        digest = hashlib.sha256("\0".join(key).encode("utf-8", "surrogateescape")).hexdigest()
        prints.append(f"{digest[:32]}:{seen[key]}")
    return prints


def _rule(code: str, gravity: Gravity) -> dict[str, Any]:
    explanation = explained(code)
    risky = gravity is Gravity.RISK
    properties: dict[str, Any] = {
        "tags": ["security", "agent-skills"] if risky else ["correctness", "agent-skills"],
        "precision": "medium" if risky else "high",
        "problem.severity": _PROBLEM_SEVERITY[gravity]}
    if risky:
        properties["security-severity"] = _SECURITY_SEVERITY.get(code, "5.0")
    return {
        "id": code, "name": "".join(part.capitalize() for part in code.split("-")),
        "shortDescription": {"text": explanation.title},
        "fullDescription": {"text": explanation.help},
        "help": {"text": explanation.help, "markdown": explanation.help},
        "defaultConfiguration": {"level": LEVELS[gravity]},
        "properties": properties,
    }


def _location(finding: FileFinding, base: Path) -> dict[str, Any]:
    try:
        relative = finding.file.relative_to(base).as_posix()
    except ValueError:
        artifact = {"uri": finding.file.as_uri()}
    else:
        artifact = {"uri": _uri_path(relative), "uriBaseId": SRCROOT}
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if finding.line:
        physical["region"] = {"startLine": finding.line}
    return {"physicalLocation": physical}


def _uri_path(path: str) -> str:
    # A name that was not UTF-8 (a surrogate escape) keeps its bytes, percent-encoded.
    return quote(path.encode("utf-8", "surrogateescape"), safe="/")


def _folder_uri(folder: Path) -> str:
    return folder.as_uri().rstrip("/") + "/"


# -- GitHub workflow annotations ----------------------------------------------------------------

_COMMANDS = {Gravity.ERROR: "error", Gravity.RISK: "warning", Gravity.WARNING: "notice"}


def workflow_commands(findings: Iterable[FileFinding], *, base: Path) -> Iterator[str]:
    """One `::error file=…,line=…,title=…::message` line per finding (risks are warnings,
    advice notices), escaped as the runner requires, with nothing a terminal would obey."""
    for finding in findings:
        try:
            file = finding.file.relative_to(base).as_posix()
        except ValueError:
            file = str(finding.file)
        properties = [f"file={_property(file)}"]
        if finding.line:
            properties.append(f"line={finding.line}")
        properties.append(f"title={_property(finding.code)}")
        yield f"::{_COMMANDS[finding.gravity]} {','.join(properties)}::{_data(finding.message)}"


def _data(text: str) -> str:
    # Shown escaped first (as on a terminal), so no CR or LF is left to encode as %0D, %0A.
    return escape.terminal(text).replace("%", "%25")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


# -- What an index holds, as located findings ---------------------------------------------------

def of_risks(found: Sequence[RiskFinding]) -> list[FileFinding]:
    """`SkillIndex.risks()` located: each in its file, at its line."""
    located = []
    for item in found:
        folder = item.skill_path.parent
        # The stored message names its place first (index/judge.py); the location says it here.
        prefix = f"{item.path}:{item.line}: " if item.line else f"{item.path}: "
        message = item.message.removeprefix(prefix)
        located.append(FileFinding(item.code, Gravity.RISK, message,
                                   folder / item.path if item.path else item.skill_path,
                                   item.line or None, item.name))
    return located


def of_rejections(candidates: Sequence[Candidate], risk_codes: Iterable[str]) -> list[FileFinding]:
    """The findings of rejected candidates, each at its SKILL.md; the risk findings among them
    are left to `of_risks`, which knows their files and lines."""
    risky = frozenset(risk_codes)
    return [FileFinding(f.code, Gravity.ERROR if f.severity is Severity.ERROR else Gravity.WARNING,
                        f.message, candidate.path, None, candidate.name)
            for candidate in candidates for f in candidate.findings if f.code not in risky]
