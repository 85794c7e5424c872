"""The watch command: keeps the index fresh while it runs."""

from __future__ import annotations

import json
import time

import click

from skillindex import text as escape
from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, json_option, options_of
from skillindex.watch import QUIET_MS


@cli.command()
@click.option("--full-every", type=params.seconds(1, 31_536_000), default=600,
              show_default=True,
              metavar="SECONDS", help="Run a full reindex this often, as a safety net.")
@click.option("--quiet-ms", type=params.MILLISECONDS, default=QUIET_MS, show_default=True,
              metavar="MS", help="A burst of changes ends after this long without one.")
@click.option("--quiet", "-q", is_flag=True, help="Print only failed passes.")
@json_option
@click.pass_context
def watch(ctx: click.Context, full_every: float, quiet_ms: int, quiet: bool,
          as_json: bool) -> None:
    """Reindex whenever a skill under the roots of this directory changes.

    Reindexes once, then waits for filesystem events: each burst of changes (a checkout of a
    thousand files is one) rescans only the skill directories it touched. A root that does not
    exist yet, or a plugin installed later, is watched from the moment it appears. A full
    reindex runs every --full-every seconds too. A failed pass is retried after 1 s, then 2,
    4, ... up to 5 minutes. Ctrl-C stops it. Needs the `watch` extra
    (its error says how to add it to this installation).

    \b
    Examples:
      skillindex watch
      skillindex watch --full-every 300 --quiet
      skillindex --json watch          # one JSON object per pass
    """
    from skillindex.watch import Pass, _watchfiles  # noqa: PLC0415
    from skillindex.watch import watch as run_watch  # noqa: PLC0415

    options = options_of(ctx, as_json)
    _watchfiles()  # a missing extra is reported before the index is opened

    def show(done: Pass) -> None:
        if options.json:
            click.echo(escape.json_safe(json.dumps(done.as_dict(), ensure_ascii=False)))
            return
        stamp = time.strftime("%H:%M:%S")
        if done.report is None:
            retry = "" if done.retry_in is None else f" (retrying in {done.retry_in:g} s)"
            echo(f"{stamp} skillindex: error: {done.error}{retry}", err=True)
            return
        if quiet:
            return
        report = done.report
        what = "full reindex" if done.full else f"{count(done.paths, 'changed path')}"
        echo(f"{stamp} {what}: {count(report.seen, 'skill')} scanned, {report.added} "
                   f"added, {report.changed} changed, {report.removed} removed "
                   f"({report.duration_s:.2f} s)")

    with options.open(create=True) as index:
        if not options.json and not quiet:
            echo(f"watching {count(len(index.plan.roots), 'root')}; Ctrl-C stops", err=True)
        try:
            run_watch(index, full_every=full_every, quiet_ms=quiet_ms, on_pass=show)
        except KeyboardInterrupt:
            if not options.json and not quiet:
                echo("stopped", err=True)
