"""Schema migrations: db upgrade, downgrade, current."""

from __future__ import annotations

from collections.abc import Callable

import click

from skillindex.cli import params
from skillindex.cli.common import cli, count, echo, json_option, options_of, print_json


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
    def run(ctx: click.Context, revision: str | None = None, discard_audit: bool = False,
            as_json: bool = False) -> None:
        from skillindex.api import migrate_database  # noqa: PLC0415

        options = options_of(ctx, as_json)
        current = migrate_database(action, revision, db=options.db, cwd=options.cwd,
                                   discard_audit=discard_audit)
        if options.json:
            print_json({"revision": current})
        else:
            echo(current or "(empty database)")
    return run


@db.command()
@click.argument("revision", required=False, default="head", type=params.REVISION)
@json_option
@click.pass_context
def upgrade(ctx: click.Context, revision: str, as_json: bool) -> None:
    """Migrate the database up to REVISION (default: head).

    A database that does not exist yet is created.

    \b
    Examples:
      skillindex db upgrade
      skillindex --db postgresql://agent@dbhost/skills db upgrade
    """
    _migration("upgrade")(ctx, revision, as_json=as_json)


# `-1` looks like an option to click; taking unknown options as arguments lets it through.
@db.command(context_settings={"ignore_unknown_options": True})
@click.argument("revision", type=params.REVISION)
@click.option("--discard-audit", is_flag=True,
              help="Allow dropping audit events (the table or its chain); refused without it.")
@json_option
@click.pass_context
def downgrade(ctx: click.Context, revision: str, discard_audit: bool, as_json: bool) -> None:
    """Migrate the database down to REVISION.

    `base` empties it; `-1` goes one step down. A step that would drop audit events, or their
    chain hashes, is refused while the log holds any, unless `--discard-audit` is given.

    \b
    Examples:
      skillindex db downgrade -1
      skillindex db downgrade base --discard-audit
    """
    _migration("downgrade")(ctx, revision, discard_audit, as_json)


@db.command()
@json_option
@click.pass_context
def current(ctx: click.Context, as_json: bool) -> None:
    """Print the database's migration revision.

    \b
    Examples:
      skillindex db current
      skillindex db current --json
    """
    _migration("current")(ctx, as_json=as_json)


@db.command(name="grants")
@click.option("--indexer", default="skillindex_indexer", show_default=True, metavar="ROLE",
              type=params.ROLE,
              help="The role that reindexes: writes the catalog, appends audit events.")
@click.option("--agent", default="skillindex_agent", show_default=True, metavar="ROLE",
              type=params.ROLE,
              help="The role agent hosts connect as: reads the catalog, appends audit events.")
@click.option("--server", default=None, metavar="ROLE", type=params.ROLE,
              help="The role `serve --http` connects as: reads what the agent reads, and is "
              "the only one that may append an event with a principal.")
@click.option("--apply", "apply_them", is_flag=True,
              help="Run the statements (as the tables' owner) instead of printing them.")
@json_option
@click.pass_context
def grants(ctx: click.Context, indexer: str, agent: str, server: str | None, apply_them: bool,
           as_json: bool) -> None:
    """Print (or apply) least-privilege GRANTs on a PostgreSQL index.

    No role owns a table, so none can alter the audit table or disable its triggers; none
    may UPDATE, DELETE or TRUNCATE it. Only the server role may append an event with a
    principal (who `serve --http` authenticated); without --server no role may. Run again
    after every `db upgrade`.

    \b
    Examples:
      skillindex --db postgresql://admin@dbhost/skills db grants
      skillindex --db postgresql://admin@dbhost/skills db grants --agent hosts --apply
      skillindex --db postgresql://admin@dbhost/skills db grants --server team --apply
    """
    from skillindex.api import database_grants  # noqa: PLC0415

    options = options_of(ctx, as_json)
    done = database_grants(db=options.db, cwd=options.cwd, indexer=indexer, agent=agent,
                           server=server, apply=apply_them)
    if options.json:
        print_json({"applied": apply_them, "statements": done})
        return
    for statement in done:
        echo(f"{statement};")
    if apply_them:
        echo(f"-- applied {count(len(done), 'statement')}", err=True)
