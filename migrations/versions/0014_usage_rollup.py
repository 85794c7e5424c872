"""A per-day rollup of the audit for `usage`: `usage_day`, one row per index, UTC day and
skill name, kept by an insert trigger on `load_event`.

Each row holds what `usage_view`'s rows of that day and name sum to: successful loads of the
body and of files, the bytes they handed over, the first and last load, each failed
skill-level outcome, every skill-level attempt, the catalog publications and the failed
attempts. The rollup is derived and holds nothing the events do not: it is made here from the
events already logged, a reader checks or makes it again from them (`store/usage.py`), and no
figure of the chain depends on it. The audit stays append-only, so an insert trigger is all
that keeps it in step. On PostgreSQL the trigger's function runs as the schema's owner
(SECURITY DEFINER, fixed search path): the roles that may append events may only read the
rollup.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FAILURES = {"refused": "refused", "mismatch": "mismatch", "missing": "missing",
            "not_found": "not-found", "error": "error"}
# Each figure of a row as the sum (or bound) of one event's value: `{e}` names the event.
FIGURES = {
    "body": "CASE WHEN {e}.outcome = 'ok' AND {e}.level = 2 THEN 1 ELSE 0 END",
    "resource": "CASE WHEN {e}.outcome = 'ok' AND {e}.level = 3 THEN 1 ELSE 0 END",
    "bytes": "CASE WHEN {e}.outcome = 'ok' AND {e}.level >= 2 THEN coalesce({e}.bytes, 0) "
             "ELSE 0 END",
    **{column: f"CASE WHEN {{e}}.level >= 2 AND {{e}}.outcome = '{outcome}' THEN 1 ELSE 0 END"
       for column, outcome in FAILURES.items()},
    "attempts": "CASE WHEN {e}.level >= 2 THEN 1 ELSE 0 END",
    "published": "CASE WHEN {e}.level = 1 THEN 1 ELSE 0 END",
    "failed": "CASE WHEN {e}.level >= 2 AND {e}.outcome <> 'ok' THEN 1 ELSE 0 END",
}
LOADED = "{e}.outcome = 'ok' AND {e}.level >= 2"
DAY = {
    "sqlite": "substr({e}.time, 1, 10)",
    "postgresql": "to_char({e}.time AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
KEY = "index_name = {e}.index_name AND day = {day} AND skill IS NOT DISTINCT FROM {e}.skill"
SQLITE_KEY = "index_name = {e}.index_name AND day = {day} AND skill IS {e}.skill"


def _add(e: str, day: str, key: str) -> tuple[str, str]:
    """The two statements that add event `e` to its row: make the row if it is missing,
    then add the event's figures to it."""
    insert = (f"INSERT INTO {{table}} (index_name, day, skill) SELECT {e}.index_name, {day}, "
              f"{e}.skill WHERE NOT EXISTS (SELECT 1 FROM {{table}} WHERE "
              + key.format(e=e, day=day) + ")")
    loaded = LOADED.format(e=e)
    update = (
        "UPDATE {table} SET "
        + ", ".join(f"{column} = {column} + {figure.format(e=e)}"
                    for column, figure in FIGURES.items())
        + f", first_load = CASE WHEN {loaded} AND (first_load IS NULL OR {e}.time < first_load) "
        f"THEN {e}.time ELSE first_load END"
        + f", last_load = CASE WHEN {loaded} AND (last_load IS NULL OR {e}.time > last_load) "
        f"THEN {e}.time ELSE last_load END WHERE " + key.format(e=e, day=day))
    return insert, update


def _rebuild(day: str) -> str:
    """Every row of the rollup from the events already logged."""
    loaded = LOADED.format(e="e")
    return (
        "INSERT INTO usage_day (index_name, day, skill, " + ", ".join(FIGURES)
        + ", first_load, last_load) SELECT e.index_name, " + day.format(e="e") + ", e.skill, "
        + ", ".join(f"SUM({figure.format(e='e')})" for figure in FIGURES.values())
        + f", MIN(CASE WHEN {loaded} THEN e.time END), MAX(CASE WHEN {loaded} THEN e.time END)"
        " FROM load_event e GROUP BY e.index_name, " + day.format(e="e") + ", e.skill"
        # In day order, as the trigger adds them: a window's days are neighbours on disk.
        " ORDER BY 2, 3")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "usage_day",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("skill", sa.Text(), nullable=True),
        *(sa.Column(column, sa.BigInteger() if column == "bytes" else sa.Integer(),
                    nullable=False, server_default="0") for column in FIGURES),
        sa.Column("first_load", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_load", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_day")),
    )
    op.create_index("ix_usage_day_index_name_day_skill", "usage_day",
                    ["index_name", "day", "skill"], unique=False)
    op.execute(_rebuild(DAY["postgresql" if dialect == "postgresql" else "sqlite"]))
    if dialect == "postgresql":
        _pg_trigger()
        return
    day = DAY["sqlite"].format(e="NEW")
    insert, update = (statement.format(table="usage_day")
                      for statement in _add("NEW", day, SQLITE_KEY))
    op.execute(f"CREATE TRIGGER load_event_usage_day AFTER INSERT ON load_event BEGIN "
               f"{insert}; {update}; END")


def _pg_trigger() -> None:
    schema = op.get_bind().execute(sa.text("SELECT quote_ident(current_schema())")).scalar_one()
    day = DAY["postgresql"].format(e="NEW")
    insert, update = (statement.format(table=f"{schema}.usage_day")
                      for statement in _add("NEW", day, KEY))
    # Appenders of one index take the chain's lock first (the BEFORE trigger), so two of them
    # never make the same row.
    op.execute(f"""
        CREATE FUNCTION load_event_usage_day() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        BEGIN
            {insert};
            {update};
            RETURN NULL;
        END
        $$
    """)
    op.execute("""
        CREATE TRIGGER load_event_usage_day AFTER INSERT ON load_event
        FOR EACH ROW EXECUTE FUNCTION load_event_usage_day()
    """)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS load_event_usage_day ON load_event")
        op.execute("DROP FUNCTION IF EXISTS load_event_usage_day()")
    else:
        op.execute("DROP TRIGGER IF EXISTS load_event_usage_day")
    op.drop_index("ix_usage_day_index_name_day_skill", table_name="usage_day")
    op.drop_table("usage_day")
