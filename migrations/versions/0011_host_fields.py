"""The fields of other agent hosts that skillindex reads, kept with each candidate.

`candidate.host_fields` holds, as JSON, what the frontmatter fields of Claude Code, Cursor and the
seed (`when_to_use`, `paths`, `globs`, `alwaysApply`, `user-invocable`, `argument-hint`,
`arguments`) and Codex's `agents/openai.yaml` policy say about the skill, NULL when it uses
none; the catalog reads it without parsing the stored frontmatter again. Rows indexed before
stay NULL until a reindex judges them again (the rules' version moved with this revision).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Not in batch mode: SQLite adds and drops a column in place, and rebuilding `candidate`
    # would break the views and triggers that read it.
    op.add_column("candidate", sa.Column("host_fields", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("candidate", "host_fields")
