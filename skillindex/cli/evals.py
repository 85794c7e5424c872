"""`skillindex eval`: will a skill be chosen for the requests it is for, and only for those?"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from skillindex import __version__
from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, format_option, options_of, print_json, table
from skillindex.errors import EXIT_ERROR
from skillindex.query import evals, sarif
from skillindex.query.evals import EvalReport, SkillEval


@cli.command(name="eval")
@click.argument("paths", nargs=-1, metavar="[PATH]...", type=params.path(exists=True))
@click.option("--queries", "queries_file", type=params.path(dir_okay=False, exists=True),
              metavar="FILE", help="The trigger evals of the one skill PATH names, when they "
              "are not in its folder.")
@click.option("--against", type=params.TEXT, metavar="DB|FOLDER",
              help="Rank among the skills of this index (a SQLite file or URL) or of this "
              "folder of skills, instead of the index the settings name.")
@click.option("--by", "ranking", type=click.Choice(evals.RANKINGS), default="search",
              show_default=True,
              help="What counts as chosen: search (in the first k results) or catalog (whole "
              "in the catalog ranked by the query; its rank in the search is shown too).")
@click.option("--min-recall", type=params.SHARE, metavar="R",
              help="Exit 1 when a skill is chosen for fewer of its should-trigger queries.")
@click.option("--max-false", type=params.SHARE, metavar="R",
              help="Exit 1 when a skill is chosen for more of its should-not queries.")
@format_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as --format json).")
@click.pass_context
def eval_(ctx: click.Context, paths: tuple[str, ...], queries_file: str | None,
          against: str | None, ranking: str, min_recall: float | None, max_false: float | None,
          output: str, as_json: bool) -> None:
    """Run skills' trigger evals: is each skill chosen for its requests, and only for them?

    A skill's trigger evals are eval_queries.json (or evals/eval_queries.json) in its folder:
    a JSON array of {"query": "...", "should_trigger": true|false}, some ten requests that
    should choose it and ten near misses that should not. Each query is ranked as the host
    ranks it: by search (the first 10, as the search_skills tool gives), or with --by
    catalog by the catalog ranked by the query at the default budget. Each PATH is a skill
    folder, a file in one, or a folder of skills; without PATH, every skill of the index
    with trigger evals. A file in no skill, or in a skill without evals, is passed over (a
    pre-commit hook hands over every changed file).

    The skills are read from PATH as they are now and indexed, beside the skills they
    compete with, into a temporary copy of the index (SQLite only), or of a temporary index
    of --against FOLDER: the index itself is never written.

    For each skill: recall (should-trigger queries that chose it), false-trigger rate
    (should-not queries that chose it), its rank for each query, and the skills ranked above
    it when it was missed (its confusables). The same index and files give the same figures.

    Exit status: 0 ok, 1 a skill below --min-recall or above --max-false, 2 usage.

    \b
    Examples:
      skillindex eval skills/pdf
      skillindex eval skills/pdf --min-recall 0.8 --max-false 0.2
      skillindex eval skills/ --against ~/.claude/skills --format sarif > evals.sarif
    """
    from skillindex import evaluate  # noqa: PLC0415  (this command's alone)
    from skillindex.cli.progress import Progress  # noqa: PLC0415
    from skillindex.config import database_url, load_settings  # noqa: PLC0415
    from skillindex.providers import environment  # noqa: PLC0415

    options = options_of(ctx, as_json)
    env = environment(None, options.cwd)
    settings = load_settings(options.config, env)
    if options.index is not None:
        from dataclasses import replace  # noqa: PLC0415

        from skillindex.config import check_index_name  # noqa: PLC0415

        settings = replace(settings, index_name=check_index_name(options.index))
    folder = Path(env.cwd, against) if against and os.path.isdir(Path(env.cwd, against)) else None
    target = evaluate.Against(folder=folder) if folder else evaluate.Against(
        url=database_url(against or options.db, env))
    shows = sys.stderr.isatty() and not options.json and output == "text"
    indexing = Progress() if shows else None
    ranking_progress = Progress(verb="ranking", noun="queries") if shows else None
    try:
        report = evaluate.run(settings, env, target, [Path(env.cwd, p) for p in paths],
                              queries_file=Path(env.cwd, queries_file) if queries_file else None,
                              ranking=ranking, progress=indexing,
                              ranked=None if ranking_progress is None else
                              lambda done, total: ranking_progress(done, total, ""))
    finally:
        for bar in (indexing, ranking_progress):
            if bar is not None:
                bar.clear()
    base = env.cwd
    failing = report.fails(min_recall=min_recall, max_false=max_false)
    if options.json or output == "json":
        print_json(report.as_dict(base, min_recall=min_recall, max_false=max_false))
    elif output == "sarif":
        print_json(sarif.log(report.findings(), base=base, version=__version__))
    elif output == "github":
        for line in sarif.workflow_commands(report.findings(), base=base):
            echo(line)
    else:
        _text(report, base, failing)
    if failing:
        ctx.exit(EXIT_ERROR)


def _text(report: EvalReport, base: Path, failing: list[str]) -> None:
    if not report.skills:
        echo("no skill with trigger evals among the paths", err=True)
        return
    for skill in report.skills:
        _skill(skill, base, report.k)
        echo("")
    table(["skill", "recall", "false", "queries", "confusables"],
          [[skill.name, _rate(skill.recall), _rate(skill.false_rate),
            f"{len(skill.positives)}+{len(skill.negatives)}",
            ", ".join(name for name, _ in skill.confusables()[:3]) or "-"]
           for skill in report.skills])
    per_query = report.seconds / report.queries * 1000 if report.queries else 0.0
    queries = "1 query" if report.queries == 1 else f"{report.queries} queries"
    echo(f"{count(len(report.skills), 'skill')}, {queries} "
         f"({report.ranking}, k={report.k}, catalog of {report.max_chars:,} characters) "
         f"against {report.described_neighbours()} in {report.seconds:.1f} s "
         f"({per_query:.0f} ms a query)")
    for line in failing:
        echo(f"failing: {line}")


def _skill(skill: SkillEval, base: Path, k: int) -> None:
    echo(f"{skill.name}  {evals.shown(skill.entry, base)}  recall {_rate(skill.recall)}, "
         f"false triggers {_rate(skill.false_rate)}")
    if skill.problem:
        echo(f"  {skill.problem}")
    for result in skill.results:
        mark = "ok  " if result.passed else "MISS" if result.should_trigger else "FALSE"
        rank = f"#{result.rank}" if result.rank else "-"
        want = "should" if result.should_trigger else "should not"
        shown = f" {result.catalog:9}" if result.catalog else ""
        line = f"  {mark:5} {rank:>4}{shown} {want:10} {result.query}"
        if not result.passed and result.should_trigger and result.ahead:
            line += f"  <- {', '.join(result.ahead[:k])}"
        echo(line)
    confusables = skill.confusables()
    if confusables:
        echo("  confusables: " + ", ".join(f"{name} ({misses})" for name, misses in confusables))


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
