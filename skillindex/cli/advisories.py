"""Advisory and revocation feeds: advisories update, advisories list."""

from __future__ import annotations

import click

from skillindex.cli.common import (
    cli,
    echo,
    error_line,
    json_option,
    options_of,
    print_json,
)
from skillindex.errors import EXIT_ERROR


@cli.group()
def advisories() -> None:
    """Advisory and revocation feeds: skills they name are withheld everywhere.

    The feeds are `[skills] advisories` in the settings (files or URLs). A reindex reads the
    files again; only `advisories update` fetches URLs.

    \b
    Examples:
      skillindex advisories update
      skillindex advisories list
    """


@advisories.command()
@json_option
@click.pass_context
def update(ctx: click.Context, as_json: bool) -> None:
    """Read every feed into the index: files, and URLs (with their ETag, so an unchanged feed
    is not sent again). A skill an advisory names is withheld by every command and server
    from now on. A feed that cannot be read or parsed keeps the one in force and is
    reported; the exit status is then 1.

    \b
    Examples:
      skillindex advisories update
      skillindex advisories update --json
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        results = index.update_advisories(fetch=True)
    if options.json:
        print_json([result.as_dict() for result in results])
    else:
        for result in results:
            line = f"{result.source}: {result.status}, {_advisories(result.advisories)}"
            echo(line if result.error is None else line + " still in force")
        if not results:
            echo("no advisory feeds in the settings ([skills] advisories)")
    for result in results:
        if result.error is not None:
            echo(error_line(f"feed {result.source}: {result.error}"), err=True)
    if any(result.error is not None for result in results):
        ctx.exit(EXIT_ERROR)


@advisories.command(name="list")
@json_option
@click.pass_context
def list_feeds(ctx: click.Context, as_json: bool) -> None:
    """The feeds the settings name: the advisories in force of each, when it was last
    read well, and the error of its last read, if any.

    \b
    Examples:
      skillindex advisories list
      skillindex advisories list --json
    """
    from skillindex.query import advisories as feed_format  # noqa: PLC0415

    options = options_of(ctx, as_json)
    with options.open() as index:
        sources = index.settings.advisories
        stored = {feed.source: feed for feed in index.advisory_feeds()}
    rows: list[dict[str, object]] = []
    for source in sources:
        feed = stored.get(source)
        found = feed_format.loads(feed.advisories) if feed else []
        rows.append({"source": source, "advisories": [item.as_dict() for item in found],
                     "loaded_at": feed.loaded_at.isoformat() if feed and feed.loaded_at
                     else None, "error": feed.error if feed else None})
    if options.json:
        print_json(rows)
        return
    for source, row in zip(sources, rows, strict=True):
        feed = stored.get(source)
        loaded = feed.loaded_at.isoformat() if feed and feed.loaded_at else "never read"
        number = len(feed_format.loads(feed.advisories)) if feed else 0
        echo(f"{source}: {_advisories(number)} ({loaded})"
             + (f"; last error: {row['error']}" if row["error"] else ""))


def _advisories(number: int) -> str:
    return f"{number} advisory" if number == 1 else f"{number} advisories"
