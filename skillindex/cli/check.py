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
from skillindex.query import baseline, sarif
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
@click.option("--baseline", "baseline_file", metavar="FILE", type=params.path(dir_okay=False),
              help="Findings this baseline accepts are reported as suppressed and never fail; "
              "its entries that match nothing any more are listed as stale.")
@click.option("--write-baseline", metavar="FILE", type=params.path(dir_okay=False),
              help="Write every current finding to FILE as accepted (entries already in FILE "
              "keep their reason) and exit 0.")
@click.option("--reason", metavar="TEXT", type=params.Text(max_length=10_000, empty=False),
              help="Why the findings --write-baseline adds are accepted (required for them).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as --format json).")
@click.pass_context
def check(ctx: click.Context, paths: tuple[str, ...], lenient: bool, fail_on: str, output: str,
          max_depth: int, jobs: int | None, baseline_file: str | None,
          write_baseline: str | None, reason: str | None, as_json: bool) -> None:
    """Check skill folders as a strict host and a scanner would, without an index.

    Each PATH is a skill folder, a file of one (the skill holding it is checked: what a
    pre-commit hook passes), or a folder of skills, looked for as a root is; the default is
    the current folder. Every skill is read and judged by the rules a reindex applies:
    validation (strict unless --lenient), the size limits, the folder's name against the
    skill's, the risk rules with file and line, names or skill:// URIs that two skills of
    the set share, and descriptions so alike that a request meant for one would pick the
    other. No settings file or index is read; nothing is written.

    Exit status: 0 clean, 1 a finding at or above --fail-on, 2 usage.

    \b
    Examples:
      skillindex check
      skillindex check skills/pdf --fail-on risk
      skillindex check --format sarif > skills.sarif
      skillindex check --format github        # in a GitHub Actions step
      skillindex check --write-baseline .skillindex-baseline.json --reason "reviewed"
      skillindex check --baseline .skillindex-baseline.json   # fails on new findings only
    """
    options = options_of(ctx, as_json)
    base = Path(options.cwd or os.getcwd())
    if reason is not None and write_baseline is None:
        raise click.UsageError("--reason goes with --write-baseline")
    # Read before the walk, so a broken baseline costs nothing.
    accepted = baseline.read(Path(baseline_file)) if baseline_file else None
    report = check_skills(paths, base=base,
                          validation=Validation.LENIENT if lenient else Validation.STRICT,
                          max_depth=max_depth, jobs=jobs or default_jobs())
    if write_baseline:
        _write_baseline(Path(write_baseline), report, reason, options.json or output == "json")
        return
    gravity = Gravity(fail_on)
    findings = report.findings()
    compared = (baseline.compare(findings, base=base, baseline=accepted) if accepted
                else baseline.Compared(tuple(findings), (), ()))
    fails = any(found.gravity.weight >= gravity.weight for found in compared.new)
    if options.json or output == "json":
        data = report.as_dict(gravity)
        if accepted is not None:
            data["ok"] = not fails
            data["baseline"] = {
                "file": baseline_file, "new": len(compared.new),
                "suppressed": [{"fingerprint": entry.fingerprint, "reason": entry.reason}
                               for _, entry in compared.suppressed],
                "stale": [entry.as_dict() for entry in compared.stale]}
        print_json(data)
    elif output == "sarif":
        print_json(sarif.log(findings, base=base, version=__version__,
                             suppressed=baseline.suppressions(compared)))
    else:
        render(compared.new, base, output)
        if output == "text":
            _summary(report, gravity, compared if accepted is not None else None, fails)
    for line in baseline.stale_lines(compared.stale):
        echo(line, err=True)
    if fails:
        ctx.exit(EXIT_ERROR)


def _write_baseline(target: Path, report: CheckReport, reason: str | None, as_json: bool) -> None:
    previous = baseline.read(target) if target.exists() or target.is_symlink() else None
    written = baseline.of_findings(report.findings(), base=report.base, reason=reason,
                                   previous=previous)
    target = baseline.write(target, written)
    if as_json:
        print_json({"path": str(target), "findings": len(written.entries)})
    else:
        echo(f"wrote {target}: {count(len(written.entries), 'finding')} accepted")


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


def _summary(report: CheckReport, fail_on: Gravity, compared: baseline.Compared | None,
             fails: bool) -> None:
    for folder in report.empty:
        echo(f"no skill folder found under {shown(folder, report.base)}", err=True)
    counts = report.counts()
    found = [count(counts[Gravity.ERROR], "error"), count(counts[Gravity.RISK], "risk finding"),
             count(counts[Gravity.WARNING], "warning")]
    rejected = sum(skill.status != "accepted" for skill in report.skills)
    line = f"checked {count(len(report.skills), 'skill')}: " + ", ".join(found)
    if rejected:
        line += f"; {count(rejected, 'skill')} would be rejected ({report.validation})"
    if compared is not None:
        line += (f"; {len(compared.suppressed)} accepted by the baseline, "
                 f"{len(compared.new)} new, {len(compared.stale)} stale")
    if fails:
        line += f"; failing on {fail_on}"
    echo(line)
