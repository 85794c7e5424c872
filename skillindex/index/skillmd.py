"""Splits SKILL.md into its frontmatter text and its body, without parsing YAML.

Kept apart from index/frontmatter.py (which parses, with PyYAML) so that handing over a body,
what every one-shot `read` does, does not pay for importing the YAML parser.
"""

from __future__ import annotations

from skillindex.model import Finding, Severity


def error(code: str, message: str) -> Finding:
    return Finding(code, Severity.ERROR, message)


def decode(data: bytes) -> str | Finding:
    """UTF-8 with an optional BOM; CRLF and lone CR become LF."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error("not-utf8", f"SKILL.md is not valid UTF-8 (byte {exc.start})")
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def split(text: str) -> tuple[str, str] | Finding:
    """Return (frontmatter, body); the frontmatter sits between two lines holding only `---`."""
    first, sep, rest = text.partition("\n")
    if first.rstrip() != "---":
        return error("frontmatter-missing",
                     "SKILL.md does not start with a '---' frontmatter line")
    if not sep:
        return error("frontmatter-unclosed", "frontmatter is never closed by a '---' line")
    # Only lines starting with `---` are looked at, each once: linear however long the text.
    start = 0 if rest.startswith("---") else rest.find("\n---") + 1
    while start > 0 or rest.startswith("---"):
        end = rest.find("\n", start)
        line = rest[start:] if end < 0 else rest[start:end]
        if line.rstrip() == "---":
            return rest[:start], ("" if end < 0 else rest[end + 1:])
        if end < 0:
            break
        start = rest.find("\n---", end) + 1
        if start == 0:
            break
    return error("frontmatter-unclosed", "frontmatter is never closed by a '---' line")


def body_of(data: bytes) -> str | None:
    """The Markdown body of a SKILL.md, or None when it has no well-formed frontmatter."""
    text = decode(data)
    if isinstance(text, Finding):
        return None
    parts = split(text)
    return None if isinstance(parts, Finding) else parts[1]
