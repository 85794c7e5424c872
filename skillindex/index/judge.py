"""Judges one scanned skill into the rows a reindex stages (no store: runs in worker processes)."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import replace
from typing import Any

from skillindex.index import frontmatter, policy, risk, searchtext, signing
from skillindex.index.barrier import internal_error
from skillindex.index.scanner import ENTRY, SkillScan
from skillindex.index.skilldir import unsettled
from skillindex.model import Finding, RootSpec, Severity, SigningPolicy, Status

Row = dict[str, Any]
ResourceRow = tuple[Any, ...]  # the columns of model.RESOURCE_ROW, in its order


def verdict_of(scan: SkillScan,
               spec: RootSpec) -> tuple[policy.Verdict, frontmatter.Frontmatter | None]:
    """The policy's verdict on a scanned skill, and its parsed SKILL.md (None when it could
    not be read)."""
    if scan.entry_problem is not None:
        return policy.Verdict(f"{spec.name_prefix}{scan.dir_name}", None, True,
                              Status.REJECTED, (scan.entry_problem,)), None
    parsed = frontmatter.parse(scan.entry_data or b"", lenient=spec.validation == "lenient")
    return policy.judge(parsed, dir_name=scan.dir_name, root=spec,
                        sidecar=scan.sidecar_data), parsed


def risks_of(scan: SkillScan) -> list[risk.Risk]:
    """The risk findings of every file of a scanned skill, as its read recorded them."""
    return [found for r in scan.resources for found in risk.from_record(r.rel_path, r.risks)]


def judge(scan: SkillScan, spec: RootSpec) -> tuple[Row, list[Row], list[ResourceRow]]:
    """The candidate row, its findings and its manifest, ready to be staged.

    Whatever goes wrong on the way (parsing, the rules, the rows) is a finding of this skill,
    which is rejected with it: one skill never stops a reindex."""
    try:
        verdict, parsed = verdict_of(scan, spec)
        if spec.signing is None:
            return _rows(scan, verdict, parsed)
        return _signed(scan, spec.signing, verdict, parsed)
    except Exception as exc:  # the barrier: anything no rule foresaw
        return failed(scan, spec, internal_error(exc, "judging the skill"))


def _signed(scan: SkillScan, rules: SigningPolicy, verdict: policy.Verdict,
            parsed: frontmatter.Frontmatter | None) -> tuple[Row, list[Row], list[ResourceRow]]:
    """The rows of a skill whose root judges signatures: the signature stored with it, and
    the finding the root's policy makes of it (an error rejects: the skill is quarantined)."""
    signature = None
    if any(r.rel_path == signing.SIGNATURE_FILE for r in scan.resources):
        signature = signing.examine(scan.directory, {r.rel_path: r.sha256
                                                     for r in scan.resources}, rules)
    finding = signing.judged(signature, rules)
    if finding is not None and finding.severity is Severity.ERROR:
        verdict = replace(verdict, status=Status.REJECTED,
                          findings=(*verdict.findings, finding))
    row, findings, resources = _rows(scan, verdict, parsed)
    if finding is not None and finding.severity is Severity.WARNING:
        findings.append({"code": finding.code, "severity": finding.severity.value,
                         "message": storable(finding.message), "path": finding.path,
                         "line": None})
    row["signature"] = None if signature is None else storable(signature.to_json())
    return row, findings, resources


def failed(scan: SkillScan, spec: RootSpec,
           finding: Finding) -> tuple[Row, list[Row], list[ResourceRow]]:
    """The rows of a skill whose work failed: rejected with `finding`, and keyed so that the
    next reindex does the work again."""
    verdict = policy.Verdict(f"{spec.name_prefix}{scan.dir_name}", None, True,
                             Status.REJECTED, (finding,))
    try:
        row, findings, resources = _rows(scan, verdict, None)
    except Exception:  # the scan itself cannot be written: the skill alone, no manifest
        row, findings, resources = _rows(
            SkillScan(scan.rel_dir, scan.directory, scan.real_dir, scan.known), verdict, None)
    row["tree_key"] = unsettled(scan.tree_key)
    return row, findings, resources


def _rows(scan: SkillScan, verdict: policy.Verdict, parsed: frontmatter.Frontmatter | None,
          ) -> tuple[Row, list[Row], list[ResourceRow]]:
    fields = None if parsed is None else parsed.fields
    body = "" if parsed is None else parsed.body
    entry = scan.entry_stat
    row: Row = {
        "rel_dir": scan.rel_dir,
        "dir_name": scan.dir_name,
        "dir_path": scan.directory,
        "skill_path": os.path.join(scan.directory, ENTRY),
        "real_path": scan.real_dir,
        "name": storable(verdict.name),
        "description": storable(verdict.description),
        "status": verdict.status.value,
        "enabled": verdict.enabled,
        "frontmatter": None if fields is None else _to_json(fields),
        "tree_key": scan.tree_key,
        "size": entry.size if entry else None,
        "mtime_ns": entry.mtime_ns if entry else None,
        "inode": entry.inode if entry else None,
        "device": entry.device if entry else None,
        "ctime_ns": entry.ctime_ns if entry else None,
        "xxh3": scan.entry_xxh3,
        "sha256": scan.entry_sha256,
        "search_text": storable(searchtext.search_text(fields, body)),
        "disable_model_invocation": searchtext.model_invocation_disabled(fields),
        "host_fields": storable(verdict.host.to_json()),
    }
    findings: list[Row] = [
        {"code": f.code, "severity": f.severity.value, "message": storable(f.message),
         "path": None, "line": None} for f in (*verdict.findings, *scan.walk_findings)]
    findings += [{"code": found.code, "severity": Severity.WARNING.value,
                  "message": storable(f"{found.path}:{found.line}: {found.message}"
                                      if found.line else f"{found.path}: {found.message}"),
                  "path": storable(found.path), "line": found.line}
                 for found in risks_of(scan)]
    resources = [(r.rel_path, r.kind.value, r.stat.size, r.stat.mtime_ns, r.stat.inode,
                  r.stat.device, r.xxh3, r.sha256, r.risks, r.stat.ctime_ns, r.mode)
                 for r in scan.resources]
    return row, findings, resources


_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def _escape_unstorable(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, carried by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def storable(text: str | None) -> str | None:
    """Text a column of either backend can hold: PostgreSQL refuses NUL and neither takes a lone
    surrogate, so they are written as escapes (`\\x00`, `\\ud800`, `\\xff` for a byte that was
    not UTF-8); a field holding one is rejected by the policy."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return _UNSTORABLE.sub(_escape_unstorable, text)


_NON_FINITE = {math.inf: ".inf", -math.inf: "-.inf"}


def _plain(value: Any) -> Any:
    """YAML values as JSON can hold them: keys become strings, dates and sets readable text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no infinity or NaN (a strict reader, a host's JSON.parse, refuses Python's
        # `Infinity`): kept as YAML spells them.
        return _NON_FINITE.get(value, ".nan")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(map(str, value))
    return str(value)  # dates, times and other YAML scalars JSON has no type for


def _to_json(fields: dict[str, Any]) -> str:
    text = _json_text(fields)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (rejected by the policy) as a JSON escape: storable, and exact.
        return json.dumps(json.loads(text), sort_keys=True)
    return text


def _json_text(fields: dict[str, Any]) -> str:
    # Most frontmatter is JSON already: let the C encoder try first, and rewrite the value only
    # when it must (keys that are not strings, or that cannot be sorted together).
    try:
        return json.dumps(fields, ensure_ascii=False, sort_keys=True, default=_json_default,
                          allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # the parser bounds nesting; belt and braces
        pass
    try:
        return json.dumps(_plain(fields), ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (RecursionError, ValueError):
        return json.dumps({"unstorable": "frontmatter nests too deeply to store"})
