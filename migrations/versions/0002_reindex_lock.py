"""The reindex lock: one row per index that is being reindexed, naming the holder.

On SQLite the row is the lock (taken in a write transaction, refreshed while the reindex runs,
deleted at its end, taken over when stale); on PostgreSQL an advisory lock does the excluding and
the row only tells a waiting process who holds it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reindex_lock",
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("index_name", name=op.f("pk_reindex_lock")),
    )


def downgrade() -> None:
    op.drop_table("reindex_lock")
