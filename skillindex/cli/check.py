"""`skillindex check`: lint skill folders as hosts and scanners judge them, without an index."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import click

from skillindex import __version__
from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, format_option, options_of, print_json
from skillindex.errors import EXIT_ERROR
from skillindex.index.parallel import default_jobs
from skillindex.model import FileFinding, Gravity, Validation
from skillindex.query import sarif
from skillindex.query.check import DEFAULT_DEPTH, CheckReport, shown
from skillindex.query.check import check as check_skills


@cli.command()
@click.argument("paths", nargs=-1, metavar="[PATH]...", type=params.path(exists=True))
@click.option("--lenient", is_flag=True,
              help="Judge as hosts do (the specification's rules become warnings where hosts "
              "accept the skill anyway); strict by default.")
@click.option("--fail-on", type=click.Choice([str(g) for g in Gravity]), default="error",
              show_default=True,
              help="Exit 1 on a finding this heavy or heavier: error, risk (errors and risk "
              "findings) or warning (any finding).")
@format_option
@click.option("--max-depth", type=params.Integer(1, 16), default=DEFAULT_DEPTH,
              show_default=True, metavar="N",
              help="How deep skill folders are looked for under a folder of skills.")
@click.option("--jobs", type=params.JOBS, metavar="N",
              help="Processes that read and judge a folder of many skills (default: cores).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as --format json).")
@click.pass_context
def check(ctx: click.Context, paths: tuple[str, ...], lenient: bool, fail_on: str, output: str,
          max_depth: int, jobs: int | None, as_json: bool) -> None:
    """Check skill folders as a strict host and a scanner would, without an index.

    Each PATH is a skill folder, a file of one (the skill holding it is checked: what a
    pre-commit hook passes), or a folder of skills, looked for as a root is; the default is
    the current folder. Every skill is read and judged by the rules a reindex applies:
    validation (strict unless --lenient), the size limits, the folder's name against the
    skill's, the risk rules with file and line, and names or skill:// URIs that two skills
    of the set share. No settings file or index is read; nothing is written.

    Exit status: 0 clean, 1 a finding at or above --fail-on, 2 usage.

    \b
    Examples:
      skillindex check
      skillindex check skills/pdf --fail-on risk
      skillindex check --format sarif > skills.sarif
      skillindex check --format github        # in a GitHub Actions step
    """
    options = options_of(ctx, as_json)
    base = Path(options.cwd or os.getcwd())
    report = check_skills(paths, base=base,
                          validation=Validation.LENIENT if lenient else Validation.STRICT,
                          max_depth=max_depth, jobs=jobs or default_jobs())
    gravity = Gravity(fail_on)
    if options.json or output == "json":
        print_json(report.as_dict(gravity))
    else:
        render(report.findings(), base, output)
        if output == "text":
            _summary(report, gravity)
    if report.fails(gravity):
        ctx.exit(EXIT_ERROR)


def render(findings: Iterable[FileFinding], base: Path, output: str) -> None:
    """Findings as text lines, a SARIF log or GitHub annotations."""
    if output == "sarif":
        print_json(sarif.log(findings, base=base, version=__version__))
    elif output == "github":
        for line in sarif.workflow_commands(findings, base=base):
            echo(line)  # escaped as built; echo lets nothing through that a terminal obeys
    else:
        for found in findings:
            where = shown(found.file, base) + (f":{found.line}" if found.line else "")
            echo(f"{where}: {found.gravity} {found.code}: {found.message}")


def _summary(report: CheckReport, fail_on: Gravity) -> None:
    for folder in report.empty:
        echo(f"no skill folder found under {shown(folder, report.base)}", err=True)
    counts = report.counts()
    found = [count(counts[Gravity.ERROR], "error"), count(counts[Gravity.RISK], "risk finding"),
             count(counts[Gravity.WARNING], "warning")]
    rejected = sum(skill.status != "accepted" for skill in report.skills)
    line = f"checked {count(len(report.skills), 'skill')}: " + ", ".join(found)
    if rejected:
        line += f"; {count(rejected, 'skill')} would be rejected ({report.validation})"
    if report.fails(fail_on):
        line += f"; failing on {fail_on}"
    echo(line)
