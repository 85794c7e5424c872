"""What every command shares: options, the one error style, JSON and table output."""

from __future__ import annotations

import difflib
import errno
import importlib
import json
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat
from json.encoder import encode_basestring as _encode_string  # the C one, ensure_ascii=False
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from skillindex import __version__
from skillindex import text as escape
from skillindex.cli import params
from skillindex.errors import EXIT_ERROR, EXIT_OK, ReadOnlyIndexWarning, SkillIndexError

if TYPE_CHECKING:  # typing only, without importing SQLAlchemy at start-up
    from skillindex.api import SkillIndex

PROG = "skillindex"


@dataclass(slots=True)
class Options:
    config: str | None
    db: str | None
    cwd: str | None
    index: str | None
    json: bool
    debug: bool

    def open(self, *, create: bool = False) -> SkillIndex:
        """The index; a SQLite file that does not exist yet is created only with `create`."""
        from skillindex.api import SkillIndex  # noqa: PLC0415

        return SkillIndex.open(self.config, db=self.db, cwd=self.cwd, index=self.index,
                               create=create)


def error_line(message: str) -> str:
    """The one shape of every error the user sees: one line, prefixed with the program, with
    what it quotes (names, paths) shown escaped."""
    first, *rest = str(message).strip().splitlines() or [""]
    return f"{PROG}: error: {escape.terminal(first)}" + (" …" if rest else "")


def echo(line: str, *, err: bool = False) -> None:
    """Print one line of human output; whatever it quotes from disk or the store (names, paths,
    messages) is shown escaped, so it can neither steer the terminal nor start a line."""
    click.echo(escape.terminal(line), err=err)


def fail(ctx: click.Context, message: str, code: int) -> NoReturn:
    click.echo(error_line(message), err=True)
    ctx.exit(code)


def _usage_line(exc: click.ClickException) -> str:
    message = exc.format_message().strip().rstrip(".")
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see `{ctx.command_path} --help`)"
    return error_line(message)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is as Ctrl-C is: a reindex rolls back its one
    transaction and releases its lock, a watch stops, and the exit code is 143."""


@contextmanager
def _terminated_as_interrupted() -> Iterator[None]:
    """While a command runs, SIGTERM (a service stopped, a container shut down) unwinds it as
    SIGINT does, instead of ending the process where it stands."""
    def terminate(_signal: int, _frame: object) -> None:
        raise Terminated

    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield  # a host that handles SIGTERM itself keeps its handler
        return
    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def _notes() -> Iterator[None]:
    """What the library warns of that the user should know (an index opened read-only) as one
    `skillindex: note:` line on stderr, once per message; other warnings as Python shows them."""
    shown: set[str] = set()
    original = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if not issubclass(category, ReadOnlyIndexWarning):
            original(message, category, filename, lineno, file, line)
        elif str(message) not in shown:
            shown.add(str(message))
            echo(f"{PROG}: note: {message}", err=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ReadOnlyIndexWarning)
        warnings.showwarning = show
        yield


def _is_broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError) and exc.errno == errno.EPIPE)


def _silence_stdout() -> None:
    """After the reader of our output went away: nothing more reaches it, not even a flush.

    The standard streams are pointed at /dev/null, so the interpreter's final flush of what is
    still buffered does not fail again with a second broken pipe.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
            continue
    os.close(devnull)


def _summary(command: click.Command) -> str:
    """The first paragraph of the help, whole: click would cut it at its width or at "e.g."."""
    if command.short_help:
        return command.short_help
    first = (command.help or "").strip().split("\n\n", 1)[0]
    return " ".join(first.split()).rstrip(".")


class _Command(click.Command):
    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self)


class _Group(click.Group):
    """Turns every error into one line on stderr and the documented exit code.

    Click's own usage errors are reported in the same style as the library's errors, and a
    reader that stops reading early (`skillindex list | head -1`) ends the command silently
    with exit 0, as git, ruff and ripgrep do.
    """

    command_class = _Command
    group_class: type[click.Group] | type[type] = type  # subgroups are of this class too

    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            with _notes(), _terminated_as_interrupted():
                code = super().main(args, prog_name, complete_var, standalone_mode=False,
                                    **extra)
        except click.ClickException as exc:
            click.echo(_usage_line(exc), err=True)
            code = exc.exit_code
        except click.Abort:
            click.echo(f"{PROG}: interrupted", err=True)
            code = 130
        except OSError as exc:
            if not _is_broken_pipe(exc):
                raise
            _silence_stdout()
            code = EXIT_OK
        if not isinstance(code, int):
            code = EXIT_OK
        if not standalone_mode:
            return code
        sys.exit(code)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            # As a misspelled option is answered: the nearest command, if one is near.
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if close:
                raise click.UsageError(f"no such command {name!r}; did you mean {close[0]!r}?",
                                       ctx)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillIndexError as exc:
            if _debug(ctx):
                traceback.print_exc()
            # Our own messages are one line but for what they quote: a name or path holding a
            # newline stays whole, escaped, rather than cut at its newline.
            fail(ctx, escape.terminal(exc.message), exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt as exc:
            click.echo(f"{PROG}: {'terminated' if isinstance(exc, Terminated) else 'interrupted'}",
                       err=True)
            ctx.exit(128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT))
        except OSError as exc:
            if _is_broken_pipe(exc):
                _silence_stdout()
                ctx.exit(EXIT_OK)
            if _debug(ctx):
                raise
            fail(ctx, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""),
                 EXIT_ERROR)
        except Exception as exc:
            if _debug(ctx):
                raise
            fail(ctx, f"internal error: {type(exc).__name__}: {exc} (--debug shows where)",
                 EXIT_ERROR)


# The module that defines each command. A command's module is imported when the command runs
# (or help lists it), so `skillindex list` loads neither the lock code nor the server's.
COMMAND_MODULES = {
    "advisories": "advisories", "audit": "disclose", "candidates": "index",
    "catalog": "catalog", "check": "check", "command": "disclose", "context": "index",
    "db": "db", "eval": "evals", "explain": "index", "hosts": "hosts",
    "list": "index", "lock": "trust", "publish": "publish",
    "read": "disclose", "reindex": "index", "rejections": "index", "risks": "trust",
    "roots": "index", "search": "search", "serve": "serve", "trust": "trust",
    "usage": "usage", "report": "usage", "verify": "disclose", "watch": "watch",
}


class _Main(_Group):
    """The top-level group, whose commands are loaded on demand (`COMMAND_MODULES`)."""

    group_class = _Group

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES.keys() | self.commands.keys())

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:  # a first run: the commands and examples, not a usage error
            click.echo(ctx.get_help())
            ctx.exit(EXIT_OK)
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"skillindex.cli.{module}")
        return super().get_command(ctx, cmd_name)


def _debug(ctx: click.Context) -> bool:
    return bool(ctx.params.get("debug")) or "--debug" in sys.argv


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def options_of(ctx: click.Context, as_json: bool = False) -> Options:
    options = ctx.find_object(Options)
    assert options is not None
    if as_json:
        options.json = True
    return options


def print_json(value: object) -> None:
    """JSON keeps every string exact; characters a terminal must not receive are `\\u` escapes."""
    click.echo(json_text(value))


def print_json_line(value: object) -> None:
    """One JSON value on one line, escaped as `print_json` escapes: a stream's record."""
    click.echo(escape.json_safe(json.dumps(value, ensure_ascii=False)))


def print_json_array(items: Iterable[object]) -> None:
    """A JSON array written as its items come, laid out as `print_json` lays out a list, so
    that a long listing never has to be held whole (it is written some 64 KB at a time)."""
    parts: list[str] = []
    size, written = 0, False
    for item in items:
        part = (",\n  " if parts or written else "[\n  ") + json_text(item, "  ")
        parts.append(part)
        size += len(part)
        if size >= 1 << 16:
            click.echo("".join(parts), nl=False)
            parts.clear()
            size, written = 0, True
    click.echo("".join(parts) + ("\n]" if parts or written else "[]"))


def json_text(value: object, margin: str = "") -> str:
    """`value` as `json.dumps(value, indent=2, ensure_ascii=False)` lays it out, every line
    after the first begun by `margin`, with the characters a terminal must not receive as
    `\\u` escapes (`text.json_safe`). The same text, built with the C string encoder: an
    indented dump runs the pure-Python encoder, which cost most of a long listing's time."""
    kind = value.__class__
    if kind is str:
        return _string(value)  # type: ignore[arg-type]
    if kind is dict:
        return _object(value, margin)  # type: ignore[arg-type]
    if kind is list or kind is tuple:
        return _array(value, margin)  # type: ignore[arg-type]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    # Subclasses (enums among them) as json takes them.
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        return _object(value, margin)
    if isinstance(value, list | tuple):
        return _array(value, margin)
    return _dumped(value, margin)  # floats; what JSON cannot take raises TypeError, as json's


def _string(value: str) -> str:
    encoded: str = _encode_string(value)
    return encoded if encoded.isprintable() else escape.json_safe(encoded)


_KEYS: dict[str, str] = {}  # the text of a key used again and again, with its colon


def _object(value: dict[Any, Any], margin: str) -> str:
    if not value:
        return "{}"
    inner = margin + "  "
    parts: list[str] = []
    add = parts.append
    for key, item in value.items():
        shown = _KEYS.get(key)
        if shown is None:
            if not isinstance(key, str):
                return _dumped(value, margin)  # json's own text for other keys
            shown = _string(key) + ": "
            if len(_KEYS) < 1_000:
                _KEYS[key] = shown
        kind = item.__class__
        if kind is str:
            encoded = _encode_string(item)
            add(shown + (encoded if encoded.isprintable() else escape.json_safe(encoded)))
        elif item is None:
            add(shown + "null")
        elif kind is bool:
            add(shown + ("true" if item else "false"))
        else:
            add(shown + json_text(item, inner))
    return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + margin + "}"


def _array(value: list[Any] | tuple[Any, ...], margin: str) -> str:
    if not value:
        return "[]"
    inner = margin + "  "
    return ("[\n" + inner + (",\n" + inner).join([json_text(item, inner) for item in value])
            + "\n" + margin + "]")


def _dumped(value: object, margin: str) -> str:
    return escape.json_safe(json.dumps(value, indent=2, ensure_ascii=False)).replace(
        "\n", "\n" + margin)


# What `check`, `risks` and `rejections` print their findings as.
FORMATS = ("text", "json", "sarif", "github")
format_option = click.option(
    "--format", "output", type=click.Choice(FORMATS), default="text", show_default=True,
    help="text for people, json, sarif (2.1.0, for code scanning) or github (workflow "
    "annotations).")


session_option = click.option("--session", "session_id", metavar="ID", type=params.SESSION,
                              help="The agent session this belongs to (kept in the audit log).")


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", metavar="PATH", type=params.path(),
              help="Settings file (else $SKILLINDEX_CONFIG, else "
              "$XDG_CONFIG_HOME/skillindex/config.toml).")
@click.option("--db", metavar="URL", type=params.DATABASE,
              help="Database URL or SQLite file (else $SKILLINDEX_DB, "
              "else $XDG_DATA_HOME/skillindex/index.sqlite).")
@click.option("--cwd", metavar="DIR", type=params.path(file_okay=False, exists=True),
              help="Working directory whose project roots apply (default: the current one).")
@click.option("--index", "index", metavar="NAME", type=params.INDEX,
              help="Index name inside a shared database.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (any command).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(__version__, prog_name=PROG)
@click.pass_context
def cli(ctx: click.Context, config: str | None, db: str | None, cwd: str | None,
        index: str | None, as_json: bool, debug: bool) -> None:
    """A persistent, verified, audited catalog of Agent Skills.

    \b
    Examples:
      skillindex reindex              index the skill folders of this directory
      skillindex list                 the skills the catalog is built from
      skillindex catalog              the catalog text the model sees
      skillindex read skill://pdf     a skill's body, verified and audited
    """
    ctx.obj = Options(config, db, cwd, index, as_json, debug)
def count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    if rows:
        column_table(headers, list(zip(*rows, strict=True)))


def column_table(headers: Sequence[str], columns: Sequence[Sequence[object]]) -> None:
    """A table given a column at a time, each cell padded to its column's width; the last
    column is not padded. For tens of thousands of rows every step runs over a whole column
    in C: a Python step per cell costs more than everything else `list` does."""
    if not columns or not columns[0]:
        return
    texts = [cast("Sequence[str]", column) if set(map(type, column)) == {str}
             else list(map(str, column)) for column in columns]
    # A column whose cells are all printable (the common case, decided at once) needs no
    # escaping cell by cell.
    texts = [column if " ".join(column).isprintable() else list(map(escape.terminal, column))
             for column in texts]
    widths = [max(len(header), *map(len, column))
              for header, column in zip(headers[:-1], texts, strict=False)]
    line = "  ".join([*(f"{{:<{width}}}" for width in widths), "{}"])
    click.echo(line.format(*(header.upper() for header in headers)).rstrip())
    padded = [*(list(map(str.ljust, column, repeat(width)))
                for width, column in zip(widths, texts, strict=False)), texts[-1]]
    lines = list(map("  ".join, zip(*padded, strict=True)))
    if not all(texts[-1]):  # an empty last cell leaves the padding before it
        lines = [text.rstrip() for text in lines]
    # A thousand lines a write: one write a line costs more than formatting the line.
    for start in range(0, len(lines), 1000):
        click.echo("\n".join(lines[start:start + 1000]))


def finding_codes(candidate: Any) -> str:
    """The codes of a candidate's findings, errors first: what a table row has room for."""
    codes = sorted({(f.severity != "error", f.code) for f in candidate.findings})
    return ",".join(code for _, code in codes) or "-"


def candidate_table(candidates: Sequence[Any]) -> None:
    table(["name", "status", "scope", "provider", "prec", "findings", "path"],
           [[c.name or "-", c.status, c.scope, c.provider, c.precedence, finding_codes(c),
             c.path] for c in candidates])
