"""Usage for auditors and the report: the `usage_view` of skill-level audit events, an index
that serves a time window of one index's events, and the record of each `verify`.

`usage_view` has one row per audit event, with the UTC day it fell on and whether it was a
successful load (`loaded`) or a failed attempt (`failed`); `skillindex usage` and the report
aggregate it. Its columns only ever grow (a principal will join them), so a query that names
its columns keeps working. `verify_run` keeps what each `verify` found, so a report can show
the drift of the last one without hashing every file again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The stored time's UTC date as text: SQLite keeps the UTC time as text, PostgreSQL a
# timestamp with time zone.
DAY = {
    "sqlite": "substr(e.time, 1, 10)",
    "postgresql": "to_char(e.time AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
USAGE_VIEW = """
    CREATE VIEW usage_view AS
    SELECT e.id, e.index_name, e.time, {day} AS day, e.event, e.skill, e.resource, e.level,
           e.outcome, e.bytes, e.session,
           CASE WHEN e.outcome = 'ok' AND e.level >= 2 THEN 1 ELSE 0 END AS loaded,
           CASE WHEN e.outcome <> 'ok' THEN 1 ELSE 0 END AS failed
    FROM load_event e
"""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.execute(USAGE_VIEW.format(day=DAY.get(dialect, DAY["sqlite"])))
    op.create_index("ix_load_event_index_name_time", "load_event", ["index_name", "time"],
                    unique=False)
    op.create_table(
        "verify_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("roots", sa.Text(), nullable=False),
        sa.Column("skills", sa.Integer(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("drifted", sa.Integer(), nullable=False),
        sa.Column("drift", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verify_run")),
    )
    op.create_index("ix_verify_run_index_name_id", "verify_run", ["index_name", "id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_verify_run_index_name_id", table_name="verify_run")
    op.drop_table("verify_run")
    op.drop_index("ix_load_event_index_name_time", table_name="load_event")
    op.execute("DROP VIEW usage_view")
