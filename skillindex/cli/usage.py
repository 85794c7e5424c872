"""What agents use: usage per skill, and the report a reviewer opens in a browser."""

from __future__ import annotations

import csv
import io
import math
import shutil
import sys
import textwrap
from collections.abc import Sequence
from datetime import datetime

import click

from skillindex import text as escape
from skillindex.cli import params
from skillindex.cli.common import (
    cli,
    count,
    echo,
    json_option,
    options_of,
    print_json,
    session_option,
    table,
)
from skillindex.model import SkillUsage, UsageReport

# Eight heights of a bar, lowest first; a day without a load is a dot.
BLOCKS = "▁▂▃▄▅▆▇█"
EMPTY = "·"
CHART_WIDTH = 60


since_option = click.option(
    "--since", metavar="ISO|DURATION", type=params.WINDOW,
    help="Start of the window: an ISO 8601 date or time (UTC if no zone) or a duration back "
    "from now (30d, 12h, 2w); default 30d.")


@cli.command()
@since_option
@session_option
@click.option("--skill", metavar="NAME", type=params.NAME, help="Only this skill.")
@click.option("--principal", metavar="NAME", type=params.SESSION,
              help="Only the events of this principal (a caller serve --http authenticated).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="Output format (--json is --format json).")
@click.option("--chart/--no-chart", default=None,
              help="Loads per day of the busiest skills (default: on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def usage(ctx: click.Context, since: str | None, session_id: str | None, skill: str | None,
          principal: str | None, fmt: str, chart: bool | None, as_json: bool) -> None:
    """Loads and refusals per skill from the audit log, and the skills nobody loaded.

    For every skill with events in the window: successful loads of the body (level 2) and of
    files (level 3), the bytes handed over, the sessions that loaded it, the first and last
    load, and the refused, mismatch, missing, not-found and error attempts. Then the catalog
    skills of this directory never loaded in the window, the totals, and for each principal
    (a caller serve --http authenticated) its loads, bytes, sessions, skills and failed
    attempts. The figures come from the `usage_view` SQL view, which auditors can query too.

    \b
    Examples:
      skillindex usage                        the last 30 days
      skillindex usage --since 7d --skill pdf
      skillindex usage --since 2026-11-01 --format csv > usage.csv
      skillindex usage --json --session s-42
      skillindex usage --principal alice
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        found = index.usage(since=since, session=session_id, skill=skill,
                            principal=principal)
    if options.json or fmt == "json":
        print_json(found.as_dict())
    elif fmt == "csv":
        _print_csv(found)
    else:
        _print_text(found, chart=sys.stdout.isatty() if chart is None else chart)


def _print_csv(found: UsageReport) -> None:
    rows = [row.as_dict() for row in found.skills]
    listed = {row.name for row in found.skills}
    rows += [SkillUsage(name, True, 0, 0, 0, 0, None, None).as_dict()
             for name in found.never_loaded if name not in listed]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(SkillUsage("", False, 0, 0, 0, 0, None,
                                                               None).as_dict()),
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows({key: escape.cell(value) for key, value in row.items()} for row in rows)
    # Names are shown as a terminal shows them (controls escaped); --json keeps exact text.
    # Split at the rows' own ends only: a CR inside a name is escaped, not taken for one.
    for line in buffer.getvalue().removesuffix("\n").split("\n"):
        echo(line)


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M")


def _print_text(found: UsageReport, *, chart: bool) -> None:
    echo(f"usage of index {found.index} from {_when(found.since)} to {_when(found.until)} UTC"
         + (f", session {found.session}" if found.session else "")
         + (f", skill {found.skill}" if found.skill else "")
         + (f", principal {found.principal}" if found.principal else ""))
    if found.skills:
        echo("")
        table(["skill", "loads", "body", "files", "bytes", "sessions", "first load",
               "last load", "refused", "mismatch", "missing", "not-found", "error"],
              [[row.name + ("" if row.in_catalog else " *"), row.loads, row.body_loads,
                row.resource_loads, row.bytes, row.sessions, _when(row.first_load),
                _when(row.last_load), row.refused, row.mismatch, row.missing, row.not_found,
                row.error] for row in found.skills])
        if not all(row.in_catalog for row in found.skills):
            echo("* not a skill of this directory's catalog (unknown, withheld or removed)")
    else:
        echo("no skill was loaded or asked for in this window")
    if chart and found.busiest and found.days:
        echo("")
        echo(f"loads per day, {found.days[0].day} to {found.days[-1].day}:")
        width = max(len(name) for name, _ in found.busiest)
        for name, loads in found.busiest:
            echo(f"  {name:<{width}}  {sparkline(loads)}  {sum(loads)}")
    echo("")
    never = found.never_loaded
    echo(f"never loaded in this window: {len(never)} of "
         f"{count(found.catalog_skills, 'catalog skill')}" + (":" if never else ""))
    if never:
        columns = shutil.get_terminal_size((100, 24)).columns
        for line in textwrap.wrap(", ".join(never), width=max(40, columns - 2),
                                  break_on_hyphens=False):
            echo(f"  {line}")
    if found.principals:
        echo("")
        table(["principal", "loads", "bytes", "sessions", "skills", "failed", "last load"],
              [[row.principal, row.loads, row.bytes, row.sessions, row.skills, row.failed,
                _when(row.last_load)] for row in found.principals])
    totals = found.totals()
    echo("")
    bodies = "body" if totals["body_loads"] == 1 else "bodies"
    echo(f"totals: {count(totals['loads'], 'load')} ({totals['body_loads']} {bodies}, "
         f"{count(totals['resource_loads'], 'file')}, {count(totals['bytes'], 'byte')}) by "
         f"{count(totals['sessions'], 'session')}; {totals['loaded_skills']} of "
         f"{count(found.catalog_skills, 'catalog skill')} loaded; {totals['refused']} refused, "
         f"{totals['mismatch']} mismatch, {totals['missing']} missing, "
         f"{totals['not_found']} not found, {count(totals['error'], 'error')}; "
         f"{count(totals['catalog_published'], 'catalog publication')}")


def sparkline(values: Sequence[int], width: int = CHART_WIDTH) -> str:
    """One character per value (per group of values when there are more than `width`): a
    bar as high as its share of the largest, a dot for none."""
    step = max(1, math.ceil(len(values) / width))
    sums = [sum(values[start:start + step]) for start in range(0, len(values), step)]
    peak = max(sums, default=0)
    if peak == 0:
        return EMPTY * len(sums)
    return "".join(EMPTY if value == 0 else BLOCKS[max(0, math.ceil(value / peak * 8) - 1)]
                   for value in sums)


@cli.command()
@click.option("--html", "html_path", required=True, metavar="FILE",
              type=params.FilePath(dir_okay=False, writable=True),
              help="Write the report to this HTML file (mode 0600, never through a symbolic "
              "link).")
@since_option
@click.option("--verify", "run_verify", is_flag=True,
              help="Hash every indexed file now and show that verify (else the last one "
              "recorded).")
@json_option
@click.pass_context
def report(ctx: click.Context, html_path: str, since: str | None, run_verify: bool,
           as_json: bool) -> None:
    """Write one self-contained HTML page a reviewer opens in a browser.

    The roots and their counts, collisions and who wins, rejections by code, risk findings
    by severity and skill, quarantined and trusted skills, usage over time, skills never
    used, refused attempts, the drift found by the last `verify` and the audit chain's state
    with its head hash. The page loads nothing: no script, font or image from anywhere.

    \b
    Examples:
      skillindex report --html report.html
      skillindex report --html report.html --since 7d --verify
    """
    from skillindex import fsio  # noqa: PLC0415
    from skillindex.query.reportpage import render  # noqa: PLC0415

    options = options_of(ctx, as_json)
    with options.open() as index:
        # The page quotes the audit (principals, refused names): it is its owner's alone,
        # and never written through a link, even at the path the user named.
        fsio.target(html_path, what="the report", named=False, within=None)
        found = index.report(since=since, verify=run_verify)
    page = render(found).encode("utf-8")
    html_path = str(fsio.write(html_path, page, what="the report", named=False, within=None,
                               private=True))
    totals = found.usage.totals()
    summary = {"html": html_path, "bytes": len(page), "catalog_skills": found.usage.catalog_skills,
               "loads": totals["loads"], "never_loaded": totals["never_loaded"],
               "failed": totals["failed"], "chain_ok": found.chain.ok,
               "head": found.chain.head, "chain_events": found.chain.events,
               "chain_seconds": round(found.chain_seconds, 3),
               "drifted": None if found.verify is None else found.verify.drifted}
    if options.json:
        print_json(summary)
        return
    echo(f"wrote {html_path} ({count(len(page), 'byte')}): "
         f"{count(found.usage.catalog_skills, 'catalog skill')}, "
         f"{count(totals['loads'], 'load')}, {totals['never_loaded']} never used, "
         f"{count(totals['failed'], 'failed attempt')}; audit chain "
         f"{'intact' if found.chain.ok else 'BROKEN'}, head {found.chain.head}")
