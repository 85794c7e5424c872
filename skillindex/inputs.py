"""The one door for what a user or a repository supplies: files read only when regular and
small enough, parsed (JSON, TOML, YAML) within a depth bound, and globs compiled within a length
bound to a matcher that works in time proportional to the name."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillindex.errors import ConfigError

KIB = 1 << 10
MIB = 1 << 20
# The largest file of each kind read at all: far above any real one, far below what would fill
# memory or keep a command busy (a lock file of 100,000 skills is about 20 MiB).
MAX_SETTINGS_BYTES = 1 * MIB
MAX_HOST_FILE_BYTES = 4 * MIB
MAX_LOCK_BYTES = 64 * MIB
MAX_TOKEN_FILE_BYTES = 4 * MIB
MAX_SIDECAR_BYTES = 64 * KIB
MAX_FEED_BYTES = 16 * MIB
# Deeper documents are refused before (or as) they are parsed: the parsers and everything that
# later walks a document (copying, comparing, writing back) recurse, and no file of these
# kinds nests more than a few levels.
MAX_DEPTH = 64
# A glob longer than this is refused: no skill name comes near it (names are at most 64
# characters, qualified ones a few more), and the matcher's work grows with it.
MAX_GLOB_CHARS = 512

Format = Literal["json", "toml", "yaml"]


class InputError(ConfigError):
    """A file or value a user supplied that is not read: of the wrong kind, too large, too
    deep, or not of its format. `reason` is the message without the file's name; `code` one
    of not-regular, too-large, too-deep, invalid, not-utf8, duplicate-key, not-finite,
    unreadable, glob-too-long."""

    def __init__(self, reason: str, *, code: str, source: str | None = None,
                 key: str | None = None) -> None:
        super().__init__(reason, source=source, key=key)
        self.reason = reason
        self.code = code


@dataclass(frozen=True, slots=True)
class Document:
    """A file as read: its text (a UTF-8 byte order mark kept apart) and what it parses to."""

    path: Path
    text: str
    data: Any
    bom: bool = False


def read_bytes(path: Path, *, max_bytes: int, what: str, head: bool = False) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (with `head`, its first `max_bytes`
    whatever its size). The file is opened without blocking and judged by the descriptor's
    fstat, so a FIFO, a device (/dev/zero), a socket or a folder is refused and never waited
    on or read; FileNotFoundError is left to the caller."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:  # a socket cannot be opened at all: say what it is rather than the errno
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise InputError(f"the {what} is not a regular file ({_kind(mode)}); not read",
                             code="not-regular", source=str(path)) from exc
        raise InputError(f"cannot read the {what}: {exc.strerror}", code="unreadable",
                         source=str(path)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"the {what} is not a regular file ({_kind(info.st_mode)}); "
                             "not read", code="not-regular", source=str(path))
        if info.st_size > max_bytes and not head:
            raise _too_large(path, what, max_bytes)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes if head else max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", code="unreadable",
                         source=str(path)) from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since fstat
        raise _too_large(path, what, max_bytes)
    return data


def read_text(path: Path, *, max_bytes: int, what: str) -> tuple[str, bool]:
    """`read_bytes` decoded as UTF-8, and whether it began with a byte order mark (dropped)."""
    data = read_bytes(path, max_bytes=max_bytes, what=what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"the {what} is not UTF-8 text", code="not-utf8",
                         source=str(path)) from None
    bom = text.startswith("\ufeff")
    return (text[1:] if bom else text), bom


def read_document(path: Path, fmt: Format, *, max_bytes: int, what: str,
                  finite: bool = False) -> Document:
    """A regular file read within `max_bytes` and parsed as `fmt` within MAX_DEPTH."""
    text, bom = read_text(path, max_bytes=max_bytes, what=what)
    return Document(path, text, parse(text, fmt, what=what, source=str(path), finite=finite),
                    bom)


def parse(text: str, fmt: Format, *, what: str, source: str | None = None,
          finite: bool = False) -> Any:
    """Text of a supplied file parsed as `fmt`: nesting beyond MAX_DEPTH, a key written twice
    (JSON) and, with `finite`, NaN or a number that overflows to infinity are refused."""
    if fmt == "json":
        return load_json(text, what=what, source=source, finite=finite)
    if fmt == "toml":
        return load_toml(text, what=what, source=source, finite=finite)
    return load_yaml(text, what=what, source=source)


def load_json(text: str, *, what: str, source: str | None = None, finite: bool = False,
              object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """JSON text parsed, then measured: the C parser bounds its own recursion (a document
    nested a thousand levels is a RecursionError, refused here as too deep), and a walk
    without recursion refuses anything deeper than MAX_DEPTH before a caller walks it.
    (A scan of the text before parsing cost twice the parse of a large lock file.)"""

    def pairs(items: list[tuple[str, Any]]) -> Any:
        document = dict(items)
        if len(document) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    # Which of the two a reader keeps depends on its parser; a rewrite would
                    # silently drop one.
                    raise InputError(f"the {what} holds the key {key!r} twice",
                                     code="duplicate-key", source=source)
                seen.add(key)
        return document if object_hook is None else object_hook(document)

    def constant(name: str) -> float:
        if finite:
            raise _not_finite(name, what, source)
        return float(name)

    def number(spelled: str) -> float:
        value = float(spelled)
        if finite and not math.isfinite(value):
            raise _not_finite(spelled, what, source)
        return value

    try:
        document = json.loads(text, object_pairs_hook=pairs, parse_constant=constant,
                              parse_float=number)
    except json.JSONDecodeError as exc:
        raise InputError(f"the {what} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno})", code="invalid", source=source) from None
    except RecursionError:  # a bound below MAX_DEPTH, set by the caller's own stack
        raise _too_deep(what, source) from None
    except InputError:
        raise
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InputError(f"the {what} is not valid JSON ({exc})", code="invalid",
                         source=source) from None
    _measure(document, what, source, finite=False)
    return document


def load_toml(text: str, *, what: str, source: str | None = None,
              finite: bool = False) -> dict[str, Any]:
    _refuse_deep(_TOML_TOKENS, text, what, source)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"the {what} is not valid TOML ({exc})", code="invalid",
                         source=source) from None
    except RecursionError:
        raise _too_deep(what, source) from None
    # Dotted keys and table headers (a.b.c...) nest without a bracket: measured once parsed.
    _measure(document, what, source, finite=finite)
    return document


def _measure(document: Any, what: str, source: str | None, *, finite: bool) -> None:
    """Refuse a parsed document deeper than MAX_DEPTH (and, with `finite`, one holding NaN or
    an infinity), walking it with a stack of its own."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                raise _too_deep(what, source)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                raise _too_deep(what, source)
            stack.extend((item, depth + 1) for item in value)
        elif finite and isinstance(value, float) and not math.isfinite(value):
            raise _not_finite(str(value), what, source)


def load_yaml(text: str, *, what: str, source: str | None = None) -> Any:
    """YAML through the frontmatter's loader, which bounds depth, aliases and parser work."""
    import yaml  # noqa: PLC0415 (PyYAML is imported only where a YAML file is read)

    from skillindex.index.frontmatter import load_yaml as bounded  # noqa: PLC0415

    try:
        return bounded(text)
    except RecursionError:
        raise _too_deep(what, source) from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        problem = " ".join(str(exc).split())[:200]
        raise InputError(f"the {what} is not valid YAML ({problem})", code="invalid",
                         source=source) from None


# A string (skipped whole), a comment, or a bracket. Invalid text (an unclosed string) only
# makes brackets count that the parser would not see: never fewer.
_TOML_TOKENS = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"'
                          r"|'[^'\n]*'|#[^\n]*|[\[\]{}]", re.DOTALL)


def _refuse_deep(tokens: re.Pattern[str], text: str, what: str, source: str | None) -> None:
    """Refuse text whose brackets nest deeper than MAX_DEPTH, before a recursive parser sees
    it; text with fewer brackets than the bound is let through without a scan."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for match in tokens.finditer(text):
        mark = match.group()
        if mark in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(what, source)
        elif mark in ("]", "}"):
            depth = max(0, depth - 1)


def _too_deep(what: str, source: str | None) -> InputError:
    return InputError(f"the {what} nests deeper than {MAX_DEPTH} levels; not read",
                      code="too-deep", source=source)


def _too_large(path: Path, what: str, max_bytes: int) -> InputError:
    return InputError(f"the {what} is larger than {max_bytes:,} bytes; not read",
                      code="too-large", source=str(path))


def _not_finite(spelled: str, what: str, source: str | None) -> InputError:
    return InputError(f"the {what} holds the number {spelled}, which is not finite (other "
                      "programs read it differently or not at all)", code="not-finite",
                      source=source)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


# --- globs ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Class:
    """A `[...]` of a glob: single characters and ranges, or their complement."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    @property
    def regex(self) -> str:
        members = "".join(re.escape(char) for char in sorted(self.chars)) + "".join(
            f"{re.escape(low)}-{re.escape(high)}" for low, high in self.ranges if low <= high)
        if not members:  # an empty class (`[z-a]`) matches nothing; its complement, anything
            return "." if self.negated else "(?!)"
        return f"[{'^' if self.negated else ''}{members}]"


_Token = str | _Class | None  # a literal character, a class, `?` (None); `*` is a split


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled glob (fnmatch's case-sensitive grammar: `*`, `?`, `[seq]`, `[!seq]`)."""

    pattern: str
    # The parts between stars in order, the first anchored at the start and the last at the
    # end; each middle part is an atomic group taken at its first fit, which never leaves
    # less room for the parts after it, so no choice is revisited (no backtracking).
    regex: re.Pattern[str]

    def __call__(self, name: str) -> bool:
        return self.regex.fullmatch(name) is not None


def _regex(parts: list[list[_Token]]) -> re.Pattern[str]:
    texts = ["".join(re.escape(t) if isinstance(t, str) else "." if t is None else t.regex
                     for t in part) for part in parts]
    if len(texts) == 1:
        return re.compile(texts[0], re.DOTALL)
    middle = "".join(f"(?>.*?{text})" for text in texts[1:-1])
    return re.compile(f"{texts[0]}{middle}.*{texts[-1]}", re.DOTALL)


def check_glob(pattern: str, *, source: str | None = None, key: str | None = None) -> str:
    """The pattern, when it is short enough to compile; else an InputError naming the bound."""
    if len(pattern) > MAX_GLOB_CHARS:
        raise InputError(f"a pattern of {len(pattern):,} characters in {key or 'a glob'} is "
                         f"longer than {MAX_GLOB_CHARS}", code="glob-too-long", source=source,
                         key=key)
    return pattern


@functools.lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> Glob:
    """The one compiler of globs from settings, in time linear in the pattern's length."""
    check_glob(pattern)
    parts: list[list[_Token]] = []
    current: list[_Token] = []
    closing_left = True  # once no `]` follows a `[`, none follows any later one either
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        index += 1
        if char == "*":
            parts.append(current)
            current = []
            while index < size and pattern[index] == "*":
                index += 1
        elif char == "?":
            current.append(None)
        elif char == "[" and closing_left:
            token, after = _class(pattern, index)
            if token is None:
                closing_left = False
                current.append("[")
            else:
                current.append(token)
                index = after
        else:
            current.append(char)
    parts.append(current)
    return Glob(pattern, _regex(parts))


def _class(pattern: str, start: int) -> tuple[_Class | None, int]:
    """The class that opens before `start` and the index after its `]` (as fnmatch reads it:
    a `]` first, or right after `!`, is a member)."""
    index = start
    negated = index < len(pattern) and pattern[index] == "!"
    index += negated
    close = pattern.find("]", index + 1 if index < len(pattern) else index)
    if close < 0:
        return None, start
    body = pattern[index:close]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    position = 0
    while position < len(body):
        if position + 2 < len(body) and body[position + 1] == "-":
            ranges.append((body[position], body[position + 2]))
            position += 3
        else:
            chars.add(body[position])
            position += 1
    return _Class(frozenset(chars), tuple(ranges), negated), close + 1


def first_match(patterns: Iterable[str], names: Iterable[str]) -> str | None:
    """The first pattern that matches any of the names."""
    names = tuple(names)
    for pattern in patterns:
        matches = compile_glob(pattern)
        for name in names:
            if matches(name):
                return pattern
    return None
