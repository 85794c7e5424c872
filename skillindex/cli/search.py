"""The search command: the winning skills that match a text, best first."""

from __future__ import annotations

import click

from skillindex.cli import params
from skillindex.cli.common import cli, echo, json_option, options_of, print_json, table

DESCRIPTION_WIDTH = 60


@cli.command()
@click.argument("query", type=params.TEXT)
@click.option("--limit", type=params.PAGE, default=10, show_default=True, metavar="N",
              help="How many skills to show at most.")
@json_option
@click.pass_context
def search(ctx: click.Context, query: str, limit: int, as_json: bool) -> None:
    """Rank the skills used in this directory by how well they match QUERY.

    Names weigh most, then descriptions, then other frontmatter and the top of each body.
    Any text is a query: only its words count (no operators).

    \b
    Examples:
      skillindex search "fill in a pdf form"
      skillindex search kubernetes --limit 3 --json
    """
    options = options_of(ctx, as_json)
    # A migrated SQLite index answers from its stored resolution without SQLAlchemy.
    from skillindex.query import oneshot  # noqa: PLC0415

    hits = oneshot.search(options.config, db=options.db, cwd=options.cwd, index=options.index,
                          query=query, limit=limit)
    if hits is None:
        with options.open() as index:
            hits = index.search(query, limit=limit)
    if options.json:
        print_json([hit.as_dict() for hit in hits])
        return
    if not hits:
        echo("no skill matches; `skillindex list` shows every skill in use here", err=True)
        return
    table(["score", "name", "description", "location"],
          [[f"{hit.score:.2f}", hit.name, _short(hit.description), hit.location]
           for hit in hits])


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DESCRIPTION_WIDTH else flat[:DESCRIPTION_WIDTH - 1] + "…"
