"""What every command shares: options, the one error style, JSON and table output."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import click

from skillindex import __version__
from skillindex.errors import EXIT_ERROR, SkillIndexError

if TYPE_CHECKING:  # typing only, without importing SQLAlchemy at start-up
    from skillindex.api import SkillIndex


@dataclass(slots=True)
class Options:
    config: str | None
    db: str | None
    cwd: str | None
    index: str | None
    json: bool
    debug: bool

    def open(self) -> SkillIndex:
        from skillindex.api import SkillIndex  # noqa: PLC0415

        return SkillIndex.open(self.config, db=self.db, cwd=self.cwd, index=self.index)


def fail(ctx: click.Context, message: str, code: int) -> NoReturn:
    click.echo(f"skillindex: {message}", err=True)
    ctx.exit(code)


class _Group(click.Group):
    """Turns library errors into one line on stderr and the documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillIndexError as exc:
            if _debug(ctx):
                traceback.print_exc()
            fail(ctx, f"error: {exc.message}", exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            fail(ctx, "interrupted", 130)
        except Exception as exc:
            if _debug(ctx):
                raise
            fail(ctx, f"internal error: {type(exc).__name__}: {exc} (--debug shows where)",
                  EXIT_ERROR)


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
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


session_option = click.option("--session", "session_id", metavar="ID",
                              help="The agent session this belongs to (kept in the audit log).")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", metavar="PATH", help="Settings file (else $SKILLINDEX_CONFIG, else "
              "$XDG_CONFIG_HOME/skillindex/config.toml).")
@click.option("--db", metavar="URL", help="Database URL or SQLite file (else $SKILLINDEX_DB, "
              "else $XDG_DATA_HOME/skillindex/index.sqlite).")
@click.option("--cwd", metavar="DIR", type=click.Path(file_okay=False, exists=True),
              help="Working directory whose project roots apply (default: the current one).")
@click.option("--index", "index", metavar="NAME", help="Index name inside a shared database.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (any command).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(__version__, prog_name="skillindex")
@click.pass_context
def cli(ctx: click.Context, config: str | None, db: str | None, cwd: str | None,
        index: str | None, as_json: bool, debug: bool) -> None:
    """A persistent, verified, audited catalog of Agent Skills."""
    ctx.obj = Options(config, db, cwd, index, as_json, debug)


def count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    if not rows:
        return
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))]
    widths[-1] = 0
    click.echo("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def candidate_table(candidates: Sequence[Any]) -> None:
    table(["name", "status", "scope", "provider", "prec", "path"],
           [[c.name or "-", c.status, c.scope, c.provider, c.precedence, c.path]
            for c in candidates])
