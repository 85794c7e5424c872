"""Builds the text a full-text search reads beside a skill's name and description."""

from __future__ import annotations

import re
from typing import Any

# Keys whose values say nothing about what a skill is for.
_SKIPPED_KEYS = frozenset({"name", "description", "license", "version", "allowed-tools",
                           "enabled", "disable-model-invocation", "user-invocable"})
FIELD_CHARS = 2_000  # of other frontmatter values
# Of the body's headings (up to a third) and opening prose. On the tuning prompts over the whole
# registry, 500 characters lift MRR from 0.76 (no body) to 0.81; 1,000 to 3,000 did no better
# and cost more time per search (scripts/relevance.py; docs/decisions.md).
BODY_CHARS = 500
_WORD = re.compile(r"[^\W_]+")


def search_text(fields: dict[str, Any] | None, body: str, *,
                body_chars: int | None = None) -> str | None:
    """The distinct words of the other frontmatter values, then of the body's headings, then of
    its prose from the top, each part bounded (`body_chars`, default BODY_CHARS).

    Words, not text: the index needs nothing else, a repeated word is stored once, and no
    control character or NUL (which PostgreSQL refuses) can reach the column."""
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
        headings, prose = _body_parts(body, body_chars // 3, body_chars)
        parts.append(" ".join(headings)[:body_chars // 3])
        parts.append(" ".join(prose)[:body_chars - len(parts[-1])])
    return distinct_words(" ".join(part for part in parts if part)) or None


# ASCII bytes that are not a lower-case letter or a digit, as spaces.
_ASCII_SPACES = bytes(c if (0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A) else 0x20
                      for c in range(256))


def distinct_words(text: str) -> str:
    """Each word (run of letters and digits) of `text` once, lower-cased, in order of first
    appearance, separated by spaces."""
    # One findall over the lower-cased text: a Python step per word cost a cold index more
    # than its full-text index did. ASCII text (nearly all of it) takes a byte table instead,
    # which finds the same words in half the time.
    lowered = text.lower()
    if lowered.isascii():
        words = lowered.encode("ascii").translate(_ASCII_SPACES).split()
        return b" ".join(dict.fromkeys(words)).decode("ascii")
    return " ".join(dict.fromkeys(_WORD.findall(lowered)))


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


def _body_parts(body: str, heading_chars: int, prose_chars: int,
                ) -> tuple[list[str], list[str]]:
    """Headings, and prose lines outside code fences, in order of appearance: read only until
    both hold more characters than the search text can take of them."""
    headings: list[str] = []
    prose: list[str] = []
    heading_size = prose_size = 0
    fenced = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif fenced or not stripped:
            continue
        elif stripped[0] == "#":
            heading = stripped.lstrip("#").strip()
            headings.append(heading)
            heading_size += len(heading) + 1
        else:
            prose.append(stripped)
            prose_size += len(stripped) + 1
            if prose_size > prose_chars and heading_size > heading_chars:
                break
    return headings, prose
