"""Disclosure and its audit: read, command, verify, audit."""

from __future__ import annotations

import shlex
import sys

import click

from skillindex.cli import params
from skillindex.cli.common import (
    Options,
    cli,
    count,
    echo,
    json_option,
    options_of,
    print_json,
    print_json_line,
    session_option,
    table,
)
from skillindex.errors import EXIT_ERROR
from skillindex.model import (
    AUDIT_OUTCOMES,
    AuditEvent,
    AuditListing,
    ChainReport,
    SessionLevels,
)


@cli.command()
@click.argument("uri", type=params.LOOKUP)
@click.option("--reason", metavar="TEXT", type=params.TEXT,
              help="Why it is read (kept in the audit log).")
@session_option
@click.option("--max-bytes", type=params.BYTES, metavar="N",
              help="Refuse a file larger than N bytes (a file of exactly N is read).")
@json_option
@click.pass_context
def read(ctx: click.Context, uri: str, reason: str | None, session_id: str | None,
         max_bytes: int | None, as_json: bool) -> None:
    """Print a skill's body or one of its files, verified and audited.

    skill://NAME is the body of the skill's SKILL.md, skill://NAME/PATH a file inside the
    skill; the bytes are returned only if they are the ones the last reindex recorded.

    \b
    Examples:
      skillindex read skill://pdf --reason "user asked for a PDF summary"
      skillindex read skill://pdf/references/forms.md --session s-42 --max-bytes 65536
      skillindex --json read skill://pdf
    """
    options = options_of(ctx, as_json)
    # A migrated SQLite index answers without SQLAlchemy: a host pays this start-up per read.
    from skillindex.query import oneshot  # noqa: PLC0415

    found = oneshot.read(options.config, db=options.db, cwd=options.cwd, index=options.index,
                         uri=uri, reason=reason, session=session_id, max_bytes=max_bytes)
    if found is None:
        with options.open() as index:
            found = index.read(uri, reason=reason, session=session_id, max_bytes=max_bytes)
    if options.json:
        print_json(found.as_dict())
    else:
        click.echo(found.data, nl=False)


# Everything after NAME is the user's (`--json` included): the command's own options come first.
@cli.command(context_settings={"ignore_unknown_options": True,
                               "allow_interspersed_args": False})
@click.argument("name", type=params.LOOKUP)
@click.argument("args", nargs=-1, type=params.TEXT)
@session_option
@json_option
@click.pass_context
def command(ctx: click.Context, name: str, args: tuple[str, ...], session_id: str | None,
            as_json: bool) -> None:
    """Print the message `/skill:NAME ARGS...` sends.

    The message is the verified body, the path of its SKILL.md and the arguments. Everything
    after NAME is an argument, options included: give --session and --json before NAME.

    \b
    Examples:
      skillindex command pdf summarize report.pdf
      skillindex command --json --session s-42 deploy fix --dry-run
    """
    options = options_of(ctx, as_json)
    from skillindex.query import oneshot  # noqa: PLC0415

    message = oneshot.skill_command(options.config, db=options.db, cwd=options.cwd,
                                    index=options.index, name=name, args=args,
                                    session=session_id)
    if message is None:
        with options.open() as index:
            message = index.skill_command(name, args, session=session_id)
    if options.json:
        print_json(message.as_dict())
    else:
        click.echo(message.message)


@cli.command()
@click.option("--lock", "lock_path", metavar="PATH", type=params.path(dir_okay=False),
              help="Also compare the catalog with this skills-lock.json (skills added, removed "
              "or changed since it was written).")
@click.option("--jobs", "-j", type=params.JOBS, metavar="N",
              help="Processes that hash the files, once there are more than 1,000 skills "
              "(default: one per core).")
@json_option
@click.pass_context
def verify(ctx: click.Context, lock_path: str | None, jobs: int | None,
           as_json: bool) -> None:
    """Hash every indexed file again and report drift.

    Exit 1 when a file changed, vanished or appeared since the last reindex, or, with
    --lock, when the catalog differs from the lock file. On a terminal, a line on stderr
    shows how many skills are verified so far.

    \b
    Examples:
      skillindex verify
      skillindex --json verify
      skillindex verify --lock skills-lock.json   # what a CI job runs
      skillindex verify --jobs 1                  # no worker processes
    """
    options = options_of(ctx, as_json)
    from skillindex.cli.progress import Progress  # noqa: PLC0415  (this command's alone)

    progress = (Progress(verb="verifying") if sys.stderr.isatty() and not options.json
                else None)
    with options.open() as index:
        report = index.verify(progress=progress, jobs=jobs)
        if progress is not None:
            progress.clear()
        locked = None if lock_path is None else index.verify_lock(lock_path)
    ok = report.ok and not locked
    if options.json:
        print_json({**report.as_dict(), "ok": ok}
                   | ({} if locked is None else {"lock": [item.as_dict() for item in locked]}))
    elif report.ok:
        echo(f"ok: {count(report.files, 'file')} of {count(report.skills, 'skill')} match the "
             "index")
    else:
        table(["skill", "problem", "resource"],
               [[item.skill, item.problem, item.resource] for item in report.drift])
        echo(f"{count(len(report.drift), 'file')} differ from the index; `skillindex reindex` "
             "records the tree as it is now")
    if locked is not None and not options.json:
        if locked:
            table(["skill", "lock", "locked hash", "current hash"],
                  [[item.skill, item.problem, item.locked or "-", item.current or "-"]
                   for item in locked])
            for item in locked:
                if item.reason is not None:
                    echo(f"{item.skill}: not hashed: {item.reason}" if item.problem == "unhashed"
                         else f"{item.skill}: {item.reason}")
            echo(f"{count(len(locked), 'skill')} differ from {lock_path}; `skillindex lock "
                 f"--output {shlex.quote(str(lock_path))}` records them as they are now")
        else:
            echo(f"ok: the catalog matches {lock_path}")
    if not ok:
        ctx.exit(EXIT_ERROR)


@cli.group(invoke_without_command=True)
@session_option
@click.option("--skill", metavar="NAME", type=params.NAME, help="Only events of this skill.")
@click.option("--outcome", type=click.Choice(AUDIT_OUTCOMES), help="Only this outcome.")
@click.option("--since", metavar="ISO", type=params.TIME,
              help="Only events at or after this time (UTC if no zone).")
@click.option("--levels", is_flag=True, help="Bytes disclosed per level (L1/L2/L3) per session.")
@click.option("--follow", "-f", is_flag=True,
              help="Print events as they are appended, until interrupted (from the next one, "
              "from --since, or after --after-id).")
@click.option("--after-id", type=params.ID, metavar="ID",
              help="With --follow: start after this event id (the last one a reader printed).")
@click.option("--interval", type=params.seconds(0.05, 60), default=0.25,
              show_default=True, metavar="SECONDS",
              help="With --follow: how long to wait between looks at a log with nothing new.")
@json_option
@click.pass_context
def audit(ctx: click.Context, session_id: str | None, skill: str | None, outcome: str | None,
          since: str | None, levels: bool, follow: bool, after_id: int | None,
          interval: float, as_json: bool) -> None:
    """Print the audit log of disclosures, oldest first; `audit verify` checks its chain.

    With --follow, events are printed as they are appended, one line each (with --json one
    JSON object a line, with stable keys); every line carries the event's id, and
    `--after-id ID` resumes after it without losing or repeating an event.

    \b
    Examples:
      skillindex audit --session s-42
      skillindex audit --outcome refused --since 2026-12-01
      skillindex audit --levels
      skillindex audit --follow --json >> skills-audit.jsonl
      skillindex audit --follow --after-id 1234
      skillindex audit verify
    """
    if ctx.invoked_subcommand is not None:
        return
    options = options_of(ctx, as_json)
    if follow:
        if levels:
            raise click.UsageError("--levels and --follow do not go together")
        _follow(options, after_id=after_id, since=since, interval=interval,
                session=session_id, skill=skill, outcome=outcome)
        return
    if after_id is not None:
        raise click.UsageError("--after-id goes with --follow")
    from skillindex.query import oneshot  # noqa: PLC0415

    found = oneshot.audit(options.config, db=options.db, cwd=options.cwd, index=options.index,
                          session=session_id, skill=skill, outcome=outcome, since=since,
                          levels=levels)
    if found is None:
        with options.open() as index:
            if levels:
                found = index.audit(session=session_id, skill=skill, outcome=outcome,
                                    since=since, levels=True)
            else:
                found = index.audit(session=session_id, skill=skill, outcome=outcome,
                                    since=since)
    totals = [row for row in found if isinstance(row, SessionLevels)]
    events = [row for row in found if isinstance(row, AuditEvent)]
    skipped = found.skipped if isinstance(found, AuditListing) else ()
    if skipped:
        echo(f"{count(len(skipped), 'event')} not listed: a field does not parse (event "
             f"{', '.join(map(str, skipped[:5]))}{', ...' if len(skipped) > 5 else ''}); "
             "`skillindex audit verify` checks the log", err=True)
    if levels:
        if options.json:
            print_json([row.as_dict() for row in totals])
            return
        table(["session", "l1 bytes", "l2 bytes", "l3 bytes", "events"],
               [[row.session or "-", row.l1_bytes, row.l2_bytes, row.l3_bytes, row.events]
                for row in totals])
        return
    if options.json:
        print_json([event.as_dict() for event in events])
    elif not events:
        echo("no audit events")
    else:
        # Who a server authenticated, when any event says: a local log has no such column.
        principals = any(e.principal is not None for e in events)
        table(["time", *(["principal"] if principals else []), "session", "event", "outcome",
               "level", "bytes", "skill", "resource"],
              [[e.time.isoformat(timespec="seconds"),
                *([e.principal or "-"] if principals else []), e.session or "-", e.event,
                e.outcome, e.level, e.bytes, e.skill or "-", e.resource or "-"]
               for e in events])


def _follow(options: Options, *, after_id: int | None, since: str | None, interval: float,
            session: str | None, skill: str | None, outcome: str | None) -> None:
    with options.open() as index:
        for found in index.follow_audit(after=after_id, since=since, interval=interval,
                                        session=session, skill=skill, outcome=outcome,
                                        skipped=_unlisted):
            if options.json:
                print_json_line(found.as_dict())
                continue
            event = found.event
            echo(f"{found.id}  {event.time.isoformat(timespec='milliseconds')}  "
                 f"{event.session or '-'}  {event.event}  {event.outcome}  L{event.level}  "
                 f"{event.bytes}  {event.skill or '-'}  {event.resource or '-'}")


def _unlisted(event_id: int) -> None:
    echo(f"event {event_id} not listed: a field does not parse; `skillindex audit verify` "
         "checks the log", err=True)


@audit.command(name="verify")
@click.option("--head", "pinned", metavar="HASH", type=params.HEAD,
              help="A head hash published earlier: fail unless the chain still holds it.")
@json_option
@click.pass_context
def verify_audit(ctx: click.Context, pinned: str | None, as_json: bool) -> None:
    """Recompute the audit log's hash chain; print its head hash, exit 1 at a broken row.

    Every event's hash covers the one before it, so an edited, deleted, inserted or replaced
    row breaks the chain, and every reindex records the head it found (an anchor), so events
    removed from the end before the last reindex are seen too. What only a head published
    elsewhere (a ticket, a commit, a log) can show, `--head HASH` checks: that no event after
    the last anchor was removed, and that the log was not rewritten together with its anchors.

    \b
    Examples:
      skillindex audit verify
      skillindex audit verify --head "$HEAD" --json   # the 64 hex digits published
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        report = index.verify_audit(head=pinned)
    if options.json:
        print_json(report.as_dict())
    else:
        _print_chain(report)
    if not report.ok:
        ctx.exit(EXIT_ERROR)


def _print_chain(report: ChainReport) -> None:
    if report.broken is not None:
        echo(f"broken: event {report.broken.id} ({report.broken.time}): "
             f"{report.broken.problem}")
        echo(f"{count(report.events, 'event')} before it verify; the last good head is "
             f"{report.head}")
    else:
        # Whole links, but an anchor or the pinned head missing is no "ok".
        verdict, but = ("ok", "") if report.ok else ("not ok", ", but")
        echo(f"{verdict}: {count(report.events, 'event')} of index {report.index} chain up "
             f"to head {report.head}{but}")
    if report.lost is not None:
        lost = report.lost.anchor
        echo(f"anchor lost: run {lost.run} ({lost.time}): {report.lost.problem}")
    elif report.anchors:
        echo(f"anchors: the chain reaches all {count(report.anchors, 'anchor')} its reindexes "
             f"recorded; the newest covers the first {count(report.anchored, 'event')}")
    else:
        echo("anchors: none yet (each reindex records one)")
    if report.pinned is None:
        if report.ok:
            tail = ("" if not report.unproven else
                    "that the event after the newest anchor was not removed from the end, nor "
                    if report.unproven == 1 else
                    f"that none of the {report.unproven} events after the newest anchor was "
                    "removed from the end, nor ")
            echo(f"not proven without --head: {tail}that the log was not rewritten together "
                 "with its anchors; publish the head elsewhere and check it with --head")
        return
    if report.pinned_at is None:
        echo(f"pinned head {report.pinned} is not in the chain: the history up to it was "
             "rewritten or cut")
    elif report.pinned_at == report.events:
        echo(f"pinned head {report.pinned} is the current head")
    else:
        echo(f"pinned head {report.pinned} is event {report.pinned_at}; "
             f"{count(report.events - report.pinned_at, 'event')} followed it")
