"""Commands that index and inspect: reindex, candidates, rejections, roots, list, explain."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillindex.cli import params
from skillindex.cli.common import (
    Options,
    candidate_table,
    cli,
    column_table,
    count,
    echo,
    finding_codes,
    format_option,
    json_option,
    options_of,
    print_json,
    print_json_array,
    table,
)
from skillindex.collector import no_cycle_collection
from skillindex.model import FindingCount, IndexReport, Status

if TYPE_CHECKING:  # the line is drawn by reindex alone, which imports it
    from skillindex.cli.progress import Progress


@cli.command()
@click.option("--all", "all_roots", is_flag=True,
              help="Rescan every root the index knows, not only those of this directory.")
@click.option("--no-wait", is_flag=True,
              help="Fail at once if another process is reindexing this index (default: wait "
              "up to the reindex_timeout setting).")
@click.option("--jobs", "-j", type=params.JOBS, metavar="N",
              help="Processes that read and parse new skills, and that share the walk of a "
              "reindex finding nothing new (default: one per core).")
@click.option("--quiet", "-q", is_flag=True,
              help="Print nothing on success (for timers and hooks); problems still go to "
              "stderr and the exit code tells the outcome.")
@click.option("--offline", is_flag=True,
              help="Fetch nothing for URL roots: index their verified cache as it is.")
@json_option
@click.pass_context
def reindex(ctx: click.Context, all_roots: bool, no_wait: bool, jobs: int | None, quiet: bool,
            offline: bool, as_json: bool) -> None:
    """Scan the roots of this directory and update the index.

    Only files that changed since the last reindex are read again.

    \b
    Examples:
      skillindex reindex
      skillindex reindex --all --no-wait
      skillindex reindex --quiet      # from cron, a systemd timer or a git hook
      skillindex reindex --jobs 1     # no worker processes
      skillindex --json reindex
      skillindex reindex --offline   # URL roots from their cache, no network
    """
    options = options_of(ctx, as_json)
    from skillindex.cli.progress import Progress  # noqa: PLC0415  (this command's alone)

    progress = (Progress() if sys.stderr.isatty() and not options.json and not quiet
                else None)
    try:
        report = _unchanged(options, all_roots=all_roots, jobs=jobs, progress=progress,
                            offline=offline)
        if report is None:
            report = _reindexed(options, all_roots=all_roots, no_wait=no_wait, jobs=jobs,
                                progress=progress, offline=offline)
    finally:
        if progress is not None:
            progress.clear()
        from skillindex.index import parallel  # noqa: PLC0415

        parallel.stop_ahead()  # workers started ahead that the full path did not take
    reasons: Sequence[FindingCount] = []
    if not options.json and not quiet and report.rejected * 2 > report.seen:
        with options.open() as index:
            reasons = index.finding_counts(rejected=True)[:3]
    if options.json:
        print_json(report.as_dict())
        return
    if quiet:
        for problem in report.problems:
            echo(f"skillindex: problem: {problem.path}: {problem.message} [{problem.code}]",
                 err=True)
        return
    echo(
        f"indexed {count(report.seen, 'skill')} in {count(report.roots, 'root')}: "
        f"{report.added} added, {report.changed} changed, "
        + (f"{report.rejudged} judged again (same content), " if report.rejudged
           else "")
        + f"{report.unchanged} unchanged, {report.removed} removed, "
        f"{report.rejected} rejected ({count(report.files_read, 'file')} read, "
        f"{report.duration_s:.2f} s)")
    if reasons:
        top = ", ".join(f"{reason.code} ({reason.candidates})" for reason in reasons)
        echo(f"most skills were rejected ({report.rejected} of {report.seen}); the top reasons: "
             f"{top}; `skillindex rejections --summary` counts them all")
    for fetch in report.fetches:
        echo(f"fetched {fetch['url']}: {count(int(str(fetch['requests'])), 'request')}, "
             f"{count(int(str(fetch['downloads'])), 'download')} "
             f"({fetch['bytes']} bytes), {fetch['kept']} kept, {fetch['removed']} removed")
    for problem in report.problems:
        echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]", err=True)
    if report.seen == 0:
        echo("no skills found; put skills in ~/.claude/skills/<name>/SKILL.md, or list "
                   "roots in the settings file (see `skillindex roots`)")
    else:
        echo("`skillindex list` shows the skills in the catalog"
                   + (", `skillindex rejections` why some were rejected" if report.rejected
                      else ""))


def _unchanged(options: Options, *, all_roots: bool, jobs: int | None,
               progress: Progress | None, offline: bool) -> IndexReport | None:
    """The reindex of a migrated SQLite index that finds nothing new, through sqlite3 (it only
    records its run); None when there is more to write, for the full path."""
    from skillindex.query import oneshot  # noqa: PLC0415

    return oneshot.reindex(options.config, db=options.db, cwd=options.cwd,
                           index=options.index, all_roots=all_roots, jobs=jobs,
                           progress=progress, offline=offline)


def _reindexed(options: Options, *, all_roots: bool, no_wait: bool, jobs: int | None,
               progress: Progress | None, offline: bool) -> IndexReport:
    with options.open(create=True) as index:

        def waiting(holder: str) -> None:
            echo(f"skillindex: index {index.index_name!r} is being reindexed by {holder}; "
                 f"waiting up to {index.settings.reindex_timeout:g} s", err=True)

        if progress is not None:
            progress.clear()  # what an unfinished check drew: the walk starts again
        return index.reindex(all_roots=all_roots, progress=progress, wait=not no_wait,
                             on_wait=waiting, jobs=jobs, offline=offline)


def _narrowing(command: Callable[..., None]) -> Callable[..., None]:
    """--summary, --code and --limit, shared by candidates and rejections."""
    command = click.option("--limit", type=params.COUNT, metavar="N",
                           help="Only the first N (in precedence order).")(command)
    command = click.option("--code", metavar="CODE", type=params.NAME,
                           help="Only those with a finding of this code (e.g. yaml-invalid).")(
                               command)
    return click.option("--summary", is_flag=True,
                        help="Count the skills per finding code instead of listing them.")(
                            command)


def _summary(counts: Sequence[FindingCount], total: int, noun: str) -> None:
    if not counts:
        echo(f"no findings among {count(total, noun)}")
        return
    table(["skills", "severity", "code"], [[c.candidates, c.severity, c.code] for c in counts])
    echo(f"{count(total, noun)}; `--code CODE` lists those with one code")


def _more(shown: int, limit: int | None) -> None:
    if limit is not None and shown == limit:
        echo(f"(the first {count(shown, 'skill')}; raise --limit to see more)", err=True)


@cli.command()
@_narrowing
@json_option
@click.pass_context
def candidates(ctx: click.Context, summary: bool, code: str | None, limit: int | None,
               as_json: bool) -> None:
    """List every skill found under the roots of this directory.

    Accepted and rejected ones alike, in precedence order, with the codes of their findings.

    \b
    Examples:
      skillindex candidates
      skillindex candidates --summary
      skillindex candidates --code yaml-repaired --limit 20
      skillindex --json candidates
    """
    options = options_of(ctx, as_json)
    if options.json and not summary and _streamed_candidates(options, None, code, limit):
        return
    with options.open() as index:
        if summary:
            counts, total = index.finding_counts(), index.count()
        elif options.json:
            print_json_array(c.as_dict() for c in index.iter_candidates(code=code, limit=limit))
            return
        else:
            found = index.candidates(code=code, limit=limit)
    if summary:
        if options.json:
            print_json({"candidates": total, "codes": [c.as_dict() for c in counts]})
        else:
            _summary(counts, total, "candidate")
    elif not found:
        echo(f"no candidates with a {code} finding" if code else
             "no candidates indexed for this directory; run `skillindex reindex`")
    else:
        candidate_table(found)
        _more(len(found), limit)


def _streamed_candidates(options: Options, status: Status | None, code: str | None,
                         limit: int | None) -> bool:
    """Print the candidates as JSON from a migrated SQLite index without SQLAlchemy, as they
    are read; False, with nothing printed, where the full path must."""
    from skillindex.query import oneshot  # noqa: PLC0415

    with oneshot.candidate_entries(options.config, db=options.db, cwd=options.cwd,
                                   index=options.index, status=status, code=code,
                                   limit=limit) as entries:
        if entries is None:
            return False
        print_json_array(entries)
        return True


@cli.command()
@_narrowing
@format_option
@json_option
@click.pass_context
def rejections(ctx: click.Context, summary: bool, code: str | None, limit: int | None,
               output: str, as_json: bool) -> None:
    """List the rejected skills and the reasons.

    `--format sarif` writes them as a SARIF log for code scanning, `--format github` as
    workflow annotations, each at its SKILL.md (risk findings: `skillindex risks`).

    \b
    Examples:
      skillindex rejections --summary
      skillindex rejections --code name-invalid --limit 10
      skillindex --json rejections
      skillindex rejections --format sarif > rejections.sarif
    """
    options = options_of(ctx, as_json or output == "json")
    located = output in ("sarif", "github")
    if summary and located:
        raise click.UsageError(f"--summary counts the reasons; --format {output} lists them")
    if options.json and not summary and not located and _streamed_candidates(
            options, Status.REJECTED, code, limit):
        return
    with options.open() as index:
        if located:
            found = index.rejections(code=code, limit=limit)
        elif summary:
            counts, total = index.finding_counts(rejected=True), index.count(rejected=True)
        elif options.json:
            print_json_array(c.as_dict() for c in index.iter_candidates(
                status=Status.REJECTED, code=code, limit=limit))
            return
        else:
            found = index.rejections(code=code, limit=limit)
    if located:
        from skillindex.cli.check import render  # noqa: PLC0415 (a listing does not need it)
        from skillindex.index.risk import CODES  # noqa: PLC0415
        from skillindex.query.sarif import of_rejections  # noqa: PLC0415

        render(of_rejections(found, CODES), Path(options.cwd or os.getcwd()), output)
        return
    if summary:
        if options.json:
            print_json({"rejected": total, "codes": [c.as_dict() for c in counts]})
        else:
            _summary(counts, total, "rejected skill")
        return
    if not found:
        echo(f"no skills rejected with {code}" if code else "no rejected skills")
    for candidate in found:
        echo(f"{candidate.name or candidate.directory.name}  {candidate.path}")
        for finding in candidate.findings:
            echo(f"  {finding.severity:<7} {finding.code}: {finding.message}")
    _more(len(found), limit)


@cli.command()
@json_option
@click.pass_context
def roots(ctx: click.Context, as_json: bool) -> None:
    """List the roots of this directory and what each holds.

    In precedence order, with provider, scope, state and counts.

    \b
    Examples:
      skillindex roots
      skillindex --cwd ~/src/app roots
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        states = index.roots()
        problems = index.plan.problems
    if options.json:
        print_json([state.as_dict() for state in states])
        return
    table(["prec", "provider", "scope", "skills", "rejected", "state", "path"],
           [[s.spec.precedence, s.spec.provider, s.spec.scope, s.candidates, s.rejected,
             _root_state(s), s.spec.path] for s in states])
    for state in states:
        if state.spec.remote is not None:
            echo(f"  {state.spec.path}: from {state.spec.remote.url}"
                 + (f", {state.stale}" if state.stale else ""))
        for problem in state.problems:
            echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]")
    for problem in problems:
        echo(f"  problem: {problem.path}: {problem.message} [{problem.code}]")


def _hinted(entry: dict[str, Any], hint: str | None, signer: str | None) -> dict[str, Any]:
    return {**entry, **({"argument_hint": hint} if hint else {}),
            **({"signer": signer} if signer else {})}


def _root_state(state: Any) -> str:
    if state.spec.disabled_by:
        return "disabled"
    if state.stale:
        return "stale"
    if not state.present:
        return "missing"
    return "indexed" if state.indexed else "not indexed"


@cli.command("list")
@json_option
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List the skills the catalog is built from.

    The winners, after the filters and the collision policy.

    \b
    Examples:
      skillindex list
      skillindex --json list
    """
    options = options_of(ctx, as_json)
    if options.json:
        _list_json(options)
        return
    with no_cycle_collection():
        _list(options)


def _list_json(options: Options) -> None:
    """The winners as a JSON array, written as they are read: from a migrated SQLite index
    without SQLAlchemy where it can. The cyclic collector stays on: the store's sessions
    leave cycles behind a page at a time, which it frees."""
    from skillindex.query import oneshot  # noqa: PLC0415

    with oneshot.winner_entries(options.config, db=options.db, cwd=options.cwd,
                                index=options.index) as entries:
        if entries is not None:
            print_json_array(entries)
            return
    with options.open() as index:
        hinted, signed = index.argument_hints(), index.signers()
        print_json_array(_hinted(winner.as_dict(), hinted.get(winner.candidate.id),
                                 signed.get(winner.candidate.id))
                         for winner in index.iter_winners())


def _list(options: Options) -> None:
    # A migrated SQLite index lists its stored winners without SQLAlchemy.
    from skillindex.query import oneshot  # noqa: PLC0415

    found = oneshot.listing(options.config, db=options.db, cwd=options.cwd,
                            index=options.index)
    if found is not None:
        columns, names, note, hints = found.columns, found.collisions, found.note, found.hints
        signers = found.signers
    else:
        with options.open() as index:
            hinted, signed = index.argument_hints(), index.signers()
            listed = list(index.iter_winners())
            rows = [[w.name, w.candidate.scope, w.candidate.provider, w.candidate.precedence,
                     finding_codes(w.candidate), w.candidate.path] for w in listed]
            columns = list(zip(*rows, strict=True))
            hints = [hinted.get(w.candidate.id, "") for w in listed] if hinted else []
            signers = [signed.get(w.candidate.id, "") for w in listed] if signed else []
            names = [c.name for c in index.collisions()]
            note = index.staleness()
    empty = not any(columns)
    if empty and note:
        echo(f"no skills in the catalog: {note}")
        note = None
    elif empty:
        echo("no skills in the catalog; `skillindex candidates` shows what was found and "
             "`skillindex explain NAME` why a skill is left out")
    else:
        # A column of its own only where some skill declares an argument-hint, or was signed.
        heads, cells = ["name"], [columns[0]]
        for head, column in (("args", hints), ("signer", signers)):
            if column:
                heads.append(head)
                cells.append([cell or "-" for cell in column])
        column_table([*heads, "scope", "provider", "prec", "warnings", "path"],
                     [*cells, *columns[1:]])
    if names:
        # One line, however many: each collision is data (`--json`: collision), and explain
        # tells the whole story of a name.
        shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        echo(f"note: {count(len(names), 'name')} declared by more than one skill ({shown}); "
             "`skillindex explain NAME` shows which one is used and why", err=True)
    if note:
        echo(f"note: {note}", err=True)


@cli.command()
@click.argument("name", type=params.NAME)
@json_option
@click.pass_context
def explain(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show every candidate for NAME and why it won or lost.

    Which one is used, and why each other one is not.

    \b
    Examples:
      skillindex explain pdf
      skillindex --json explain pdf
    """
    options = options_of(ctx, as_json)
    from skillindex.serve.skills import withheld_reason  # noqa: PLC0415

    with options.open() as index:
        explanation = index.explain(name)
        winner = explanation.winner
        withheld = ("it is not in the catalog" if winner is None
                    else withheld_reason(index.manifests([winner])[0]))
        origins = {str(v.candidate.path): index.origin(v.candidate)
                   for v in explanation.verdicts}
        signed = index.signatures([v.candidate for v in explanation.verdicts])
    if options.json:
        print_json({**explanation.as_dict(),
                    "mcp": {"served": withheld is None, "reason": withheld},
                    "origins": {path: found for path, found in origins.items() if found},
                    "signatures": {str(v.candidate.path): json.loads(signature.to_json())
                                   for v in explanation.verdicts
                                   if (signature := signed.get(v.candidate.id)) is not None}})
        return
    for each in explanation.winners:
        alias = f" as {each.name}" if each.name != explanation.name else ""
        echo(f"{explanation.name}: in the catalog{alias}: {each.candidate.path}")
    if not explanation.winners:
        echo(f"{explanation.name}: not in the catalog")
    elif withheld is not None:
        echo(f"{explanation.name}: not served over MCP: {withheld}")
    if explanation.catalog_mode is not None:
        mode, why = explanation.catalog_mode
        echo(f"  catalog mode: {mode} ({why})")
    for verdict in explanation.verdicts:
        c = verdict.candidate
        echo(f"  {verdict.outcome:<9}  {c.precedence:>4}  {c.scope:<7}  {c.provider:<14}  "
                   f"{c.path}")
        echo(f"  {'':<9}  {verdict.reason}")
        signature = signed.get(c.id)
        if signature is not None:
            echo(f"  {'':<9}  " + (f"signed by {signature.signer}"
                                   if signature.status == "verified"
                                   else f"signature {signature.status}: {signature.reason}"))
        found = origins.get(str(c.path))
        if found is not None:
            echo(f"  {'':<9}  fetched from {found['url']} ({found['digest']})"
                 + (f", {found['stale']}" if found["stale"] else ""))
        for finding in c.findings:
            if finding.severity == "warning" or verdict.outcome != "rejected":
                echo(f"  {'':<9}  {finding.severity} {finding.code}: {finding.message}")


@cli.command()
@json_option
@click.pass_context
def context(ctx: click.Context, as_json: bool) -> None:
    """List the context files of this directory and its parents.

    The `context_files` setting names them (XCSH.md by default; AGENTS.md or CLAUDE.md are
    common); they are looked up now, not indexed.

    \b
    Examples:
      skillindex context
      skillindex --json context
    """
    from skillindex.api import context_files  # noqa: PLC0415

    options = options_of(ctx, as_json)
    names, found = context_files(options.config, cwd=options.cwd)
    if options.json:
        print_json([item.as_dict() for item in found])
    elif not found:
        echo(f"no context files ({', '.join(names)}) in this directory or its ancestors")
    else:
        table(["depth", "size", "sha256", "path"],
               [[f.depth, f.size, f.sha256[:16], f.path] for f in found])
