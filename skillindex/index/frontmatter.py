"""Parses the frontmatter of SKILL.md safely (no tags run); index/skillmd.py splits it off."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillindex.index.skillmd import decode, split
from skillindex.index.skillmd import error as _error
from skillindex.model import Finding, Severity

# A frontmatter block larger than this is not metadata; refusing it bounds parse time and memory.
MAX_FRONTMATTER_CHARS = 64 * 1024
# Aliases make a small document describe a huge one (billion laughs); count nodes as if expanded.
MAX_YAML_NODES = 10_000
# Deeper values are refused: everything that later walks the fields (the JSON encoder, the
# store, readers of the stored JSON) recurses, and real frontmatter nests a few levels at most.
MAX_YAML_DEPTH = 100
# The parser work one frontmatter may cost (its first parse and any line-by-line repair
# together), in YAML events; real frontmatter needs a few dozen.
MAX_YAML_EVENTS = 2_000
# What one parse costs at the least (making a parser, failing), counted in events.
PARSE_COST = 20

# A number written with more characters than this is refused: Python converts integers of more
# than 4,300 digits neither from nor to text, JSON readers lose such numbers, and no host's
# frontmatter holds one (hex and base-60 integers grow fastest: 100 characters stay far below).
MAX_NUMBER_CHARS = 100
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})
# What PyYAML's constructors raise, below yaml.YAMLError, for a value its tag cannot take:
# `!!bool maybe` (KeyError), `!!int ""` (IndexError), `!!timestamp nope` (AttributeError),
# `!!float 1:59:...` (OverflowError), `!!timestamp 0000-01-01` (ValueError).
_CONSTRUCTION_ERRORS = (KeyError, IndexError, ValueError, AttributeError, TypeError,
                        OverflowError, RecursionError)
_SHORT_TAG = "tag:yaml.org,2002:"

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Linear by construction: the key's characters, the blanks and the colon are disjoint classes, and
# the value is everything after the colon (its blanks are stripped by str methods, not a pattern).
_KEY_LINE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.\-]*)[ \t]*:(.*)")
_BLOCK_INDICATOR = re.compile(r"^[|>][+-]?[0-9]?[+-]?$")


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """The outcome of parsing one SKILL.md: fields (None when unusable), body and findings."""

    fields: dict[str, Any] | None
    body: str
    findings: tuple[Finding, ...]
    repaired: bool = False


class _TooLarge(yaml.YAMLError):
    """A document refused for its size or shape; refused outright, never repaired line by line."""

    code = "yaml-invalid"


class _NumberTooLarge(_TooLarge):
    code = "number-too-large"


def _number_refused(node: yaml.Node) -> _NumberTooLarge | None:
    if node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
        return _NumberTooLarge(f"frontmatter holds a number of {len(node.value)} characters; "
                               f"the limit is {MAX_NUMBER_CHARS}")
    return None


@dataclass(slots=True)
class _Budget:
    """The YAML events one frontmatter may cost, shared by its first parse and any repair."""

    events: int = MAX_YAML_EVENTS

    def charge(self, events: int) -> None:
        self.events -= events
        if self.events < 0:
            raise _TooLarge(f"frontmatter holds more than {MAX_YAML_EVENTS // 2} YAML values")


def _measure(root: yaml.Node) -> tuple[int, int, int]:
    """(nodes with every alias expanded, nesting depth, distinct nodes), computed without
    expanding anything and without recursion; a recursive alias is refused."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded size, depth)
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            active.discard(key)
            measured = [sizes[id(child)] for child in _children(node)]
            total = 1 + sum(size for size, _depth in measured)
            depth = 1 + max((child_depth for _size, child_depth in measured), default=0)
            if total > MAX_YAML_NODES:
                raise _TooLarge(f"YAML expands to more than {MAX_YAML_NODES} nodes (alias bomb?)")
            if depth > MAX_YAML_DEPTH:
                raise _TooLarge(_too_deep())
            sizes[key] = (total, depth)
            continue
        if key in sizes:
            continue
        if key in active:
            raise _TooLarge("YAML contains a recursive alias")
        if isinstance(node, yaml.ScalarNode):
            refused = _number_refused(node)
            if refused is not None:
                raise refused
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    size, depth = sizes[id(root)]
    return size, depth, len(sizes)


def _tree_size(root: yaml.Node) -> int:
    """The number of nodes of a tree, refusing one deeper than MAX_YAML_DEPTH levels."""
    count = depth = 0
    level = [root]
    while level:
        depth += 1
        if depth > MAX_YAML_DEPTH:
            raise _TooLarge(_too_deep())
        count += len(level)
        below: list[yaml.Node] = []
        for node in level:
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    below.append(key)
                    below.append(value)
            elif isinstance(node, yaml.SequenceNode):
                below.extend(node.value)
            else:
                refused = _number_refused(node)
                if refused is not None:
                    raise refused
        level = below
    return count


def _too_deep() -> str:
    return f"frontmatter nests deeper than {MAX_YAML_DEPTH} levels"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _count_events(text: str, budget: _Budget) -> None:
    """Walk the parser's events without building anything, refusing too many or too deep ones
    before a (recursive, costlier) composer sees them."""
    loader = _Loader(text)
    try:
        depth = events = 0
        while loader.check_event():
            event = loader.get_event()
            events += 1
            if events > budget.events:
                budget.charge(events)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise _TooLarge(_too_deep())
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def load_yaml(text: str, budget: _Budget | None = None) -> Any:
    """Safe-load one YAML document within a work budget, refusing documents that nest deeper
    than MAX_YAML_DEPTH or whose aliases expand beyond MAX_YAML_NODES."""
    budget = _Budget() if budget is None else budget
    budget.charge(PARSE_COST)
    # Every YAML value needs one of these indicators (or the document start), so they bound the
    # events cheaply; only a document that could exceed the budget is counted event by event.
    indicators = sum(text.count(mark) for mark in ":,-?[{")
    loader = _Loader(text)
    try:
        if 6 * indicators + 10 > budget.events:
            _count_events(text, budget)
        try:
            node = loader.get_single_node()
        except RecursionError:  # the pure-Python composer, on nesting the count did not see
            raise _TooLarge(_too_deep()) from None
        if node is None:
            return None
        # Without an alias the nodes form a tree, measured level by level; with one, shared
        # nodes are measured once and their expansion computed without expanding.
        nodes = _measure(node)[2] if "*" in text else _tree_size(node)
        budget.charge(2 * nodes)
        try:
            return loader.construct_document(node)
        except _CONSTRUCTION_ERRORS as exc:
            raise _unconstructible(node) from exc
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound, below ours or not
            raise _TooLarge(_too_deep()) from None
        raise
    finally:
        loader.dispose()


def _unconstructible(root: yaml.Node) -> yaml.YAMLError:
    """The YAML error of a document one of whose values its tag cannot take, naming the first
    such value (looked for only once the document failed: the common path pays nothing)."""
    constructor = yaml.constructor.SafeConstructor()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            try:
                constructor.construct_object(node)
            except yaml.YAMLError:
                continue
            except _CONSTRUCTION_ERRORS:
                tag = str(node.tag).replace(_SHORT_TAG, "!!")
                shown = repr(node.value) if len(repr(node.value)) <= 40 \
                    else repr(node.value)[:39] + "…"
                return yaml.constructor.ConstructorError(
                    None, None, f"a {tag} value cannot be {shown}", node.start_mark)
        else:
            stack.extend(reversed(_children(node)))
    return yaml.constructor.ConstructorError(None, None, "a value cannot be constructed",
                                             root.start_mark)


def _yaml_problem(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def repair(text: str, budget: _Budget | None = None) -> dict[str, Any] | None:
    """Read a frontmatter YAML rejected line by line, as lenient hosts do; None if still unreadable.

    A top-level `key: value` line keeps its value as a literal string unless that one line is
    valid YAML on its own; an indented block under a bare `key:` (or a block indicator such as
    `key: |`) is parsed as YAML together with its key. A document over the work budget raises
    _TooLarge (a YAMLError): it is refused, not read as text.
    """
    budget = _Budget() if budget is None else budget
    lines = text.split("\n")
    fields: dict[str, Any] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY_LINE.fullmatch(line)
        if match is None:
            return None
        key, rest = match.group(1), match.group(2)
        if rest[:1] not in ("", " ", "\t"):
            return None  # `key:value` is not a key line
        value = rest.strip(" \t")
        block: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][:1] in " \t"):
            block.append(lines[index])
            index += 1
        while block and not block[-1].strip():
            block.pop()
        if not value or _BLOCK_INDICATOR.match(value):
            try:
                parsed = load_yaml("\n".join([f"{key}: {value}", *block, ""]), budget)
            except _TooLarge:
                raise
            except (yaml.YAMLError, ValueError, TypeError):
                return None
            if not isinstance(parsed, dict) or key not in parsed:
                return None
            fields[key] = parsed[key]
            continue
        if block:
            value = " ".join([value, *(part.strip() for part in block if part.strip())])
        fields[key] = _line_value(key, value, budget)
    return fields


def _line_value(key: str, value: str, budget: _Budget) -> Any:
    try:
        parsed = load_yaml(f"{key}: {value}", budget)
    except _TooLarge:
        raise
    except (yaml.YAMLError, ValueError, TypeError):
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
    budget = _Budget()
    try:
        fields = load_yaml(head, budget)
    except _TooLarge as exc:
        return Frontmatter(None, body, (_error(exc.code, str(exc)),))
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        problem = _yaml_problem(exc)
        try:
            repaired = repair(head, budget) if lenient else None
        except _TooLarge as too_large:
            return Frontmatter(None, body, (_error(too_large.code, str(too_large)),))
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
