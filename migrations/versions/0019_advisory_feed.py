"""Advisory and revocation feeds: `advisory_feed`, one row per index and feed source.

Each row keeps the feed in force (its advisories as JSON, the sha256 of the body they came
from, the ETag it was served with) and the last error, so a feed that fails to read or parse
leaves the previous one in force. Nothing else changes; the downgrade drops the table.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "advisory_feed",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("advisories", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("etag", sa.Text(), nullable=True),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_feed")),
        sa.UniqueConstraint("index_name", "source", name=op.f("uq_advisory_feed_index_name")),
    )


def downgrade() -> None:
    op.drop_table("advisory_feed")
