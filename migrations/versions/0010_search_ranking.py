"""Search ranks every match by the same BM25 on both backends, over stemmed words.

SQLite: the FTS5 table is built again with the `porter` tokenizer (stemming measured better on
requests as people phrase them), its triggers as before. PostgreSQL: a text search
configuration `skillindex_search` that stems as FTS5's porter does and drops no word; the
vector is generated again with it from the fields' words (punctuation read as a space, as
FTS5's tokenizer reads it); `search_length` counts the vector's positions, and the one-row
table `search_total`, kept by statement triggers on `candidate`, holds how many candidates
there are and the sum of their lengths: what BM25 needs of the whole table, which FTS5 keeps
for itself. Both indexes are rebuilt from the rows stored.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As revision 0005 wrote them (kept here so that this migration never moves).
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
STEMMED = "porter unicode61 remove_diacritics 2"
UNSTEMMED = "unicode61 remove_diacritics 2"

# ASCII punctuation, and the Latin-1, general and CJK punctuation blocks: FTS5's unicode61
# splits words at them, PostgreSQL's parser would keep `fast—simple` or `a.b` as one token.
_SEPARATORS = (r"'[[:punct:]\u00a0-\u00bf\u00d7\u00f7\u2000-\u206f\u3000-\u303f"
               r"\uff01-\uff0f]+'")


def _words(column: str) -> str:
    return (f"to_tsvector('skillindex_search'::regconfig, "
            f"regexp_replace(coalesce({column}, ''), {_SEPARATORS}, ' ', 'g'))")


POSTGRESQL_VECTOR = (f"setweight({_words('name')}, 'A') || setweight({_words('description')}, "
                     f"'B') || setweight({_words('search_text')}, 'C')")
# As revision 0005 generated it.
OLD_VECTOR = """
    setweight(to_tsvector('english'::regconfig, coalesce(name, '')), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(description, '')), 'B')
    || setweight(to_tsvector('english'::regconfig, coalesce(search_text, '')), 'C')
"""
# What the parser makes of words without punctuation; every kind is stemmed, none dropped.
PARSER_TYPES = ("asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, "
               "hword_part, hword_numpart, int, uint")
POSTGRESQL_UPGRADE = (
    "CREATE TEXT SEARCH DICTIONARY skillindex_porter (TEMPLATE = snowball, LANGUAGE = porter)",
    "CREATE TEXT SEARCH CONFIGURATION skillindex_search (PARSER = default)",
    f"ALTER TEXT SEARCH CONFIGURATION skillindex_search ADD MAPPING FOR {PARSER_TYPES} "
    "WITH skillindex_porter",
    """CREATE FUNCTION skillindex_positions(tsvector) RETURNS integer
       LANGUAGE sql IMMUTABLE PARALLEL SAFE
       AS $$ SELECT coalesce(sum(cardinality(positions)), 0)::integer FROM unnest($1) $$""",
    "DROP INDEX ix_candidate_search_vector",
    "ALTER TABLE candidate DROP COLUMN search_vector",
    f"ALTER TABLE candidate ADD COLUMN search_vector tsvector "
    f"GENERATED ALWAYS AS ({POSTGRESQL_VECTOR}) STORED",
    f"ALTER TABLE candidate ADD COLUMN search_length integer NOT NULL "
    f"GENERATED ALWAYS AS (skillindex_positions({POSTGRESQL_VECTOR})) STORED",
    "CREATE INDEX ix_candidate_search_vector ON candidate USING gin (search_vector)",
    """CREATE TABLE search_total (
           id smallint PRIMARY KEY CHECK (id = 1),
           candidates bigint NOT NULL,
           words bigint NOT NULL)""",
    """INSERT INTO search_total (id, candidates, words)
       SELECT 1, count(*), coalesce(sum(search_length), 0) FROM candidate""",
    # One update per statement, whatever it writes: a reindex moves its rows with one
    # INSERT ... SELECT, and a root's candidates go with one cascading DELETE.
    """CREATE FUNCTION search_total_count() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
           IF TG_OP IN ('INSERT', 'UPDATE') THEN
               UPDATE search_total SET
                   candidates = candidates + (SELECT count(*) FROM new_rows),
                   words = words + (SELECT coalesce(sum(search_length), 0) FROM new_rows);
           END IF;
           IF TG_OP IN ('DELETE', 'UPDATE') THEN
               UPDATE search_total SET
                   candidates = candidates - (SELECT count(*) FROM old_rows),
                   words = words - (SELECT coalesce(sum(search_length), 0) FROM old_rows);
           END IF;
           RETURN NULL;
       END $$""",
    """CREATE TRIGGER search_total_insert AFTER INSERT ON candidate
       REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION search_total_count()""",
    """CREATE TRIGGER search_total_update AFTER UPDATE ON candidate
       REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION search_total_count()""",
    """CREATE TRIGGER search_total_delete AFTER DELETE ON candidate
       REFERENCING OLD TABLE AS old_rows
       FOR EACH STATEMENT EXECUTE FUNCTION search_total_count()""",
)
POSTGRESQL_DOWNGRADE = (
    "DROP TRIGGER search_total_insert ON candidate",
    "DROP TRIGGER search_total_update ON candidate",
    "DROP TRIGGER search_total_delete ON candidate",
    "DROP FUNCTION search_total_count()",
    "DROP TABLE search_total",
    "DROP INDEX ix_candidate_search_vector",
    "ALTER TABLE candidate DROP COLUMN search_length",
    "ALTER TABLE candidate DROP COLUMN search_vector",
    f"ALTER TABLE candidate ADD COLUMN search_vector tsvector "
    f"GENERATED ALWAYS AS ({OLD_VECTOR}) STORED",
    "CREATE INDEX ix_candidate_search_vector ON candidate USING gin (search_vector)",
    "DROP FUNCTION skillindex_positions(tsvector)",
    "DROP TEXT SEARCH CONFIGURATION skillindex_search",
    "DROP TEXT SEARCH DICTIONARY skillindex_porter",
)


def _sqlite_index(tokenize: str) -> None:
    for name in SQLITE_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS candidate_fts")
    op.execute("CREATE VIRTUAL TABLE candidate_fts USING fts5(name, description, search_text, "
               f"content='candidate', content_rowid='id', tokenize='{tokenize}')")
    for statement in SQLITE_TRIGGERS.values():
        op.execute(statement)
    op.execute("INSERT INTO candidate_fts (candidate_fts) VALUES ('rebuild')")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _sqlite_index(STEMMED)
    elif dialect == "postgresql":
        for statement in POSTGRESQL_UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _sqlite_index(UNSTEMMED)
    elif dialect == "postgresql":
        for statement in POSTGRESQL_DOWNGRADE:
            op.execute(statement)
