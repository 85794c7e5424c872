"""Schema migrations: db upgrade, downgrade, current."""

from __future__ import annotations

from collections.abc import Callable

import click

from skillindex.cli.common import cli, options_of, print_json


@cli.group()
def db() -> None:
    """Migrate the database schema (Alembic).

    \b
    Examples:
      skillindex db current
      skillindex db upgrade
      skillindex db downgrade -1
    """


def _migration(action: str) -> Callable[..., None]:
    def run(ctx: click.Context, revision: str | None = None, discard_audit: bool = False) -> None:
        from skillindex.api import migrate_database  # noqa: PLC0415

        options = options_of(ctx)
        current = migrate_database(action, revision, db=options.db, cwd=options.cwd,
                                   discard_audit=discard_audit)
        if options.json:
            print_json({"revision": current})
        else:
            click.echo(current or "(empty database)")
    return run


@db.command()
@click.argument("revision", required=False, default="head")
@click.pass_context
def upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head).

    A database that does not exist yet is created.

    \b
    Examples:
      skillindex db upgrade
      skillindex --db postgresql://agent@dbhost/skills db upgrade
    """
    _migration("upgrade")(ctx, revision)


# `-1` looks like an option to click; taking unknown options as arguments lets it through.
@db.command(context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@click.option("--discard-audit", is_flag=True,
              help="Allow dropping audit events (the table or its chain); refused without it.")
@click.pass_context
def downgrade(ctx: click.Context, revision: str, discard_audit: bool) -> None:
    """Migrate the database down to REVISION.

    `base` empties it; `-1` goes one step down. A step that would drop audit events, or their
    chain hashes, is refused while the log holds any, unless `--discard-audit` is given.

    \b
    Examples:
      skillindex db downgrade -1
      skillindex db downgrade base --discard-audit
    """
    _migration("downgrade")(ctx, revision, discard_audit)


@db.command()
@click.pass_context
def current(ctx: click.Context) -> None:
    """Print the database's migration revision.

    \b
    Examples:
      skillindex db current
      skillindex --json db current
    """
    _migration("current")(ctx)

