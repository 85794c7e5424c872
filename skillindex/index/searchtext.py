"""Builds the text a full-text search reads beside a skill's name and description."""

from __future__ import annotations

import re
from typing import Any

# Keys whose values say nothing about what a skill is for.
_SKIPPED_KEYS = frozenset({"name", "description", "license", "version", "allowed-tools",
                           "enabled", "disable-model-invocation", "user-invocable"})
FIELD_CHARS = 2_000  # of other frontmatter values
# Of the body's headings (up to a third) and opening prose. On 2,049 public skills, with queries
# taken from the bodies, 1,000 characters lift MRR from 0.25 (no body) to 0.61 while the whole
# body reaches 0.71 at three times the size (scripts/bench.py --relevance; docs/decisions.md).
BODY_CHARS = 1_000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FENCE = re.compile(r"^\s*(```|~~~)")


def search_text(fields: dict[str, Any] | None, body: str, *,
                body_chars: int | None = None) -> str | None:
    """Other frontmatter values, then the body's headings, then its prose from the top, each
    part bounded (`body_chars`, default BODY_CHARS); control characters become spaces
    (PostgreSQL refuses NUL in text)."""
    if body_chars is None:
        body_chars = BODY_CHARS
    parts: list[str] = []
    if fields:
        values: list[str] = []
        for key, value in fields.items():
            if str(key) not in _SKIPPED_KEYS:
                _strings(value, values, depth=0)
        parts.append(" ".join(values)[:FIELD_CHARS])
    if body_chars > 0 and body:
        headings, prose = _body_parts(body)
        parts.append(" ".join(headings)[:body_chars // 3])
        parts.append(" ".join(prose)[:body_chars - len(parts[-1])])
    text = _CONTROL.sub(" ", " ".join(part for part in parts if part)).strip()
    return text or None


def model_invocation_disabled(fields: dict[str, Any] | None) -> bool:
    """The frontmatter's `disable-model-invocation: true` (a repaired `"true"` string too)."""
    value = (fields or {}).get("disable-model-invocation")
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _strings(value: Any, out: list[str], *, depth: int) -> None:
    if depth > 8:
        return
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out, depth=depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out, depth=depth + 1)


def _body_parts(body: str) -> tuple[list[str], list[str]]:
    """Headings, and prose lines outside code fences, in order of appearance."""
    headings: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            headings.append(stripped.lstrip("#").strip())
        elif stripped:
            prose.append(stripped)
    return headings, prose
