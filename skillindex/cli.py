"""The `skillindex` command: parses options, makes one library call, prints the result."""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from skillindex import __version__
from skillindex.errors import EXIT_ERROR, SkillIndexError

if False:  # pragma: no cover - typing only, without importing SQLAlchemy at start-up
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


def _fail(ctx: click.Context, message: str, code: int) -> NoReturn:
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
            _fail(ctx, f"error: {exc.message}", exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            _fail(ctx, "interrupted", 130)
        except Exception as exc:
            if _debug(ctx):
                raise
            _fail(ctx, f"internal error: {type(exc).__name__}: {exc} (--debug shows where)",
                  EXIT_ERROR)


def _debug(ctx: click.Context) -> bool:
    return bool(ctx.params.get("debug")) or "--debug" in sys.argv


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _options(ctx: click.Context, as_json: bool = False) -> Options:
    options = ctx.find_object(Options)
    assert options is not None
    if as_json:
        options.json = True
    return options


def _print_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


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


class _Progress:
    """A one-line counter on stderr, redrawn at most ten times a second."""

    def __init__(self) -> None:
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, expected: int | None, root: str) -> None:
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        total = f"/{expected}" if expected else ""
        line = f"indexing {done}{total} skills  {root}"
        click.echo(f"\r{line[:100]:<100}", nl=False, err=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            click.echo(f"\r{'':<100}\r", nl=False, err=True)


@cli.command()
@click.option("--all", "all_roots", is_flag=True,
              help="Rescan every root the index knows, not only those of this directory.")
@click.option("--no-wait", is_flag=True,
              help="Fail at once if another process is reindexing this index (default: wait "
              "up to the reindex_timeout setting).")
@json_option
@click.pass_context
def reindex(ctx: click.Context, all_roots: bool, no_wait: bool, as_json: bool) -> None:
    """Scan the roots and update the index (only changed files are read)."""
    options = _options(ctx, as_json)
    progress = _Progress() if sys.stderr.isatty() and not options.json else None
    with options.open() as index:

        def waiting(holder: str) -> None:
            click.echo(f"skillindex: index {index.index_name!r} is being reindexed by {holder}; "
                       f"waiting up to {index.settings.reindex_timeout:g} s", err=True)

        try:
            report = index.reindex(all_roots=all_roots, progress=progress, wait=not no_wait,
                                   on_wait=waiting)
        finally:
            if progress is not None:
                progress.clear()
    if options.json:
        _print_json(report.as_dict())
        return
    click.echo(
        f"indexed {_count(report.seen, 'skill')} in {_count(report.roots, 'root')}: "
        f"{report.added} added, "
        f"{report.changed} changed, {report.unchanged} unchanged, {report.removed} removed, "
        f"{report.rejected} rejected ({report.files_read} files read, {report.duration_s:.2f} s)")
    for problem in report.problems:
        click.echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]", err=True)
    if report.seen == 0:
        click.echo("no skills found; put skills in ~/.claude/skills/<name>/SKILL.md, or list "
                   "roots in the settings file (see `skillindex roots`)")
    else:
        click.echo("`skillindex list` shows the skills in the catalog"
                   + (", `skillindex rejections` why some were rejected" if report.rejected
                      else ""))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    if not rows:
        return
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))]
    widths[-1] = 0
    click.echo("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _candidate_table(candidates: Sequence[Any]) -> None:
    _table(["name", "status", "scope", "provider", "prec", "path"],
           [[c.name or "-", c.status, c.scope, c.provider, c.precedence, c.path]
            for c in candidates])


@cli.command()
@json_option
@click.pass_context
def candidates(ctx: click.Context, as_json: bool) -> None:
    """Every skill found under the roots of this directory, accepted or rejected."""
    options = _options(ctx, as_json)
    with options.open() as index:
        found = index.candidates()
    if options.json:
        _print_json([c.as_dict() for c in found])
    elif not found:
        click.echo("no candidates indexed for this directory; run `skillindex reindex`")
    else:
        _candidate_table(found)


@cli.command()
@json_option
@click.pass_context
def rejections(ctx: click.Context, as_json: bool) -> None:
    """Rejected skills and the reasons."""
    options = _options(ctx, as_json)
    with options.open() as index:
        found = index.rejections()
    if options.json:
        _print_json([c.as_dict() for c in found])
        return
    if not found:
        click.echo("no rejected skills")
    for candidate in found:
        click.echo(f"{candidate.name or candidate.directory.name}  {candidate.path}")
        for finding in candidate.findings:
            click.echo(f"  {finding.severity:<7} {finding.code}: {finding.message}")


@cli.command()
@json_option
@click.pass_context
def roots(ctx: click.Context, as_json: bool) -> None:
    """The roots that apply to this directory, in precedence order, and what each holds."""
    options = _options(ctx, as_json)
    with options.open() as index:
        states = index.roots()
        problems = index.plan.problems
    if options.json:
        _print_json([state.as_dict() for state in states])
        return
    _table(["prec", "provider", "scope", "skills", "rejected", "state", "path"],
           [[s.spec.precedence, s.spec.provider, s.spec.scope, s.candidates, s.rejected,
             _root_state(s), s.spec.path] for s in states])
    for state in states:
        for problem in state.problems:
            click.echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]")
    for problem in problems:
        click.echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]")


def _root_state(state: Any) -> str:
    if state.spec.disabled_by:
        return "disabled"
    if not state.present:
        return "missing"
    return "indexed" if state.indexed else "not indexed"


@cli.command("list")
@json_option
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """The skills the catalog is built from (filters and collision policy applied)."""
    options = _options(ctx, as_json)
    with options.open() as index:
        resolution = index.resolution()
    if options.json:
        _print_json([winner.as_dict() for winner in resolution.winners])
    elif not resolution.winners:
        click.echo("no skills in the catalog; `skillindex candidates` shows what was found and "
                   "`skillindex explain NAME` why a skill is left out")
    else:
        _table(["name", "scope", "provider", "prec", "path"],
               [[w.name, w.candidate.scope, w.candidate.provider, w.candidate.precedence,
                 w.candidate.path] for w in resolution.winners])
    for collision in resolution.collisions:
        click.echo(f"warning: {collision.message}", err=True)


@cli.command()
@click.argument("name")
@json_option
@click.pass_context
def explain(ctx: click.Context, name: str, as_json: bool) -> None:
    """Every candidate for NAME, which one is used, and why the others are not."""
    options = _options(ctx, as_json)
    with options.open() as index:
        explanation = index.explain(name)
    if options.json:
        _print_json(explanation.as_dict())
        return
    for winner in explanation.winners:
        alias = f" as {winner.name}" if winner.name != explanation.name else ""
        click.echo(f"{explanation.name}: in the catalog{alias}: {winner.candidate.path}")
    if not explanation.winners:
        click.echo(f"{explanation.name}: not in the catalog")
    for verdict in explanation.verdicts:
        c = verdict.candidate
        click.echo(f"  {verdict.outcome:<9}  {c.precedence:>4}  {c.scope:<7}  {c.provider:<14}  "
                   f"{c.path}")
        click.echo(f"  {'':<9}  {verdict.reason}")


@cli.command()
@json_option
@click.pass_context
def context(ctx: click.Context, as_json: bool) -> None:
    """Standalone context files (`context_files`, e.g. XCSH.md) in this directory and above."""
    from skillindex.api import context_files  # noqa: PLC0415

    options = _options(ctx, as_json)
    names, found = context_files(options.config, cwd=options.cwd)
    if options.json:
        _print_json([item.as_dict() for item in found])
    elif not found:
        click.echo(f"no context files ({', '.join(names)}) in this directory or its ancestors")
    else:
        _table(["depth", "size", "sha256", "path"],
               [[f.depth, f.size, f.sha256[:16], f.path] for f in found])


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["xml", "markdown", "json"]), default="xml",
              show_default=True, help="xml = <available_skills>; markdown = a # Skills section.")
@click.option("--max-chars", type=click.IntRange(min=0), help="Character budget of the text.")
@click.option("--context-window", type=click.IntRange(min=1), metavar="TOKENS",
              help="Budget as 2% of this many tokens at 4 characters a token.")
@click.option("--no-read-tool", is_flag=True,
              help="The host has no read tool: no catalog, as in the seed system.")
@click.option("--session", metavar="ID", help="Record the publication for this session.")
@json_option
@click.pass_context
def catalog(ctx: click.Context, fmt: str, max_chars: int | None, context_window: int | None,
            no_read_tool: bool, session: str | None, as_json: bool) -> None:
    """Print the catalog the model sees, within a character budget (default 8,000)."""
    options = _options(ctx, as_json)
    if max_chars is not None and context_window is not None:
        raise click.UsageError("give --max-chars or --context-window, not both")
    tools = () if no_read_tool else ("read",)
    result = None
    if session is None:
        # A cached catalog needs neither SQLAlchemy nor a resolution: a host's start-up path.
        from skillindex.quick import cached_catalog  # noqa: PLC0415

        result = cached_catalog(options.config, db=options.db, cwd=options.cwd,
                                index=options.index, max_chars=max_chars,
                                context_window=context_window, format=fmt, tools=tools)
    if result is None:
        with options.open() as index:
            result = index.catalog(max_chars=max_chars, context_window=context_window,
                                   format=fmt, tools=tools, session=session)
    if options.json:
        _print_json(result.as_dict())
    else:
        click.echo(result.text, nl=False)
    shortened, omitted = len(result.truncated), len(result.omitted)
    if shortened or omitted:
        click.echo(f"catalog: {len(result.entries)} skills in {result.chars} of "
                   f"{result.max_chars} characters; {shortened} descriptions shortened, "
                   f"{omitted} skills omitted", err=True)


@cli.group()
def db() -> None:
    """Database schema migrations (Alembic)."""


def _migration(action: str) -> Callable[..., None]:
    def run(ctx: click.Context, revision: str | None = None) -> None:
        from skillindex.api import migrate_database  # noqa: PLC0415

        options = _options(ctx)
        current = migrate_database(action, revision, db=options.db, cwd=options.cwd)
        if options.json:
            _print_json({"revision": current})
        else:
            click.echo(current or "(empty database)")
    return run


@db.command()
@click.argument("revision", required=False, default="head")
@click.pass_context
def upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    _migration("upgrade")(ctx, revision)


@db.command()
@click.argument("revision")
@click.pass_context
def downgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database down to REVISION (`base` empties it, `-1` goes one step)."""
    _migration("downgrade")(ctx, revision)


@db.command()
@click.pass_context
def current(ctx: click.Context) -> None:
    """Print the database's migration revision."""
    _migration("current")(ctx)


session_option = click.option("--session", "session_id", metavar="ID",
                              help="The agent session this belongs to (kept in the audit log).")


@cli.command()
@click.argument("uri")
@click.option("--reason", metavar="TEXT", help="Why it is read (kept in the audit log).")
@session_option
@click.option("--max-bytes", type=click.IntRange(min=0), metavar="N",
              help="Refuse a file larger than N bytes (a file of exactly N is read).")
@json_option
@click.pass_context
def read(ctx: click.Context, uri: str, reason: str | None, session_id: str | None,
         max_bytes: int | None, as_json: bool) -> None:
    """Print a skill's body (skill://NAME) or one of its files (skill://NAME/PATH), verified."""
    options = _options(ctx, as_json)
    with options.open() as index:
        found = index.read(uri, reason=reason, session=session_id, max_bytes=max_bytes)
    if options.json:
        _print_json(found.as_dict())
    else:
        click.echo(found.data, nl=False)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@session_option
@json_option
@click.pass_context
def command(ctx: click.Context, name: str, args: tuple[str, ...], session_id: str | None,
            as_json: bool) -> None:
    """Print the message `/skill:NAME ARGS...` sends: the verified body, its path, the args."""
    options = _options(ctx, as_json)
    with options.open() as index:
        message = index.skill_command(name, args, session=session_id)
    if options.json:
        _print_json(message.as_dict())
    else:
        click.echo(message.message)


@cli.command()
@json_option
@click.pass_context
def verify(ctx: click.Context, as_json: bool) -> None:
    """Hash every indexed file again; exit 1 when a file changed, vanished or appeared."""
    options = _options(ctx, as_json)
    with options.open() as index:
        report = index.verify()
    if options.json:
        _print_json(report.as_dict())
    elif report.ok:
        click.echo(f"ok: {report.files} files of {report.skills} skills match the index")
    else:
        _table(["skill", "problem", "resource"],
               [[item.skill, item.problem, item.resource] for item in report.drift])
        click.echo(f"{len(report.drift)} files differ from the index; `skillindex reindex` "
                   "records the tree as it is now")
    if not report.ok:
        ctx.exit(EXIT_ERROR)


@cli.command()
@session_option
@click.option("--skill", metavar="NAME", help="Only events of this skill.")
@click.option("--outcome", metavar="O",
              help="Only this outcome: ok, refused, mismatch, missing, not-found, error.")
@click.option("--since", metavar="ISO", help="Only events at or after this time (UTC if no zone).")
@click.option("--levels", is_flag=True, help="Bytes disclosed per level (L1/L2/L3) per session.")
@json_option
@click.pass_context
def audit(ctx: click.Context, session_id: str | None, skill: str | None, outcome: str | None,
          since: str | None, levels: bool, as_json: bool) -> None:
    """The audit log of disclosures, oldest first."""
    options = _options(ctx, as_json)
    with options.open() as index:
        if levels:
            totals = index.audit(session=session_id, skill=skill, outcome=outcome, since=since,
                                 levels=True)
        else:
            events = index.audit(session=session_id, skill=skill, outcome=outcome, since=since)
    if levels:
        if options.json:
            _print_json([row.as_dict() for row in totals])
            return
        _table(["session", "l1 bytes", "l2 bytes", "l3 bytes", "events"],
               [[row.session or "-", row.l1_bytes, row.l2_bytes, row.l3_bytes, row.events]
                for row in totals])
        return
    if options.json:
        _print_json([event.as_dict() for event in events])
    elif not events:
        click.echo("no audit events")
    else:
        _table(["time", "session", "event", "outcome", "level", "bytes", "skill", "resource"],
               [[e.time.isoformat(timespec="seconds"), e.session or "-", e.event, e.outcome,
                 e.level, e.bytes, e.skill or "-", e.resource or "-"] for e in events])


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="skillindex")
