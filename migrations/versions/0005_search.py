"""Full-text search over the candidates: the text a search reads beside name and description
(`search_text`), the frontmatter's `disable-model-invocation`, and the index itself (an FTS5
table kept in step by triggers on SQLite, a generated `tsvector` column with a GIN index on
PostgreSQL), built for the rows already stored.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The weights are letters on PostgreSQL: name A, description B, the rest C.
POSTGRESQL_VECTOR = """
    setweight(to_tsvector('english'::regconfig, coalesce(name, '')), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(description, '')), 'B')
    || setweight(to_tsvector('english'::regconfig, coalesce(search_text, '')), 'C')
"""
SQLITE_TRIGGERS = {
    "candidate_fts_insert": """
        CREATE TRIGGER candidate_fts_insert AFTER INSERT ON candidate BEGIN
            INSERT INTO candidate_fts (rowid, name, description, search_text)
            VALUES (new.id, new.name, new.description, new.search_text);
        END""",
    "candidate_fts_delete": """
        CREATE TRIGGER candidate_fts_delete AFTER DELETE ON candidate BEGIN
            INSERT INTO candidate_fts (candidate_fts, rowid, name, description, search_text)
            VALUES ('delete', old.id, old.name, old.description, old.search_text);
        END""",
    "candidate_fts_update": """
        CREATE TRIGGER candidate_fts_update
        AFTER UPDATE OF name, description, search_text ON candidate BEGIN
            INSERT INTO candidate_fts (candidate_fts, rowid, name, description, search_text)
            VALUES ('delete', old.id, old.name, old.description, old.search_text);
            INSERT INTO candidate_fts (rowid, name, description, search_text)
            VALUES (new.id, new.name, new.description, new.search_text);
        END""",
}


def upgrade() -> None:
    bind = op.get_bind()
    # Plain ADD COLUMN on both backends: a batch copy of the table would have to drop and
    # recreate the auditor views that read it.
    op.add_column("candidate", sa.Column("search_text", sa.Text(), nullable=True))
    op.add_column("candidate", sa.Column("disable_model_invocation", sa.Boolean(),
                                         nullable=False, server_default=sa.false()))
    _carry_over_frontmatter(bind)
    if bind.dialect.name == "postgresql":
        op.execute(f"ALTER TABLE candidate ADD COLUMN search_vector tsvector "
                   f"GENERATED ALWAYS AS ({POSTGRESQL_VECTOR}) STORED")
        op.execute("CREATE INDEX ix_candidate_search_vector ON candidate "
                   "USING gin (search_vector)")
    elif bind.dialect.name == "sqlite":
        # No stemming: the words themselves are what the vocabulary table counts, which the
        # search looks its words up in (store/search.py), and stemming measured no better.
        op.execute("CREATE VIRTUAL TABLE candidate_fts USING fts5(name, description, "
                   "search_text, content='candidate', content_rowid='id', "
                   "tokenize='unicode61 remove_diacritics 2')")
        op.execute("CREATE VIRTUAL TABLE candidate_fts_vocab USING fts5vocab(candidate_fts, row)")
        for statement in SQLITE_TRIGGERS.values():
            op.execute(statement)
        op.execute("INSERT INTO candidate_fts (candidate_fts) VALUES ('rebuild')")


def _carry_over_frontmatter(bind: sa.Connection) -> None:
    """Rows indexed before this revision: the flag comes from their stored frontmatter (the
    search text of the body waits for their next change, since the body is not stored)."""
    table = sa.table("candidate", sa.column("id", sa.Integer), sa.column("frontmatter", sa.Text),
                     sa.column("disable_model_invocation", sa.Boolean))
    flagged = []
    for cid, text in bind.execute(sa.select(table.c.id, table.c.frontmatter).where(
            table.c.frontmatter.like("%disable-model-invocation%"))):
        try:
            fields = json.loads(text)
        except ValueError:
            continue
        value = fields.get("disable-model-invocation") if isinstance(fields, dict) else None
        if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
            flagged.append(cid)
    if flagged:
        bind.execute(table.update().where(table.c.id.in_(flagged))
                     .values(disable_model_invocation=True))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_candidate_search_vector")
        op.execute("ALTER TABLE candidate DROP COLUMN IF EXISTS search_vector")
    elif bind.dialect.name == "sqlite":
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS candidate_fts_vocab")
        op.execute("DROP TABLE IF EXISTS candidate_fts")
    # A plain DROP COLUMN (SQLite 3.35 and later), as the upgrade added them.
    op.execute("ALTER TABLE candidate DROP COLUMN disable_model_invocation")
    op.execute("ALTER TABLE candidate DROP COLUMN search_text")
