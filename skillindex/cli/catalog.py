"""The catalog command: the level-1 text the model sees."""

from __future__ import annotations

import sys

import click

from skillindex import text as escape
from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, json_option, options_of, print_json


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["xml", "markdown", "json"]), default="xml",
              show_default=True, help="xml = <available_skills>; markdown = a # Skills section.")
@click.option("--max-chars", type=params.CHARS, metavar="N",
              help="Character budget of the text.")
@click.option("--context-window", type=params.TOKENS, metavar="TOKENS",
              help="Budget as 2% of this many tokens at 4 characters a token.")
@click.option("--no-read-tool", is_flag=True,
              help="The host has no read tool to load skills with: print no catalog.")
@click.option("--session", metavar="ID", type=params.SESSION,
              help="Record the publication for this session.")
@click.option("--query", metavar="TEXT", type=params.TEXT,
              help="Rank by relevance to TEXT: the best matches keep their descriptions.")
@click.option("--files", "files", metavar="PATH", type=params.path(), multiple=True,
              help="A file the work touches (repeat it): a skill whose paths or globs match "
                   "none of them is left out.")
@json_option
@click.pass_context
def catalog(ctx: click.Context, fmt: str, max_chars: int | None, context_window: int | None,
            no_read_tool: bool, session: str | None, query: str | None,
            files: tuple[str, ...], as_json: bool) -> None:
    """Print the catalog the model sees, within a character budget.

    The budget is --max-chars, or 2% of --context-window tokens at 4 characters a token, else
    8,000 characters; what was shortened or left out is reported on stderr.

    \b
    Examples:
      skillindex catalog
      skillindex catalog --format markdown --max-chars 4000
      skillindex catalog --context-window 200000 --session s-42
      skillindex catalog --max-chars 4000 --query "fill in a pdf form"
      skillindex catalog --files src/app.py --files README.md
    """
    options = options_of(ctx, as_json)
    if max_chars is not None and context_window is not None:
        raise click.UsageError("give --max-chars or --context-window, not both")
    tools = () if no_read_tool else ("read",)
    result = None
    if session is None:
        # A cached catalog needs neither SQLAlchemy nor a resolution: a host's start-up path.
        from skillindex.query.quick import cached_catalog  # noqa: PLC0415

        result = cached_catalog(options.config, db=options.db, cwd=options.cwd,
                                index=options.index, max_chars=max_chars,
                                context_window=context_window, format=fmt, tools=tools,
                                query=query, files=files or None)
    note = None
    if result is None:
        with options.open() as index:
            result = index.catalog(max_chars=max_chars, context_window=context_window,
                                   format=fmt, tools=tools, session=session, query=query,
                                   files=files or None)
            note = None if options.json else index.staleness()
    elif not options.json and sys.stderr.isatty():
        # Served from the cache: a person at a terminal still hears about unindexed roots.
        with options.open() as index:
            note = index.staleness()
    if options.json:
        print_json(result.as_dict())
    else:
        # Rendering escaped the text already; escaping again here only guards the terminal.
        click.echo(escape.terminal(result.text, keep_newlines=True), nl=False)
    # A description cut to nothing leaves the name alone: said so, not "shortened".
    names_only = sum(1 for entry in result.truncated if not entry.description)
    shortened, omitted = len(result.truncated) - names_only, len(result.omitted)
    if shortened or names_only or omitted:
        parts = [f"{count(shortened, 'description')} shortened" if shortened else "",
                 f"{count(names_only, 'skill')} by name only" if names_only else "",
                 f"{count(omitted, 'skill')} omitted" if omitted else ""]
        echo(f"catalog: {count(len(result.entries), 'skill')} in {result.chars} of "
             f"{result.max_chars} characters; {', '.join(filter(None, parts))}; "
             f"ordered by {result.ranked_by}", err=True)
    if note:
        echo(f"note: {note}", err=True)
