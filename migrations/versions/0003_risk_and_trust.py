"""Risk findings and trust: where a finding is (file and line), each file's judged risks, and
approvals that bind a skill's name to the exact content that was approved.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD and DROP COLUMN, not batch mode: SQLite does both in place (3.35 and newer),
# while batch mode would rebuild the tables under the auditor views that select from them.
def upgrade() -> None:
    op.add_column("finding", sa.Column("path", sa.Text(), nullable=True))
    op.add_column("finding", sa.Column("line", sa.Integer(), nullable=True))
    # NULL: not judged yet (an index from before the risk rules): the file is read again.
    op.add_column("resource", sa.Column("risks", sa.Text(), nullable=True))
    op.create_table(
        "approval",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval")),
        sa.UniqueConstraint("index_name", "name", "digest", name=op.f("uq_approval_index_name")),
    )


def downgrade() -> None:
    op.drop_table("approval")
    op.drop_column("resource", "risks")
    op.drop_column("finding", "line")
    op.drop_column("finding", "path")
