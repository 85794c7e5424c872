"""Lookups that let a reindex bring a stored resolution up to date in place.

- `ix_candidate_real_path` on `candidate.real_path`: the candidates that share a real directory
  with a changed one (resolution counts such copies once, so their names are judged again).
- `ix_resolved_winner_candidate` on `resolved_winner (set_id, candidate_id)`: a changed
  candidate's winner rows in one stored resolution.

Stored winners keep their order as before; sets written from now on leave room between their
ordinals (`store/resolved.py`, GAP), which older sets do not need: a set without room is
written again whole.

The downgrade drops both indexes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_candidate_real_path", "candidate", ["real_path"], unique=False)
    op.create_index("ix_resolved_winner_candidate", "resolved_winner",
                    ["set_id", "candidate_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_resolved_winner_candidate", table_name="resolved_winner")
    op.drop_index("ix_candidate_real_path", table_name="candidate")
