"""The permission bits of every manifest file, which an approval is bound to.

`resource.mode` (integer, NULL in rows stored before) holds `st_mode & 0o7777` of each file
and SKILL.md as the reindex found it; an approval's digest covers its execute bits, so a
`chmod +x` after `skillindex trust` revokes the approval. The rules' version moves with this
revision, so the first reindex after the upgrade writes every skill's rows again, modes
included (files whose stat is unchanged are not read again).

The downgrade drops the column; the approvals made with it then no longer match (their
digests covered the modes) and the skills they served must be trusted again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("resource") as batch:
        batch.add_column(sa.Column("mode", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resource") as batch:
        batch.drop_column("mode")
