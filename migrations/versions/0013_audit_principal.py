"""The principal of each audit event: who `serve --http` authenticated by a bearer token.

- `load_event.principal` (text, NULL for a caller nobody authenticated: the command line, stdio,
  an HTTP request without a valid token), an index on it, and the column in `load_event_view`.
- The chain hashes it after the other fields, and only when it holds a value
  (`store/chain.py`): the events written before it hash as they did, so no event is linked
  again and every published head stays valid.
- PostgreSQL: the insert trigger bounds the principal to 256 characters and hashes it so.

The downgrade drops the column. While an event holds a principal it is refused unless told to
discard (--discard-audit): those events are then linked again without their principals, each
index's chain as far as it verifies.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from skillindex.store.migrate import refuse_to_discard_audit

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "0" * 64
FIELDS = ("index_name", "time", "event", "skill", "resource", "level", "bytes", "digest",
          "outcome", "reason", "session", "path")
EVENTS = sa.table("load_event", sa.column("id", sa.Integer()),
                  *(sa.column(name) for name in (*FIELDS, "principal")),
                  sa.column("prev_hash", sa.String()), sa.column("row_hash", sa.String()))
STORED_TIME = "%Y-%m-%d %H:%M:%S.%f"

VIEW = """
    SELECT e.id, e.index_name, e.time, e.event, e.skill, e.resource, e.level,
           CASE e.level WHEN 1 THEN 'catalog' WHEN 2 THEN 'body' ELSE 'resource' END
               AS level_name,
           e.bytes, e.digest, e.outcome, e.reason, e.session, e.path{principal}
    FROM load_event e
"""


def upgrade() -> None:
    op.add_column("load_event", sa.Column("principal", sa.Text(), nullable=True))
    op.create_index("ix_load_event_principal", "load_event", ["principal"], unique=False)
    _view(", e.principal")
    if op.get_bind().dialect.name == "postgresql":
        _pg_chain(principal=True)


def downgrade() -> None:
    bind = op.get_bind()
    postgresql = bind.dialect.name == "postgresql"
    held = bind.execute(sa.text(
        "SELECT count(*) FROM load_event WHERE principal IS NOT NULL")).scalar_one()
    if held:
        refuse_to_discard_audit("drop the principals of the audit events")
        with _updates_allowed(postgresql):
            _link_without_principals()
    if postgresql:
        _pg_chain(principal=False)
    _view("")
    op.drop_index("ix_load_event_principal", table_name="load_event")
    # Not in batch mode: SQLite (3.35 and newer) drops a column the schema no longer names in
    # place, where a batch would make the table anew without its append-only triggers.
    op.execute("ALTER TABLE load_event DROP COLUMN principal")


def _view(principal: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        if not principal:  # PostgreSQL cannot drop a view's column in place
            op.execute("DROP VIEW load_event_view")
        op.execute("CREATE OR REPLACE VIEW load_event_view AS"
                   + VIEW.format(principal=principal))
        return
    op.execute("DROP VIEW load_event_view")
    op.execute("CREATE VIEW load_event_view AS" + VIEW.format(principal=principal))


def _row_hash(prev: str, fields: dict[str, Any], *, principal: bool) -> str:
    """store/chain.py's `row_hash` as of this revision (with the principal or without it)."""
    def field(value: object) -> bytes:
        if value is None:
            return b"-"
        data = str(value).encode("utf-8")
        return b"%d:%s" % (len(data), data)
    data = prev.encode("ascii") + b"\n" + b"".join(field(fields[name]) for name in FIELDS)
    if principal and fields["principal"] is not None:
        data += field(fields["principal"])
    return hashlib.sha256(data).hexdigest()


def _time_text(value: object) -> str:
    """The time as the chain hashes it: SQLite's text as stored, PostgreSQL's instant in UTC."""
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).strftime(STORED_TIME)
    return str(value)


def _link_without_principals() -> None:
    """Each index's events hashed again without their principals, in id order, while its
    chain verifies with them; from its first broken event on an index keeps its hashes."""
    bind = op.get_bind()
    old_heads: dict[str, str] = {}
    new_heads: dict[str, str] = {}
    broken: set[str] = set()
    updates = []
    for row in bind.execute(sa.select(EVENTS).order_by(EVENTS.c.id)).mappings():
        name = row["index_name"]
        fields = {**row, "time": _time_text(row["time"])}
        prev = old_heads.get(name, GENESIS)
        if name in broken or row["prev_hash"] != prev or row["row_hash"] != _row_hash(
                prev, fields, principal=True):
            broken.add(name)
            continue
        old_heads[name] = row["row_hash"]
        link = new_heads.get(name, GENESIS)
        new_heads[name] = digest = _row_hash(link, fields, principal=False)
        if (link, digest) != (row["prev_hash"], row["row_hash"]):
            updates.append({"row_id": row["id"], "prev": link, "hash": digest})
    if updates:
        bind.execute(sa.update(EVENTS).where(EVENTS.c.id == sa.bindparam("row_id"))
                     .values(prev_hash=sa.bindparam("prev"), row_hash=sa.bindparam("hash")),
                     updates)


@contextmanager
def _updates_allowed(postgresql: bool) -> Iterator[None]:
    """The append-only guard lifted for the downgrade's own updates, and put back."""
    if postgresql:
        op.execute("ALTER TABLE load_event DISABLE TRIGGER load_event_append_only")
        yield
        op.execute("ALTER TABLE load_event ENABLE TRIGGER load_event_append_only")
        return
    guard = op.get_bind().execute(sa.text(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' "
        "AND name = 'load_event_no_update'")).scalar_one()
    op.execute("DROP TRIGGER load_event_no_update")
    yield
    op.execute(str(guard))


# migration 0009's chain function, with the principal bounded and hashed when it is given.
PG_CHAIN = """
    CREATE OR REPLACE FUNCTION load_event_chain() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
        head record;
        field text;
        data bytea;
    BEGIN
        PERFORM 1 FROM {schema}.load_event_lock l WHERE l.index_name = NEW.index_name
            FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {schema}.load_event_lock (index_name) VALUES (NEW.index_name)
                ON CONFLICT DO NOTHING;
            PERFORM 1 FROM {schema}.load_event_lock l WHERE l.index_name = NEW.index_name
                FOR UPDATE;
        END IF;
        SELECT e.row_hash, e.time INTO head FROM {schema}.load_event e
        WHERE e.index_name = NEW.index_name ORDER BY e.id DESC LIMIT 1;
        NEW.id := nextval('{sequence}');
        NEW.time := greatest(clock_timestamp(), head.time);
        NEW.skill := {schema}.load_event_bound(NEW.skill, 256);
        NEW.resource := {schema}.load_event_bound(NEW.resource, 1024);
        NEW.reason := {schema}.load_event_bound(NEW.reason, 2000);
        NEW.session := {schema}.load_event_bound(NEW.session, 256);
        NEW.path := {schema}.load_event_bound(NEW.path, 4096);{bound}
        NEW.prev_hash := coalesce(head.row_hash, '{genesis}');
        data := convert_to(NEW.prev_hash || E'\\n', 'UTF8');
        FOREACH field IN ARRAY ARRAY[
            NEW.index_name, to_char(NEW.time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'),
            NEW.event, NEW.skill, NEW.resource, NEW.level::text, NEW.bytes::text, NEW.digest,
            NEW.outcome, NEW.reason, NEW.session, NEW.path]
        LOOP
            data := data || {schema}.load_event_field(field);
        END LOOP;{hashed}
        NEW.row_hash := encode(sha256(data), 'hex');
        RETURN NEW;
    END
    $$
"""
PG_BOUND = "\n        NEW.principal := {schema}.load_event_bound(NEW.principal, 256);"
PG_HASHED = """
        IF NEW.principal IS NOT NULL THEN
            data := data || {schema}.load_event_field(NEW.principal);
        END IF;"""


def _pg_chain(*, principal: bool) -> None:
    sequence, schema = op.get_bind().execute(sa.text(
        "SELECT pg_get_serial_sequence('load_event', 'id'), quote_ident(current_schema())")).one()
    op.execute(PG_CHAIN.format(
        schema=schema, sequence=sequence, genesis=GENESIS,
        bound=PG_BOUND.format(schema=schema) if principal else "",
        hashed=PG_HASHED.format(schema=schema) if principal else ""))
