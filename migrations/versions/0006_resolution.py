"""Resolution materialized per root set: the winners, their catalog names and order.

A reindex resolves the roots of its working directory in its write transaction; a caller
whose roots were never resolved (another project, changed settings) resolves once and stores
the result. `resolved_set.key` digests the roots as planned, the runs that last changed them and
the settings that steer resolution, so a stored set can never answer for a changed index.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "resolved_set",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("roots", sa.Text(), nullable=False),
        sa.Column("winners", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resolved_set")),
        sa.UniqueConstraint("index_name", "key", name=op.f("uq_resolved_set_index_name")),
    )
    op.create_table(
        "resolved_winner",
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("collision", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["set_id"], ["resolved_set.id"],
                                name=op.f("fk_resolved_winner_set_id_resolved_set"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("set_id", "ordinal", name=op.f("pk_resolved_winner")),
    )
    op.create_index("ix_resolved_winner_name", "resolved_winner", ["set_id", "name"])


def downgrade() -> None:
    op.drop_index("ix_resolved_winner_name", table_name="resolved_winner")
    op.drop_table("resolved_winner")
    op.drop_table("resolved_set")
