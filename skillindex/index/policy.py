"""Judges a parsed SKILL.md against the Agent Skills rules and a root's validation mode (pure)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skillindex.index import dialect
from skillindex.model import Finding, RootSpec, Severity, Status, Validation

if TYPE_CHECKING:  # PyYAML costs a one-shot command 20 ms to import; the root planner's
    # `unsafe_name` needs none of it.
    from skillindex.index.frontmatter import Frontmatter

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
# The specification's fields, the seed's `enabled`, and the other hosts' fields skillindex reads.
KNOWN_FIELDS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools", "enabled"}
) | dialect.FIELDS
# Bumped whenever a rule changes, so that a reindex re-judges files it would otherwise skip.
RULES_VERSION = 6
# The same for the risk rules (index/risk.py, which names it RULES_VERSION): kept here so that
# a walk can key a skill without compiling those rules' patterns and matcher.
RISK_RULES_VERSION = 2

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# Characters a skill:// URI gives a meaning of its own, refused in a name in every mode: `:`
# joins a qualification to a name and `/` a name to a path (both would let one name's URI be
# another skill's file), `\\` is a separator on some hosts, `%` escapes, `?` and `#` end the
# path for any URI parser; a leading `.` makes a segment a URI path may not hold (`.`, `..`) or
# a hidden folder's name.
RESERVED = frozenset(":/\\%?#")
_UNSAFE_ASCII = re.compile(r"[/\x00-\x1f\x7f]")
# Characters no name may hold in any mode: they are invisible, reorder text or break lines, so
# `pdf` and `pdf\u200b` would look like one skill and be two. Controls, format characters
# (zero-width, bidi, tags), lone surrogates (bytes that were not UTF-8), line separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Control characters in any field: NUL cannot be stored as text (PostgreSQL refuses it) and
# rejects; the others (not TAB or LF, which YAML text holds) are kept exactly and warned about.
# A lone surrogate (only the pure-Python YAML parser lets a `\\ud800` escape make one) is not
# text either and is judged like NUL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str | None
    description: str | None
    enabled: bool
    status: Status
    findings: tuple[Finding, ...]
    host: dialect.HostFields = dialect.NONE


def unsafe_name(name: str) -> bool:
    """Whether a name holds `/` or a character no name may hold in any validation mode."""
    if _UNSAFE_ASCII.search(name):
        return True
    return not name.isascii() and any(
        unicodedata.category(char) in _UNSAFE_CATEGORIES for char in name)


def reserved_in(name: str) -> str | None:
    """The first character of `name` the skill:// grammar reserves (a leading `.` counts), or
    None when it holds none."""
    if name.startswith("."):
        return "."
    return next((char for char in name if char in RESERVED), None)


def rules_key(root: RootSpec) -> str:
    """What, besides the file, decides a verdict; a stored verdict is reused only if it matches."""
    signing = "" if root.signing is None else f":{root.signing.key_text()}"
    return (f"{RULES_VERSION}:{RISK_RULES_VERSION}:{root.validation}:"
            f"{int(root.require_description)}:{root.name_prefix}{signing}")


def judge(parsed: Frontmatter, *, dir_name: str, root: RootSpec,
          sidecar: bytes | None = None) -> Verdict:
    """The verdict on one SKILL.md; `sidecar` is the bytes of its Codex agents/openai.yaml."""
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
    _judge_controls(fields, findings)
    host, host_findings = dialect.host_fields(fields, sidecar)
    findings += host_findings
    for key in sorted(set(fields) - KNOWN_FIELDS):
        findings.append(Finding("unknown-field", Severity.WARNING,
                                f"unknown frontmatter field {key!r} kept as metadata"))
    status = (Status.REJECTED if any(f.severity is Severity.ERROR for f in findings)
              else Status.ACCEPTED)
    if name is not None and root.name_prefix:
        name = f"{root.name_prefix}{name}"
    return Verdict(name, description, enabled, status, tuple(findings), host)


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
    if not name or unsafe_name(name):
        findings.append(Finding(
            "name-invalid", Severity.ERROR,
            f"name {raw!r} is empty or holds '/', control or invisible characters"))
        return None
    reserved = reserved_in(name)
    if reserved is not None:
        where = "starts with" if reserved == "." and name.startswith(".") else "holds"
        findings.append(Finding(
            "name-reserved", Severity.ERROR,
            f"name {name!r} {where} {reserved!r}, which skill:// URIs reserve"))
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


def _judge_controls(fields: dict[str, Any], findings: list[Finding]) -> None:
    for key, value in fields.items():
        found = _controls(key, value)
        if not found:
            continue
        unstorable = sorted(char for char in found if char == "\x00" or char >= "\ud800")
        if unstorable:
            findings.append(Finding(
                "control-character", Severity.ERROR,
                f"field {key!r} holds U+{ord(unstorable[0]):04X}, which cannot be stored as text"))
        else:
            codes = ", ".join(f"U+{ord(char):04X}" for char in sorted(found))
            findings.append(Finding(
                "control-character", Severity.WARNING,
                f"field {key!r} holds control characters ({codes}); kept, shown escaped"))


def _controls(key: str, value: Any) -> set[str]:
    """The control characters in a field: its key, and every key and string inside its value."""
    found: set[str] = set(_CONTROL.findall(key))
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.update(_CONTROL.findall(item))
        elif isinstance(item, dict | list | tuple | set | frozenset) and id(item) not in seen:
            seen.add(id(item))  # aliases share objects: each is read once
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                stack.extend(item)
    return found
