"""The types of every command-line value: what a command cannot use is refused before any
library call, as a usage error (exit 2) in one line.

Text is valid UTF-8 (the arguments of `read` and `command` excepted: there bytes that are not
UTF-8 are looked up as their `\\xNN` escapes, as names the index could not store are written,
so they name no skill and the attempt is audited); paths may hold any bytes a file system
allows. Numbers are whole or finite and within what the store and the code can hold; times are
ones the store can compare; database URLs are ones their driver accepts; revisions are ones
the migrations resolve.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

import click

from skillindex import text as escape
from skillindex.config import check_database_url, check_index_name
from skillindex.errors import ConfigError
from skillindex.store.revision import REVISIONS

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# A number typed on a command line is at most this long; a longer one is refused before Python
# converts it (it converts no more than 4,300 digits).
_NUMBER_CHARS = 40
_WHOLE = re.compile(r"[+-]?[0-9]+")
_SHOWN = 40


def shown(value: str) -> str:
    """A value as an error message quotes it: at most 40 characters, a byte that is not UTF-8
    as `\\xNN`."""
    if not is_utf8(value):
        value = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    value = escape.terminal(value if len(value) <= _SHOWN else value[:_SHOWN - 1] + "…")
    return f"'{value}'"


def is_utf8(value: str) -> bool:
    """Whether a value came from bytes that are UTF-8: the interpreter decodes any other byte
    of an argument or of the environment to a lone surrogate."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Text(click.ParamType[str, Any]):
    """Text that is valid UTF-8, not empty unless `empty`, at most `max_length` characters."""

    name = "text"

    def __init__(self, *, max_length: int | None = None, empty: bool = True) -> None:
        self.max_length = max_length
        self.empty = empty

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = value if isinstance(value, str) else str(value)
        if not is_utf8(text):
            self.fail(f"{shown(text)} holds bytes that are not UTF-8", param, ctx)
        if not self.empty and not text.strip():
            self.fail("must not be empty", param, ctx)
        if self.max_length is not None and len(text) > self.max_length:
            self.fail(f"must be at most {self.max_length:,} characters, not {len(text):,}",
                      param, ctx)
        return text


class HeadHash(Text):
    """The head hash `audit verify` prints: 64 hexadecimal digits (any case, spaces around)."""

    name = "hash"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx).strip().lower()
        if not re.fullmatch(r"[0-9a-f]{64}", text):
            self.fail(f"{shown(text[:80])} is not a head hash: give the 64 hexadecimal digits "
                      "`skillindex audit verify` printed", param, ctx)
        return text


class LookupText(click.ParamType[str, Any]):
    """Text a disclosure looks up and audits as given: bytes that are not UTF-8 are kept (the
    lookup matches them as their `\\xNN` escapes, so they name no skill, and the refusal is
    audited); only its length is bounded."""

    name = "text"

    def __init__(self, *, max_length: int) -> None:
        self.max_length = max_length

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = value if isinstance(value, str) else str(value)
        if len(text) > self.max_length:
            self.fail(f"must be at most {self.max_length:,} characters, not {len(text):,}",
                      param, ctx)
        return text


class Integer(click.IntRange):
    """A whole number from `low` to `high`, typed as digits (a sign allowed)."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__(min=low, max=high)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return super().convert(value, param, ctx)
        text = str(value).strip()
        if not _WHOLE.fullmatch(text) or len(text) > _NUMBER_CHARS:
            self.fail(f"{shown(str(value))} is not a whole number from {self.min} to "
                      f"{self.max}", param, ctx)
        return super().convert(int(text), param, ctx)


class Number(click.FloatRange):
    """A finite number from `low` to `high` (infinity and NaN are refused)."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__(min=low, max=high)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        text = str(value).strip()
        try:
            number = float(text) if len(text) <= _NUMBER_CHARS else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            self.fail(f"{shown(str(value))} is not a number from {self.min:g} to "
                      f"{self.max:g}", param, ctx)
        return super().convert(number, param, ctx)


class Time(click.ParamType[str, Any]):
    """An ISO 8601 date or time (UTC if it names no zone) that the store can compare: one whose
    UTC instant lies from 0001-01-01 to 9999-12-31. Given on as ISO text in UTC."""

    name = "iso"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text) if is_utf8(text) else None
        except ValueError:
            moment = None
        if moment is None:
            self.fail(f"{shown(str(value))} is not an ISO 8601 date or time such as 2026-05-01 "
                      "or 2026-05-01T12:00:00+02:00", param, ctx)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            instant = moment.astimezone(UTC)
        except OverflowError:
            self.fail(f"{shown(text)} is before 0001-01-01 or after 9999-12-31 in UTC",
                      param, ctx)
        return instant.isoformat()


class Window(click.ParamType[str, Any]):
    """The start of a window of time: an ISO 8601 date or time, or a duration back from now
    (`30d`, `12h`), whose instant the store can compare and count whole days from (from
    0001-01-02 to 9999-12-30 in UTC).
    Given on as typed; the library reads it again at its own now."""

    name = "iso|duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = Text(max_length=_SHOWN * 4).convert(value, param, ctx)
        from skillindex.query.usage import window_start  # noqa: PLC0415 (start-up stays light)

        try:
            window_start(text, datetime.now(UTC)).astimezone(UTC)
        except ConfigError as exc:
            self.fail(exc.message, param, ctx)
        except (OverflowError, ValueError):
            self.fail(f"{shown(text)} starts before 0001-01-01 or after 9999-12-31 in UTC",
                      param, ctx)
        return text


class DatabaseURL(click.ParamType[str, Any]):
    """A database URL whose port and query values its driver accepts, or a SQLite file path."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("must be a database URL or a file path, not empty", param, ctx)
        try:
            check_database_url(text)
        except ConfigError as exc:
            self.fail(exc.message, param, ctx)
        return text


class IndexName(click.ParamType[str, Any]):
    """The name of an index inside a shared database: what the store keeps of it."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = Text().convert(value, param, ctx)
        try:
            return check_index_name(text)
        except ConfigError as exc:
            self.fail(exc.message, param, ctx)


_RELATIVE = re.compile(r"(?P<base>[0-9A-Za-z_]*?)(?P<step>[+-][0-9]{1,4})?")


class Revision(click.ParamType[str, Any]):
    """A migration revision the migrations resolve: `head`, `base`, a revision id (or the start
    of one), `-N` / `+N` steps from the database's revision, or `REVISION±N` within the
    history."""

    name = "revision"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value).strip()
        match = _RELATIVE.fullmatch(text) if is_utf8(text) and text else None
        position = None if match is None else self._position(match.group("base"))
        step = 0 if match is None or match.group("step") is None else int(match.group("step"))
        if match is None or (match.group("base") and position is None):
            self.fail(f"cannot migrate to {shown(str(value))}: no such revision (revisions: "
                      f"{', '.join(REVISIONS)}, head, base, -N or +N steps, or REVISION-N)",
                      param, ctx)
        if position is not None and not 0 <= position + step <= len(REVISIONS):
            self.fail(f"cannot migrate to {shown(text)}: it goes past the history (base, "
                      f"{len(REVISIONS)} revisions, head)", param, ctx)
        return text

    @staticmethod
    def _position(base: str) -> int | None:
        """Where a named revision sits: base 0, the first revision 1, head the last."""
        if not base:
            return None
        if base == "base":
            return 0
        if base in ("head", "heads"):
            return len(REVISIONS)
        starting = [number for number, revision in enumerate(REVISIONS, start=1)
                    if revision.startswith(base)]
        return starting[0] if len(starting) == 1 else None


class Listen(click.ParamType[tuple[str, int], Any]):
    """`HOST:PORT`, `:PORT` or `PORT`; the host defaults to 127.0.0.1 (this machine only)."""

    name = "host:port"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        text = Text().convert(value, param, ctx)
        host, colon, port = text.rpartition(":")
        if not colon:
            host, port = "", text
        host = host.strip("[]") or "127.0.0.1"
        if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
            self.fail(f"{shown(text)} is not HOST:PORT (a port from 1 to 65535)", param, ctx)
        return host, int(port)


class FilePath(click.Path):
    """A file system path: any bytes a file system allows (a path is not text)."""


def path(*, dir_okay: bool = True, file_okay: bool = True, exists: bool = False) -> FilePath:
    return FilePath(dir_okay=dir_okay, file_okay=file_okay, exists=exists)


# What each kind of value is, once, for every command.
TEXT = Text(max_length=100_000)
NAME = Text(max_length=1_000)  # a skill's name, a finding's code: far longer than any is
SESSION = Text(max_length=1_000)
ROLE = Text(max_length=63, empty=False)  # PostgreSQL keeps 63 bytes of a name
LOOKUP = LookupText(max_length=100_000)
COUNT = Integer(0, INT32_MAX)  # how many rows to show
PAGE = Integer(1, INT32_MAX)
BYTES = Integer(0, INT64_MAX)
ID = Integer(0, INT64_MAX)  # a row's id
CHARS = Integer(0, INT64_MAX)
# A budget of 2% of the window at 4 characters a token: the window is a count of tokens no
# model comes near, whose budget any integer holds exactly.
TOKENS = Integer(1, 2**53)
JOBS = Integer(1, 256)
SHARE = Number(0.0, 1.0)  # a recall or a rate
MILLISECONDS = Integer(10, 3_600_000)  # up to an hour
TIME = Time()
WINDOW = Window()
DATABASE = DatabaseURL()
INDEX = IndexName()
REVISION = Revision()
LISTEN = Listen()
HEAD = HeadHash(max_length=1_000)


def seconds(low: float, high: float) -> Number:
    return Number(low, high)


# The kinds of type a parameter may have: these, or a fixed set of words (click.Choice).
KINDS = (Text, LookupText, Integer, Number, Time, Window, DatabaseURL, IndexName, Revision, Listen,
         FilePath, click.Choice)
