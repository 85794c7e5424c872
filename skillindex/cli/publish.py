"""`skillindex publish`: the catalog as files another host can fetch."""

from __future__ import annotations

import click

from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, json_option, options_of, print_json


@cli.group()
def publish() -> None:
    """Publish the catalog's skills as files a web server can serve.

    \b
    Examples:
      skillindex publish wellknown site/
    """


@publish.command("wellknown")
@click.argument("directory", type=params.path(file_okay=False))
@json_option
@click.pass_context
def wellknown(ctx: click.Context, directory: str, as_json: bool) -> None:
    """Write DIRECTORY/.well-known/agent-skills/ (discovery index v0.2.0).

    Each winner of the catalog is written as its SKILL.md (a one-file skill) or as a
    .tar.gz of its files, each checked against the index first, and index.json names each
    with its sha256 digest. The same catalog gives the same bytes, so any static web server
    can serve the folder and a `[[roots]] url = ...` elsewhere can index it.

    \b
    Examples:
      skillindex publish wellknown site/
      skillindex --json publish wellknown /var/www/skills
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        written, published = index.publish_wellknown(directory)
    if options.json:
        print_json({"index": str(written), "skills": [each.as_dict() for each in published]})
        return
    kept = [each for each in published if each.kind is not None]
    echo(f"wrote {written}: {count(len(kept), 'skill')}")
    for each in published:
        if each.reason is not None:
            echo(f"  skipped {each.name}: {each.reason}", err=True)
