"""Splits SKILL.md into frontmatter and body and parses the frontmatter safely (no tags run)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillindex.model import Finding, Severity

# A frontmatter block larger than this is not metadata; refusing it bounds parse time and memory.
MAX_FRONTMATTER_CHARS = 64 * 1024
# Aliases make a small document describe a huge one (billion laughs); count nodes as if expanded.
MAX_YAML_NODES = 10_000

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KEY_LINE = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.\-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_BLOCK_INDICATOR = re.compile(r"^[|>][+-]?[0-9]?[+-]?$")


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """The outcome of parsing one SKILL.md: fields (None when unusable), body and findings."""

    fields: dict[str, Any] | None
    body: str
    findings: tuple[Finding, ...]
    repaired: bool = False


class _TooLarge(yaml.YAMLError):
    pass


def _error(code: str, message: str) -> Finding:
    return Finding(code, Severity.ERROR, message)


def decode(data: bytes) -> str | Finding:
    """UTF-8 with an optional BOM; CRLF and lone CR become LF."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error("not-utf8", f"SKILL.md is not valid UTF-8 (byte {exc.start})")
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def split(text: str) -> tuple[str, str] | Finding:
    """Return (frontmatter, body); the frontmatter sits between two lines holding only `---`."""
    first, sep, rest = text.partition("\n")
    if first.rstrip() != "---":
        return _error("frontmatter-missing",
                      "SKILL.md does not start with a '---' frontmatter line")
    if not sep:
        return _error("frontmatter-unclosed", "frontmatter is never closed by a '---' line")
    position = 0
    while position <= len(rest):
        end = rest.find("\n", position)
        line = rest[position:] if end < 0 else rest[position:end]
        if line.rstrip() == "---":
            return rest[:position], ("" if end < 0 else rest[end + 1:])
        if end < 0:
            break
        position = end + 1
    return _error("frontmatter-unclosed", "frontmatter is never closed by a '---' line")


def body_of(data: bytes) -> str | None:
    """The Markdown body of a SKILL.md, or None when it has no well-formed frontmatter."""
    text = decode(data)
    if isinstance(text, Finding):
        return None
    parts = split(text)
    return None if isinstance(parts, Finding) else parts[1]


def _expanded_size(root: yaml.Node) -> int:
    """Node count with every alias expanded, computed without expanding; cycles are refused."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            active.discard(key)
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            if total > MAX_YAML_NODES:
                raise _TooLarge(f"YAML expands to more than {MAX_YAML_NODES} nodes (alias bomb?)")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in active:
            raise _TooLarge("YAML contains a recursive alias")
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str) -> Any:
    """Safe-load one YAML document, refusing documents whose aliases expand beyond a bound."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:  # without an alias nothing can expand; most frontmatter has none
            _expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _yaml_problem(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def repair(text: str) -> dict[str, Any] | None:
    """Read a frontmatter YAML rejected line by line, as lenient hosts do; None if still unreadable.

    A top-level `key: value` line keeps its value as a literal string unless that one line is
    valid YAML on its own; an indented block under a bare `key:` (or a block indicator such as
    `key: |`) is parsed as YAML together with its key.
    """
    lines = text.split("\n")
    fields: dict[str, Any] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            return None
        key, value = match.group(1), match.group(2) or ""
        block: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][:1] in " \t"):
            block.append(lines[index])
            index += 1
        while block and not block[-1].strip():
            block.pop()
        if not value or _BLOCK_INDICATOR.match(value):
            try:
                parsed = load_yaml("\n".join([f"{key}: {value}", *block, ""]))
            except (yaml.YAMLError, ValueError, TypeError, RecursionError):
                return None
            if not isinstance(parsed, dict) or key not in parsed:
                return None
            fields[key] = parsed[key]
            continue
        if block:
            value = " ".join([value, *(part.strip() for part in block if part.strip())])
        fields[key] = _line_value(key, value)
    return fields


def _line_value(key: str, value: str) -> Any:
    try:
        parsed = load_yaml(f"{key}: {value}")
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return value
    if isinstance(parsed, dict) and key in parsed:
        return parsed[key]
    return value


def parse(data: bytes, *, lenient: bool) -> Frontmatter:
    """Parse SKILL.md bytes; every problem becomes a finding, none raises."""
    text = decode(data)
    if isinstance(text, Finding):
        return Frontmatter(None, "", (text,))
    parts = split(text)
    if isinstance(parts, Finding):
        return Frontmatter(None, text, (parts,))
    head, body = parts
    if len(head) > MAX_FRONTMATTER_CHARS:
        return Frontmatter(None, body, (_error(
            "file-too-large", f"frontmatter is {len(head)} characters; the limit is "
            f"{MAX_FRONTMATTER_CHARS}"),))
    try:
        fields = load_yaml(head)
    except _TooLarge as exc:
        return Frontmatter(None, body, (_error("yaml-invalid", str(exc)),))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        problem = _yaml_problem(exc)
        repaired = repair(head) if lenient else None
        if repaired is None:
            return Frontmatter(None, body, (_error("yaml-invalid", f"invalid YAML: {problem}"),))
        warning = Finding("yaml-repaired", Severity.WARNING,
                          f"YAML was invalid ({problem}); read line by line instead")
        return Frontmatter(repaired, body, (warning,), repaired=True)
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        return Frontmatter(None, body, (_error(
            "yaml-not-mapping", f"frontmatter is a YAML {type(fields).__name__}, not a mapping"),))
    return Frontmatter({str(key): value for key, value in fields.items()}, body, ())
