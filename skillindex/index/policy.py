"""Judges a parsed SKILL.md against the Agent Skills rules and a root's validation mode (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skillindex.index import risk
from skillindex.index.frontmatter import Frontmatter
from skillindex.model import Finding, RootSpec, Severity, Status, Validation

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
KNOWN_FIELDS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools", "enabled"}
)
# Bumped whenever a rule changes, so that a reindex re-judges files it would otherwise skip.
RULES_VERSION = 1

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_UNSAFE_NAME = re.compile(r"[/\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str | None
    description: str | None
    enabled: bool
    status: Status
    findings: tuple[Finding, ...]


def rules_key(root: RootSpec) -> str:
    """What, besides the file, decides a verdict; a stored verdict is reused only if it matches."""
    return (f"{RULES_VERSION}:{risk.RULES_VERSION}:{root.validation}:"
            f"{int(root.require_description)}:{root.name_prefix}")


def judge(parsed: Frontmatter, *, dir_name: str, root: RootSpec) -> Verdict:
    findings = list(parsed.findings)
    fields = parsed.fields
    if fields is None:
        # Unreadable frontmatter: the directory name still lets `explain` find the reasons.
        return Verdict(f"{root.name_prefix}{dir_name}", None, True, Status.REJECTED,
                       tuple(findings))
    lenient = root.validation is Validation.LENIENT
    spec = Severity.WARNING if lenient else Severity.ERROR

    name = _judge_name(fields, dir_name, spec, findings)
    description = _judge_description(fields, root.require_description, spec, findings)
    enabled = _judge_enabled(fields, findings)
    _judge_optional(fields, spec, findings)
    for key in sorted(set(fields) - KNOWN_FIELDS):
        findings.append(Finding("unknown-field", Severity.WARNING,
                                f"unknown frontmatter field {key!r} kept as metadata"))
    status = (Status.REJECTED if any(f.severity is Severity.ERROR for f in findings)
              else Status.ACCEPTED)
    if name is not None and root.name_prefix:
        name = f"{root.name_prefix}{name}"
    return Verdict(name, description, enabled, status, tuple(findings))


def _judge_name(fields: dict[str, Any], dir_name: str, spec: Severity,
                findings: list[Finding]) -> str | None:
    raw = fields.get("name", dir_name)
    if raw is None:
        raw = dir_name
    if not isinstance(raw, str):
        findings.append(Finding("field-type", Severity.ERROR,
                                f"name must be a string, not {type(raw).__name__}"))
        return None
    name = raw.strip()
    if not name or _UNSAFE_NAME.search(name):
        findings.append(Finding("name-invalid", Severity.ERROR,
                                f"name {raw!r} is empty or holds '/' or control characters"))
        return None
    if len(name) > MAX_NAME:
        findings.append(Finding("name-too-long", spec,
                                f"name is {len(name)} characters; the limit is {MAX_NAME}"))
    if not _NAME.fullmatch(name):
        findings.append(Finding(
            "name-invalid", spec,
            f"name {name!r} must be lowercase letters, digits and single inner hyphens"))
    if name != dir_name:
        findings.append(Finding("name-dir-mismatch", spec,
                                f"name {name!r} differs from its directory {dir_name!r}"))
    return name


def _judge_description(fields: dict[str, Any], required: bool, spec: Severity,
                       findings: list[Finding]) -> str | None:
    raw = fields.get("description")
    if raw is not None and not isinstance(raw, str):
        findings.append(Finding("field-type", Severity.ERROR,
                                f"description must be a string, not {type(raw).__name__}"))
        return None
    description = (raw or "").strip()
    if not description:
        severity = Severity.ERROR if required else Severity.WARNING
        findings.append(Finding("description-missing", severity, "description is missing or empty"))
        return None
    if len(description) > MAX_DESCRIPTION:
        # Hosts load such skills; lenient mode keeps them and the catalog budget shortens them.
        findings.append(Finding(
            "description-too-long", spec,
            f"description is {len(description)} characters; the limit is {MAX_DESCRIPTION}"))
    return description


def _judge_enabled(fields: dict[str, Any], findings: list[Finding]) -> bool:
    raw = fields.get("enabled", True)
    if isinstance(raw, bool):
        return raw
    findings.append(Finding("field-type", Severity.ERROR,
                            f"enabled must be true or false, not {type(raw).__name__}"))
    return True


def _judge_optional(fields: dict[str, Any], spec: Severity, findings: list[Finding]) -> None:
    for key in ("license", "compatibility"):
        value = fields.get(key)
        if value is not None and not isinstance(value, str):
            findings.append(Finding("field-type", spec,
                                    f"{key} must be a string, not {type(value).__name__}"))
    compatibility = fields.get("compatibility")
    if isinstance(compatibility, str) and len(compatibility) > MAX_COMPATIBILITY:
        findings.append(Finding(
            "compatibility-too-long", spec,
            f"compatibility is {len(compatibility)} characters; the limit is {MAX_COMPATIBILITY}"))
    tools = fields.get("allowed-tools")
    if tools is not None and not isinstance(tools, str):
        findings.append(Finding("field-type", spec,
                                f"allowed-tools must be a string, not {type(tools).__name__}"))
    metadata = fields.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        findings.append(Finding("field-type", spec,
                                "metadata must be a mapping of strings to strings"))
