"""Schema migrations: db upgrade, downgrade, current."""

from __future__ import annotations

from collections.abc import Callable

import click

from skillindex.cli.common import cli, options_of, print_json


@cli.group()
def db() -> None:
    """Database schema migrations (Alembic)."""


def _migration(action: str) -> Callable[..., None]:
    def run(ctx: click.Context, revision: str | None = None) -> None:
        from skillindex.api import migrate_database  # noqa: PLC0415

        options = options_of(ctx)
        current = migrate_database(action, revision, db=options.db, cwd=options.cwd)
        if options.json:
            print_json({"revision": current})
        else:
            click.echo(current or "(empty database)")
    return run


@db.command()
@click.argument("revision", required=False, default="head")
@click.pass_context
def upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    _migration("upgrade")(ctx, revision)


@db.command()
@click.argument("revision")
@click.pass_context
def downgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database down to REVISION (`base` empties it, `-1` goes one step)."""
    _migration("downgrade")(ctx, revision)


@db.command()
@click.pass_context
def current(ctx: click.Context) -> None:
    """Print the database's migration revision."""
    _migration("current")(ctx)
