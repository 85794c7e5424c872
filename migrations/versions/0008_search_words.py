"""Search text as distinct words, and no vocabulary table.

`candidate.search_text` now holds each word of the text a search reads once, lower-cased, in
order of first appearance: the index needs nothing else, and the body's prose was most of the
database. Stored texts are turned into their words here (the full-text index follows through
its triggers on SQLite and the generated column on PostgreSQL). On SQLite the `fts5vocab`
table goes: a search now counts a word's matches only as far as its budget, which the
vocabulary table cannot (it counts them all).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1_000
# As index/searchtext.py splits them at this revision (kept here so the migration never moves).
_WORD = re.compile(r"[^\W_]+")


def _distinct_words(text: str) -> str:
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text):
        seen.setdefault(match.group().lower(), None)
    return " ".join(seen)


def upgrade() -> None:
    bind = op.get_bind()
    table = sa.table("candidate", sa.column("id", sa.Integer),
                     sa.column("search_text", sa.Text))
    last = 0
    while True:
        rows = bind.execute(sa.select(table.c.id, table.c.search_text)
                            .where(table.c.id > last, table.c.search_text.is_not(None))
                            .order_by(table.c.id).limit(BATCH)).all()
        if not rows:
            break
        last = rows[-1].id
        words = [(cid, _distinct_words(stored)) for cid, stored in rows]
        changed = [{"cid": cid, "words": text or None}
                   for (cid, text), (_, stored) in zip(words, rows, strict=True)
                   if text != stored]
        if changed:
            bind.execute(table.update().where(table.c.id == sa.bindparam("cid"))
                         .values(search_text=sa.bindparam("words")), changed)
    if bind.dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS candidate_fts_vocab")
        # Row-by-row updates leave many small segments; one merge makes the index compact.
        op.execute("INSERT INTO candidate_fts (candidate_fts) VALUES ('optimize')")


def downgrade() -> None:
    # The words stay: the previous revision reads any text, and the prose is not stored.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("CREATE VIRTUAL TABLE candidate_fts_vocab USING fts5vocab(candidate_fts, row)")
