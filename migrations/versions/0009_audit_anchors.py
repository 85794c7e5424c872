"""Audit rows that say only what happened, anchored by every reindex.

- The chain hashes each field's stored text exactly: `time` enters as SQLite keeps it
  (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC), which on PostgreSQL is the text of the stored instant,
  where 0004 hashed a parsed instant (`...THH:MM:SS.ffffffZ`). Every event is linked again under
  this rule, per index in id order, as far as its chain verifies under the old one; from a
  broken event on, the rows keep the hashes they had, so the break stays where it was. Every
  head changes: a head published before the upgrade is no longer in the chain (publish anew).
- CHECK constraints refuse what no disclosure writes: an event with another level than its own
  (catalog.published 1; skill.read and skill.command 2; resource.read 3), an unknown outcome,
  negative bytes, and on SQLite a time in any other text form. Rows already stored are kept as
  they are (PostgreSQL: NOT VALID; SQLite: copied with the checks off); `audit verify` judges them.
- `index_run.audit_head` and `audit_events`: the chain's head and length as each reindex found
  it (an anchor), so a removed tail older than the last reindex is seen without a pinned head.
- PostgreSQL: the insert trigger takes the chain's lock as a row of `load_event_lock`, which it
  locks as the schema's owner (SECURITY DEFINER) and no other role may lock, where 0004 took an
  advisory lock that any role could take and hold.

The downgrade links the events again under 0004's rule and drops the anchors, which it refuses
while the audit holds events unless told to discard them (--discard-audit; the events stay).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from skillindex.store.migrate import refuse_to_discard_audit

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "0" * 64
FIELDS = ("index_name", "time", "event", "skill", "resource", "level", "bytes", "digest",
          "outcome", "reason", "session", "path")
# The time as each rule hashes it (Python and PostgreSQL spellings).
OLD_TIME = ("%Y-%m-%dT%H:%M:%S.%fZ", 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
NEW_TIME = ("%Y-%m-%d %H:%M:%S.%f", "YYYY-MM-DD HH24:MI:SS.US")

EVENTS = sa.table("load_event", sa.column("id", sa.Integer()),
                  *(sa.column(name) for name in FIELDS),
                  sa.column("prev_hash", sa.String()), sa.column("row_hash", sa.String()))

CHECKS = {
    "ck_load_event_event_level": (
        "(event = 'catalog.published' AND level = 1) OR (event = 'skill.read' AND level = 2) "
        "OR (event = 'skill.command' AND level = 2) OR (event = 'resource.read' AND level = 3)"),
    "ck_load_event_outcome": (
        "outcome IN ('ok', 'refused', 'mismatch', 'missing', 'not-found', 'error')"),
    "ck_load_event_bytes": "bytes >= 0",
}
# SQLite keeps times as text: exactly one text per instant, a real date and time.
SQLITE_TIME_CHECK = (
    "typeof(time) = 'text' AND time GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] "
    "[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]' "
    "AND strftime('%Y-%m-%d %H:%M:%S', time) = substr(time, 1, 19)")


def _sqlite_checks() -> str:
    clauses = {**CHECKS, "ck_load_event_time": SQLITE_TIME_CHECK}
    return "".join(f", CONSTRAINT {name} CHECK ({body})" for name, body in clauses.items())


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.add_column("index_run", sa.Column("audit_head", sa.String(length=64), nullable=True))
    op.add_column("index_run", sa.Column("audit_events", sa.BigInteger(), nullable=True))
    if postgresql:
        with _pg_guard_lifted():
            _link_again(OLD_TIME[0], NEW_TIME[0], canonical=False)
        for name, body in CHECKS.items():
            op.execute(f"ALTER TABLE load_event ADD CONSTRAINT {name} CHECK ({body}) NOT VALID")
        op.execute("CREATE TABLE load_event_lock (index_name varchar(100) PRIMARY KEY)")
        _pg_chain(NEW_TIME[1], owner_lock=True)
    else:
        with _sqlite_rebuilt(lambda create: create[:create.rindex(")")] + _sqlite_checks()
                             + create[create.rindex(")"):]):
            _link_again(OLD_TIME[0], NEW_TIME[0], canonical=True)


def downgrade() -> None:
    refuse_to_discard_audit("drop the audit anchors")
    if op.get_bind().dialect.name == "postgresql":
        _pg_chain(OLD_TIME[1], owner_lock=False)
        op.execute("DROP TABLE load_event_lock")
        for name in CHECKS:
            op.execute(f"ALTER TABLE load_event DROP CONSTRAINT {name}")
        with _pg_guard_lifted():
            _link_again(NEW_TIME[0], OLD_TIME[0], canonical=False)
    else:
        with _sqlite_rebuilt(lambda create: create.replace(_sqlite_checks(), "")):
            _link_again(NEW_TIME[0], OLD_TIME[0], canonical=False)
    op.drop_column("index_run", "audit_events")
    op.drop_column("index_run", "audit_head")


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise ValueError(f"not a time: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _row_hash(prev: str, fields: dict[str, Any]) -> str:
    """store/chain.py's `row_hash` as of this revision: a later change of it is no change here."""
    def field(value: object) -> bytes:
        if value is None:
            return b"-"
        data = str(value).encode("utf-8")
        return b"%d:%s" % (len(data), data)
    data = prev.encode("ascii") + b"\n" + b"".join(field(fields[name]) for name in FIELDS)
    return hashlib.sha256(data).hexdigest()


def _link_again(old_time: str, new_time: str, *, canonical: bool) -> None:
    """Hash every event again with `new_time`, per index in id order, while its chain holds
    under `old_time`; from its first broken event on an index keeps the hashes it had.
    `canonical`: SQLite keeps each time as the text the new rule hashes (instants unchanged)."""
    bind = op.get_bind()
    rows = bind.execute(sa.select(EVENTS).order_by(EVENTS.c.id)).mappings().all()
    old_heads: dict[str, str] = {}
    new_heads: dict[str, str] = {}
    broken: set[str] = set()
    updates = []
    for row in rows:
        name = row["index_name"]
        try:
            instant = _utc(row["time"])
        except ValueError:
            broken.add(name)  # only an edit leaves a time that is no time
            continue
        stored = instant.strftime(NEW_TIME[0]) if canonical else row["time"]
        if name not in broken:
            fields = {**row, "time": instant.strftime(old_time)}
            prev = old_heads.get(name, GENESIS)
            if row["prev_hash"] != prev or row["row_hash"] != _row_hash(prev, fields):
                broken.add(name)
        if name in broken:
            if stored != row["time"]:
                updates.append({"row_id": row["id"], "prev": row["prev_hash"],
                                "hash": row["row_hash"], "time": stored})
            continue
        old_heads[name] = row["row_hash"]
        prev = new_heads.get(name, GENESIS)
        new_heads[name] = digest = _row_hash(prev, {**row, "time": instant.strftime(new_time)})
        updates.append({"row_id": row["id"], "prev": prev, "hash": digest, "time": stored})
    if updates:
        bind.execute(sa.update(EVENTS).where(EVENTS.c.id == sa.bindparam("row_id"))
                     .values(prev_hash=sa.bindparam("prev"), row_hash=sa.bindparam("hash"),
                             time=sa.bindparam("time")), updates)


@contextmanager
def _pg_guard_lifted() -> Iterator[None]:
    """The append-only guard refuses the updates of `_link_again`: lifted for them alone."""
    op.execute("ALTER TABLE load_event DISABLE TRIGGER load_event_append_only")
    yield
    op.execute("ALTER TABLE load_event ENABLE TRIGGER load_event_append_only")


@contextmanager
def _sqlite_rebuilt(change: Callable[[str], str]) -> Iterator[None]:
    """load_event made anew from its own CREATE TABLE as `change` rewrites it, its rows
    copied as they are (the checks off for the copy), its indexes, triggers and every view
    made again as they were. A rebuild, since SQLite cannot add a constraint to a table; the
    views go first because a table they name cannot be renamed. The body of the `with` runs
    on the old table with its triggers dropped."""
    bind = op.get_bind()
    schema = bind.execute(sa.text(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND "
        "(type = 'view' OR (tbl_name = 'load_event' AND type IN ('index', 'trigger')))")).all()
    kept = [str(sql) for kind, _, sql in sorted(
        schema, key=lambda item: ("index", "trigger", "view").index(item[0]))]
    for kind, name, _ in schema:
        if kind != "index":
            op.execute(f'DROP {kind.upper()} "{name}"')
    yield
    create = bind.execute(sa.text(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'load_event'")).scalar_one()
    op.execute(change(str(create)).replace("load_event", "load_event_rebuilt", 1))
    op.execute("PRAGMA ignore_check_constraints = ON")
    op.execute("INSERT INTO load_event_rebuilt SELECT * FROM load_event")
    op.execute("PRAGMA ignore_check_constraints = OFF")
    op.execute("DROP TABLE load_event")
    op.execute("ALTER TABLE load_event_rebuilt RENAME TO load_event")
    for statement in kept:
        op.execute(statement)


PG_CHAIN = """
    CREATE OR REPLACE FUNCTION load_event_chain() RETURNS trigger LANGUAGE plpgsql
    {security} AS $$
    DECLARE
        head record;
        field text;
        data bytea;
    BEGIN
        -- One appender per index at a time, until its transaction ends: the head read below
        -- is the newest committed event, and the id drawn after it orders the chain.
        {lock}
        SELECT e.row_hash, e.time INTO head FROM {schema}.load_event e
        WHERE e.index_name = NEW.index_name ORDER BY e.id DESC LIMIT 1;
        NEW.id := nextval('{sequence}');
        NEW.time := greatest(clock_timestamp(), head.time);
        NEW.skill := {schema}.load_event_bound(NEW.skill, 256);
        NEW.resource := {schema}.load_event_bound(NEW.resource, 1024);
        NEW.reason := {schema}.load_event_bound(NEW.reason, 2000);
        NEW.session := {schema}.load_event_bound(NEW.session, 256);
        NEW.path := {schema}.load_event_bound(NEW.path, 4096);
        NEW.prev_hash := coalesce(head.row_hash, '{genesis}');
        data := convert_to(NEW.prev_hash || E'\\n', 'UTF8');
        FOREACH field IN ARRAY ARRAY[
            NEW.index_name, to_char(NEW.time AT TIME ZONE 'UTC', '{time}'),
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
# Any role may take any advisory lock; a row of load_event_lock only its owner may lock, and
# this function does so as the owner, in the appender's transaction.
OWNER_LOCK = """
        PERFORM 1 FROM {schema}.load_event_lock l WHERE l.index_name = NEW.index_name
            FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {schema}.load_event_lock (index_name) VALUES (NEW.index_name)
                ON CONFLICT DO NOTHING;
            PERFORM 1 FROM {schema}.load_event_lock l WHERE l.index_name = NEW.index_name
                FOR UPDATE;
        END IF;"""
ADVISORY_LOCK = ("PERFORM pg_advisory_xact_lock(hashtextextended('skillindex audit ' || "
                 "NEW.index_name, 0));")


def _pg_chain(time: str, *, owner_lock: bool) -> None:
    sequence, schema = op.get_bind().execute(sa.text(
        "SELECT pg_get_serial_sequence('load_event', 'id'), quote_ident(current_schema())")).one()
    # A SECURITY DEFINER function runs with a fixed search path, so that no object a caller
    # creates can stand in for one it names (every name below is qualified besides).
    security = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp" if owner_lock else ""
    lock = (OWNER_LOCK if owner_lock else ADVISORY_LOCK).format(schema=schema)
    op.execute(PG_CHAIN.format(security=security, lock=lock, schema=schema, sequence=sequence,
                               genesis=GENESIS, time=time))
