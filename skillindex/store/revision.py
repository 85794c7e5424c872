"""The schema revision this code expects, importable without SQLAlchemy or Alembic."""

from __future__ import annotations

# The newest migration; a test keeps it equal to the head of migrations/versions.
HEAD = "0020"
# Every revision, oldest first: the migrations are numbered one after another (a test keeps
# this equal to the history Alembic reads).
REVISIONS = tuple(f"{number:04d}" for number in range(1, int(HEAD) + 1))
