"""Least-privilege GRANTs on PostgreSQL for an indexer role and an agent role, owning nothing."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from skillindex.errors import ConfigError, StoreError

AUDIT_TABLE = "load_event"
VERSION_TABLE = "alembic_version"
# The audit chain's lock (migration 0009): no role but the owner may lock or even read it.
LOCK_TABLE = "load_event_lock"
# The reindex lock (migration 0017): a row only the owner's function locks, which the indexer
# alone may call.
REINDEX_TABLE = "reindex_mutex"
REINDEX_LOCK = "skillindex_reindex_lock(varchar)"
# Runs only ever get added: an anchor (the audit head a reindex saw) cannot be edited away.
RUN_TABLE = "index_run"
# The audit's per-day rollup (migration 0014): written only by the insert trigger, as the owner.
ROLLUP_TABLE = "usage_day"
NOT_POSTGRESQL = ("db grants is for PostgreSQL; a SQLite index is protected by its file's "
                  "permissions (0600)")


# Only the server's own role may name who an event was for: the other roles insert every
# column of the audit but this one.
PRINCIPAL_COLUMN = "principal"


@dataclass(frozen=True, slots=True)
class Roles:
    indexer: str
    agent: str
    server: str | None = None  # the role `serve --http` connects as; None: no role sets one


def require_postgresql(url: str) -> None:
    """Refuse any other backend before connecting (and before a SQLite file is looked for)."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        return  # make_engine reports a malformed URL
    if backend != "postgresql":
        raise ConfigError(NOT_POSTGRESQL)


def _ident(connection: Connection, name: str) -> str:
    return str(connection.execute(text("SELECT quote_ident(:n)"), {"n": name}).scalar_one())


def statements(connection: Connection, roles: Roles) -> list[str]:
    """The GRANTs (after a REVOKE of everything) that give each role exactly its work.

    The indexer writes the catalog tables, may create the temporary tables a reindex stages
    rows in, and appends audit events and runs; the agent reads the catalog and appends audit
    events. Only the server role (`serve --http`'s, when named) may append an event with a
    `principal`: the others may insert every column of the audit table but that one, so no
    host can claim to be a principal the server authenticated. No role may UPDATE, DELETE or
    TRUNCATE the audit table or the runs (which hold the audit's anchors), nor write the
    audit's rollup, nor touch the chain's lock; only the indexer may take the reindex lock,
    through the owner's function. None owns a table, so none can ALTER one or disable its
    triggers. PUBLIC loses TEMPORARY on the database and
    CREATE on the schema, which every role would otherwise have through it. Tables come from
    the database as it is now: run this again after every upgrade.
    """
    if connection.dialect.name != "postgresql":
        raise ConfigError(NOT_POSTGRESQL)
    named = [name for name in (roles.indexer, roles.agent, roles.server) if name is not None]
    if len(set(named)) != len(named):
        raise ConfigError("the indexer, the agent and the server role must differ")
    database, schema = connection.execute(
        text("SELECT quote_ident(current_database()), quote_ident(current_schema())")).one()
    tables = [str(name) for name in connection.execute(text(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    )).scalars()]
    if AUDIT_TABLE not in tables:
        raise StoreError("the database has no skillindex schema yet: run `skillindex db upgrade` "
                         "as the role that is to own the tables first")
    owners = connection.execute(text(
        "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = current_schema() "
        "AND tableowner IN (:indexer, :agent) ORDER BY tablename"),
        {"indexer": roles.indexer, "agent": roles.agent}).first()
    if owners is not None:
        raise StoreError(f"role {owners[1]} owns table {owners[0]}, so it could alter it or drop "
                         "its triggers: let another role own the schema "
                         "(ALTER TABLE ... OWNER TO ...) and grant again")
    views = [str(name) for name in connection.execute(text(
        "SELECT viewname FROM pg_views WHERE schemaname = current_schema() ORDER BY viewname"
    )).scalars()]
    sequences = [str(name) for name in connection.execute(text(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema() "
        "ORDER BY sequencename")).scalars()]
    audit_sequence = connection.execute(
        text("SELECT pg_get_serial_sequence(:t, 'id')"),
        {"t": f"{schema}.{AUDIT_TABLE}"}).scalar_one()

    def names(items: list[str]) -> str:
        return ", ".join(f"{schema}.{_ident(connection, item)}" for item in items)

    indexer, agent = _ident(connection, roles.indexer), _ident(connection, roles.agent)
    server = None if roles.server is None else _ident(connection, roles.server)
    both = f"{indexer}, {agent}"
    # The server reads what the agent reads; it alone may insert an event's principal.
    readers = both if server is None else f"{both}, {server}"
    attributed = ", ".join(_ident(connection, str(name)) for name in connection.execute(text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = :t AND column_name <> :p ORDER BY ordinal_position"),
        {"t": AUDIT_TABLE, "p": PRINCIPAL_COLUMN}).scalars())
    special = (AUDIT_TABLE, VERSION_TABLE, LOCK_TABLE, REINDEX_TABLE, RUN_TABLE,
               ROLLUP_TABLE)
    catalog = [t for t in tables if t not in special]
    rollup = [t for t in tables if t == ROLLUP_TABLE]
    readonly = agent if server is None else f"{agent}, {server}"
    result = [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {readers}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {readers}",
        f"REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC, {readonly}",
        f"REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC, {readers}",
        f"GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {indexer}",
        f"GRANT CONNECT ON DATABASE {database} TO {readonly}",
        f"GRANT USAGE ON SCHEMA {schema} TO {readers}",
        f"GRANT SELECT ON {names([VERSION_TABLE, *views, *rollup])} TO {readers}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {names(catalog)} TO {indexer}",
        f"GRANT SELECT ON {names(catalog)} TO {readonly}",
        f"GRANT SELECT, INSERT ON {names([RUN_TABLE])} TO {indexer}",
        f"GRANT SELECT ON {names([RUN_TABLE])} TO {readonly}",
        f"GRANT SELECT ON {names([AUDIT_TABLE])} TO {readers}",
        f"GRANT INSERT ({attributed}) ON {names([AUDIT_TABLE])} TO {both}",
    ]
    if server is not None:
        result.append(f"GRANT INSERT ON {names([AUDIT_TABLE])} TO {server}")
    if REINDEX_TABLE in tables:
        reindex_lock = f"{schema}.{REINDEX_LOCK}"
        result += [f"REVOKE ALL ON FUNCTION {reindex_lock} FROM PUBLIC, {readonly}",
                   f"GRANT EXECUTE ON FUNCTION {reindex_lock} TO {indexer}"]
    others = [s for s in sequences if audit_sequence not in (f"{schema}.{s}", s)]
    if others:
        result.append(f"GRANT USAGE ON SEQUENCE {names(others)} TO {indexer}")
    result.append(f"GRANT USAGE ON SEQUENCE {audit_sequence} TO {readers}")
    return result


def apply(connection: Connection, roles: Roles) -> list[str]:
    """Run the statements in the caller's transaction; the roles must exist."""
    missing = [name for name in (roles.indexer, roles.agent, roles.server)
               if name is not None and connection.execute(
        text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}).first() is None]
    if missing:
        raise StoreError(f"no role {missing[0]} in this PostgreSQL server: create it first "
                         f"(CREATE ROLE {missing[0]} LOGIN PASSWORD '...')")
    done = statements(connection, roles)
    for statement in done:
        connection.execute(text(statement))
    return done
