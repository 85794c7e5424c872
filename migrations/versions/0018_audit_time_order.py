"""The audit's times only go forward on SQLite: an insert earlier than its chain's head is refused.

- SQLite: `load_event_in_order`, a BEFORE INSERT trigger, refuses an event whose time is earlier
  than the time of the newest event of its index. Every append already writes the later of the
  clock and the head's time (store/chain.py `linked`); the trigger makes any other insert (a
  hand-written one, correctly chained, with an old time) fail as well. The times are compared
  as the stored text, which the CHECK constraint of 0009 holds to one fixed-width form.
- PostgreSQL is unchanged: its insert trigger sets every event's time itself (0004).

The downgrade drops the trigger.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_IN_ORDER = """
    CREATE TRIGGER load_event_in_order BEFORE INSERT ON load_event
    WHEN NEW.time < (SELECT e.time FROM load_event e WHERE e.index_name = NEW.index_name
                     ORDER BY e.id DESC LIMIT 1)
    BEGIN
        SELECT RAISE(ABORT, 'load_event is in time order: an event earlier than its head refused');
    END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(SQLITE_IN_ORDER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS load_event_in_order")
