"""ctime in the change key, and manifest rows without hashes.

A file rewritten to the same size with its mtime restored keeps (size, mtime, inode, device);
only its ctime moves, so ctime_ns is stored beside them for every manifest file and SKILL.md.
A file over the size limit is recorded by its size and never read, so it has no hashes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Not in batch mode: SQLite adds and drops a column in place, and rebuilding `candidate`
    # would break the views that read it.
    op.add_column("candidate", sa.Column("ctime_ns", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("resource") as batch:
        batch.add_column(sa.Column("ctime_ns", sa.BigInteger(), nullable=True))
        batch.alter_column("xxh3", existing_type=sa.String(length=32), nullable=True)
        batch.alter_column("sha256", existing_type=sa.String(length=64), nullable=True)


def downgrade() -> None:
    # Rows of files that were never read cannot be kept where hashes are required.
    op.execute(sa.text("DELETE FROM resource WHERE xxh3 IS NULL OR sha256 IS NULL"))
    with op.batch_alter_table("resource") as batch:
        batch.alter_column("sha256", existing_type=sa.String(length=64), nullable=False)
        batch.alter_column("xxh3", existing_type=sa.String(length=32), nullable=False)
        batch.drop_column("ctime_ns")
    op.drop_column("candidate", "ctime_ns")
