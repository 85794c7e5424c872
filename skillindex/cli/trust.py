"""Trust in what is loaded: risk findings, approvals of quarantined skills, lock files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import click

from skillindex import fsio
from skillindex.cli import params
from skillindex.cli.common import (
    cli,
    count,
    echo,
    error_line,
    format_option,
    json_option,
    options_of,
    print_json,
    table,
)
from skillindex.errors import EXIT_ERROR
from skillindex.index.risk import CODES
from skillindex.query import lockfile


@cli.command()
@click.option("--code", type=click.Choice(CODES), help="Only findings with this code.")
@format_option
@json_option
@click.pass_context
def risks(ctx: click.Context, code: str | None, output: str, as_json: bool) -> None:
    """List the risk findings of the skills of this directory, by skill and file.

    Findings are judged at index time from the bytes already read: hidden Unicode, prompt
    injection, remote execution, secrets (never shown), binaries that pretend to be text,
    executables outside scripts/, commands a host runs when it loads SKILL.md. `--format
    sarif` writes them as a SARIF log for code scanning, `--format github` as workflow
    annotations.

    \b
    Examples:
      skillindex risks
      skillindex risks --code secret
      skillindex --json risks --code remote-exec
      skillindex risks --format sarif > risks.sarif
    """
    options = options_of(ctx, as_json or output == "json")
    with options.open() as index:
        found = index.risks(code=code)
    if output in ("sarif", "github"):
        from skillindex.cli.check import render  # noqa: PLC0415 (a listing does not need it)
        from skillindex.query.sarif import of_risks  # noqa: PLC0415

        render(of_risks(found), Path(options.cwd or os.getcwd()), output)
        return
    if options.json:
        print_json([item.as_dict() for item in found])
    elif not found:
        echo("no risk findings" + (f" with code {code}" if code else ""))
    else:
        table(["skill", "code", "file", "line", "finding"],
              [[item.name or "-", item.code, item.path or "-", item.line or "-",
                item.message.split(": ", 1)[-1]] for item in found])
        skills = len({item.skill_path for item in found})
        echo(f"{count(len(found), 'finding')} in {count(skills, 'skill')}; "
                   "`skillindex explain NAME` shows one skill's")


@cli.command()
@click.argument("name", type=params.NAME)
@click.option("--note", metavar="TEXT", type=params.TEXT,
              help="Why it is trusted (kept with the approval).")
@json_option
@click.pass_context
def trust(ctx: click.Context, name: str, note: str | None, as_json: bool) -> None:
    """Approve skill NAME as its files are now, so risk_policy = quarantine serves it.

    Every indexed file is hashed again on disk first: when what you could review there is not
    what the index holds (a file changed, missing or added since the reindex), or the skill
    holds what no digest can bind (a link out of it, a name that is not UTF-8, a FIFO), the
    approval is refused (exit 4): reindex, review, then trust. The approval is bound to the
    skill's content (a digest of every file's path, sha256 and execute bits, hidden files
    included) and to its risk findings: any change to the skill, or a finding the approval
    did not see, revokes it, and the skill is quarantined again until approved anew. Review
    the findings first (`skillindex explain NAME`). It prints the digest and the files it
    approved.

    \b
    Examples:
      skillindex explain pdf
      skillindex trust pdf --note "reviewed the install script"
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        approval = index.trust(name, note=note)
    if options.json:
        print_json(approval.as_dict())
        return
    again = "" if approval.new else " (this content was approved before)"
    echo(f"trusted {approval.name} as it is now, content {approval.digest}{again}; "
               f"{count(len(approval.findings), 'risk finding')} approved with it")
    table(["file", "sha256", "exec"],
          [[item.rel_path, item.sha256 or "(over the size limit: by its stat)",
            "-" if item.mode is None else ("x" if item.mode & 0o111 else "")]
           for item in approval.files])


@cli.command()
@click.option("--output", "-o", metavar="PATH", type=params.path(dir_okay=False),
              help=f"Write the lock file here (default: {lockfile.FILE_NAME} in the working "
              "directory, refused if it is a symbolic link; a link named here is followed to "
              "its file; `-` prints it).")
@json_option
@click.pass_context
def lock(ctx: click.Context, output: str | None, as_json: bool) -> None:
    """Write skills-lock.json (the `skills` CLI's format) for the skills in the catalog.

    Each skill's folder is hashed as the `skills` CLI hashes it (`computedHash`); a skill
    already in the file keeps its `source` and `sourceType`. `skillindex verify --lock`
    compares the catalog with it later.

    \b
    Examples:
      skillindex lock && git add skills-lock.json
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        given = None if output == "-" else Path(output or index.env.cwd / lockfile.FILE_NAME)
        # Checked before anything is read or hashed: a link the repository planted at the
        # default path is refused, not read from and not written through.
        real = None if given is None else fsio.target(
            given, what="the lock file", named=output is not None, within=index.env.cwd)
        previous = lockfile.read(real) if real is not None and real.exists() else {}
        entries = index.lock(previous)
    if given is None:
        for chunk in lockfile.chunks(entries):
            click.echo(chunk, nl=False)
        _unhashed(ctx, entries.unhashed)
        return
    target = fsio.write(given, lockfile.chunks(entries), what="the lock file",
                        named=output is not None, within=index.env.cwd, private=False)
    if options.json:
        print_json({"path": str(target), "skills": {k: v.as_json() for k, v in entries.items()},
                    "unhashed": [item.as_dict() for item in entries.unhashed]})
    else:
        echo(f"wrote {target}: {count(len(entries), 'skill')}")
    _unhashed(ctx, entries.unhashed)


def _unhashed(ctx: click.Context, unhashed: Sequence[lockfile.Unhashed]) -> None:
    """Each skill left out of the lock file, on stderr; exit 1 when there is one."""
    for item in unhashed:
        echo(error_line(f"skill {item.skill} is not in the lock file: {item.reason}"), err=True)
    if unhashed:
        ctx.exit(EXIT_ERROR)
