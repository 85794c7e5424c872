"""The schema revision this code expects, importable without SQLAlchemy or Alembic."""

from __future__ import annotations

# The newest migration; a test keeps it equal to the head of migrations/versions.
HEAD = "0013"
