"""What needs no index of a working directory: the database's migrations, the grants of a
shared PostgreSQL index, and the context files a directory's settings look for."""

from __future__ import annotations

from pathlib import Path

from skillindex.config import Environment, Settings, database_url, load_settings
from skillindex.model import ContextFile
from skillindex.providers import context_dirs, environment
from skillindex.query.contextfiles import find_context_files
from skillindex.store import grants, migrate, units
from skillindex.store.engine import make_engine


def context_files(config: Settings | str | Path | None = None, *,
                  cwd: str | Path | None = None,
                  env: Environment | None = None) -> tuple[tuple[str, ...], list[ContextFile]]:
    """The names looked for (`context_files`) and the files found in a directory and its
    ancestors: settings only, no database."""
    env = environment(env, cwd)
    settings = config if isinstance(config, Settings) else load_settings(config, env)
    return settings.context_files, find_context_files(context_dirs(env), settings.context_files)


def migrate_database(action: str, revision: str | None = None, *, db: str | None = None,
                     cwd: str | Path | None = None, env: Environment | None = None,
                     discard_audit: bool = False) -> str | None:
    """`upgrade` (to `revision`, default head), `downgrade` (to `revision`) or `current`.

    A downgrade that would drop audit events (the table, or its chain hashes) raises
    AuditKeptError unless `discard_audit` is set.
    """
    engine = make_engine(database_url(db, environment(env, cwd)), create=action == "upgrade")
    try:
        if action == "upgrade":
            migrate.upgrade(engine, revision or "head")
        elif action == "downgrade":
            migrate.downgrade(engine, revision or "-1", discard_audit=discard_audit)
        elif action != "current":
            raise ValueError(f"unknown migration action {action!r}")
        return migrate.current(engine)
    finally:
        engine.dispose()


def database_grants(*, db: str | None = None, cwd: str | Path | None = None,
                    env: Environment | None = None, indexer: str = "skillindex_indexer",
                    agent: str = "skillindex_agent", server: str | None = None,
                    apply: bool = False) -> list[str]:
    """The least-privilege GRANTs of a PostgreSQL index for an indexer and an agent role, and
    the role `serve --http` connects as (`server`): the only one that may append an event
    with a principal.

    With `apply`, they are run (as the role that owns the tables, or a superuser) in one
    transaction; otherwise only returned. Neither role owns a table: the agent reads the catalog
    and appends audit events, the indexer also writes the catalog; neither can change or remove
    an audit event, alter the table or disable its triggers.
    """
    url = database_url(db, environment(env, cwd))
    grants.require_postgresql(url)
    engine = make_engine(url, create=False)
    roles = grants.Roles(indexer=indexer, agent=agent, server=server)
    try:
        with units.failing_as(engine, "grant"):
            if apply:
                with engine.begin() as connection:
                    return grants.apply(connection, roles)
            with engine.connect() as connection:
                return grants.statements(connection, roles)
    finally:
        engine.dispose()
