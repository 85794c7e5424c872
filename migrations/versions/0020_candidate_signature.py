"""Signatures: `candidate.signature`, the skill's `skill.oms.sig` as verified at index time.

JSON text (status verified, failed or unverified; the signer, a key fingerprint or a
certificate subject; the signature file's sha256; why it failed), NULL for a skill without a
signature or a root with signatures = "off". The downgrade drops the column.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("candidate", sa.Column("signature", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("candidate", "signature")
