"""The reindex lock on PostgreSQL: a row no role but the owner may lock, not an advisory lock.

- `reindex_mutex`, one row per index, and `skillindex_reindex_lock(index_name)`, which locks
  (first inserting) that row as the schema's owner (SECURITY DEFINER, its search path pinned).
  A reindex holds the row in a transaction of a connection of its own for as long as it runs;
  the server ends that transaction, and the lock, when the process or the connection dies.
  Where 0002's advisory lock could be taken by any role that can connect, stalling every
  reindex for `reindex_timeout`, EXECUTE on the function is revoked from PUBLIC: only the owner,
  and the indexer role `db grants` names, may take it. No role is granted the table itself.
- SQLite is unchanged: its `reindex_lock` row with a lease stays the lock.

The downgrade drops the function and the table (0002's code takes the advisory lock again).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCK = """
    CREATE FUNCTION {schema}.skillindex_reindex_lock(wanted varchar) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
        PERFORM 1 FROM {schema}.reindex_mutex m WHERE m.index_name = wanted FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {schema}.reindex_mutex (index_name) VALUES (wanted)
                ON CONFLICT DO NOTHING;
            PERFORM 1 FROM {schema}.reindex_mutex m WHERE m.index_name = wanted FOR UPDATE;
        END IF;
    END
    $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = op.get_bind().execute(sa.text("SELECT quote_ident(current_schema())")).scalar_one()
    op.execute("CREATE TABLE reindex_mutex (index_name varchar(100) PRIMARY KEY)")
    op.execute(LOCK.format(schema=schema))
    op.execute(f"REVOKE ALL ON FUNCTION {schema}.skillindex_reindex_lock(varchar) FROM PUBLIC")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP FUNCTION skillindex_reindex_lock(varchar)")
    op.execute("DROP TABLE reindex_mutex")
