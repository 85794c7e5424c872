"""The audit hash chain: `prev_hash` and `row_hash` on every load_event row, existing rows chained.

Also: on SQLite a trigger refuses an insert over an existing event (INSERT OR REPLACE deletes the
old row without firing the delete trigger); on PostgreSQL an insert trigger takes the chain's
lock and sets the store's time, the chain hashes and the id, and bounds the caller's text, so a
role that may only insert cannot write a backdated or unchained row.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from skillindex.store import audit
from skillindex.store.chain import utc
from skillindex.store.migrate import refuse_to_discard_audit

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENTS = sa.table(
    "load_event",
    sa.column("id", sa.Integer()),
    sa.column("index_name", sa.String()),
    sa.column("time", sa.DateTime(timezone=True)),
    *(sa.column(name, sa.Text()) for name in ("event", "skill", "resource", "digest", "outcome",
                                              "reason", "session", "path")),
    sa.column("level", sa.Integer()),
    sa.column("bytes", sa.BigInteger()),
    sa.column("prev_hash", sa.String()),
    sa.column("row_hash", sa.String()),
)

# How this revision's chain hashes a time (0009 hashes the stored text instead).
HASHED_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"

SQLITE_NO_REPLACE = """
    CREATE TRIGGER load_event_no_replace BEFORE INSERT ON load_event
    WHEN EXISTS (SELECT 1 FROM load_event
                 WHERE id = NEW.id OR (index_name = NEW.index_name AND prev_hash = NEW.prev_hash))
    BEGIN
        SELECT RAISE(ABORT, 'load_event is append-only: an insert over an existing event refused');
    END
"""

# The same bounds and the same bytes as skillindex/store/audit.py: `bounded` and `row_hash`.
PG_FUNCTIONS = [
    """
    CREATE FUNCTION load_event_bound(value text, size integer) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN value IS NULL OR char_length(value) <= size THEN value
               ELSE left(value, size - char_length(marker)) || marker END
        FROM (SELECT '…[cut from ' || char_length(value) || ' characters]' AS marker) AS m
    $$
    """,
    """
    CREATE FUNCTION load_event_field(value text) RETURNS bytea
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN value IS NULL THEN convert_to('-', 'UTF8')
               ELSE convert_to(octet_length(convert_to(value, 'UTF8')) || ':', 'UTF8')
                    || convert_to(value, 'UTF8') END
    $$
    """,
]
PG_CHAIN = """
    CREATE FUNCTION load_event_chain() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        head record;
        field text;
        data bytea;
    BEGIN
        -- One appender per index at a time, until its transaction ends: the head read below
        -- is the newest committed event, and the id drawn after it orders the chain.
        PERFORM pg_advisory_xact_lock(hashtextextended('skillindex audit ' || NEW.index_name, 0));
        SELECT e.row_hash, e.time INTO head FROM {schema}.load_event e
        WHERE e.index_name = NEW.index_name ORDER BY e.id DESC LIMIT 1;
        NEW.id := nextval('{sequence}');
        NEW.time := greatest(clock_timestamp(), head.time);
        NEW.skill := {schema}.load_event_bound(NEW.skill, {skill});
        NEW.resource := {schema}.load_event_bound(NEW.resource, {resource});
        NEW.reason := {schema}.load_event_bound(NEW.reason, {reason});
        NEW.session := {schema}.load_event_bound(NEW.session, {session});
        NEW.path := {schema}.load_event_bound(NEW.path, {path});
        NEW.prev_hash := coalesce(head.row_hash, '{genesis}');
        data := convert_to(NEW.prev_hash || E'\\n', 'UTF8');
        FOREACH field IN ARRAY ARRAY[
            NEW.index_name,
            to_char(NEW.time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            NEW.event, NEW.skill, NEW.resource, NEW.level::text, NEW.bytes::text, NEW.digest,
            NEW.outcome, NEW.reason, NEW.session, NEW.path]
        LOOP
            data := data || {schema}.load_event_field(field);
        END LOOP;
        NEW.row_hash := encode(sha256(data), 'hex');
        RETURN NEW;
    END
    $$
"""


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    # Plain ALTER TABLE ADD COLUMN on both backends: a SQLite table rebuild would drop the
    # append-only triggers and trip over the view.
    op.add_column("load_event", sa.Column("prev_hash", sa.String(length=64), nullable=True))
    op.add_column("load_event", sa.Column("row_hash", sa.String(length=64), nullable=True))
    _chain_existing_events(postgresql)
    op.create_index("ix_load_event_index_name_id", "load_event", ["index_name", "id"],
                    unique=False)
    op.create_index("ix_load_event_chain", "load_event", ["index_name", "prev_hash"],
                    unique=True)
    if postgresql:
        _create_pg_chain_trigger()
    else:
        op.execute(SQLITE_NO_REPLACE)


def downgrade() -> None:
    refuse_to_discard_audit("drop the audit chain")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS load_event_chain ON load_event")
        op.execute("DROP FUNCTION IF EXISTS load_event_chain()")
        op.execute("DROP FUNCTION IF EXISTS load_event_field(text)")
        op.execute("DROP FUNCTION IF EXISTS load_event_bound(text, integer)")
    else:
        op.execute("DROP TRIGGER IF EXISTS load_event_no_replace")
    op.drop_index("ix_load_event_chain", table_name="load_event")
    op.drop_index("ix_load_event_index_name_id", table_name="load_event")
    op.drop_column("load_event", "row_hash")
    op.drop_column("load_event", "prev_hash")


def _chain_existing_events(postgresql: bool) -> None:
    """Link the events already logged, per index in id order, as the store would have."""
    bind = op.get_bind()
    rows = bind.execute(sa.select(EVENTS).order_by(EVENTS.c.id)).mappings().all()
    if not rows:
        return
    heads: dict[str, str] = {}
    updates = []
    for row in rows:
        fields = {name: row[name] for name in audit.TEXT_FIELDS}
        fields["time"] = utc(row["time"]).strftime(HASHED_TIME)
        prev = heads.get(row["index_name"], audit.GENESIS)
        heads[row["index_name"]] = digest = audit.row_hash(prev, fields)
        updates.append({"row_id": row["id"], "prev": prev, "hash": digest})
    # The append-only guard refuses these updates; it is lifted for this transaction only.
    if postgresql:
        op.execute("ALTER TABLE load_event DISABLE TRIGGER load_event_append_only")
    else:
        op.execute("DROP TRIGGER load_event_no_update")
    bind.execute(sa.update(EVENTS).where(EVENTS.c.id == sa.bindparam("row_id"))
                 .values(prev_hash=sa.bindparam("prev"), row_hash=sa.bindparam("hash")),
                 updates)
    if postgresql:
        op.execute("ALTER TABLE load_event ENABLE TRIGGER load_event_append_only")
    else:
        op.execute("""
            CREATE TRIGGER load_event_no_update BEFORE UPDATE ON load_event
            BEGIN SELECT RAISE(ABORT, 'load_event is append-only: UPDATE refused'); END
        """)


def _create_pg_chain_trigger() -> None:
    # Names in the trigger are qualified: a role's temporary table named load_event would
    # otherwise stand in for the real one in the head lookup.
    sequence, schema = op.get_bind().execute(sa.text(
        "SELECT pg_get_serial_sequence('load_event', 'id'), quote_ident(current_schema())")).one()
    for body in PG_FUNCTIONS:
        op.execute(body)
    op.execute(PG_CHAIN.format(sequence=sequence, genesis=audit.GENESIS, schema=schema,
                               **audit.LIMITS))
    op.execute("""
        CREATE TRIGGER load_event_chain BEFORE INSERT ON load_event
        FOR EACH ROW EXECUTE FUNCTION load_event_chain()
    """)
