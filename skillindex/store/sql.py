"""SQL text shared by the SQLAlchemy path and the sqlite3 start-up path, with `:name` parameters.

Both drivers bind `:name` parameters as written here (SQLAlchemy through `text()`, the sqlite3
module natively), so a statement is defined once and cannot drift between the two paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The columns a candidate is built from, in `queries.candidate_of`'s order.
CANDIDATE_COLUMNS = (
    "c.id, c.name, c.description, c.skill_path, c.dir_path, c.real_path, c.status, c.enabled, "
    "c.disable_model_invocation, r.path, r.scope, r.provider, r.precedence, r.position")

SCHEMA_VERSION = "SELECT version_num FROM alembic_version"
ROOT_RUNS = ("SELECT path, last_run_id FROM root WHERE index_name = :index_name "
             "AND path IN ({paths}) ORDER BY path")
CACHED_CATALOG = "SELECT payload FROM catalog_cache WHERE index_name = :index_name AND key = :key"
SET_BY_KEY = "SELECT id FROM resolved_set WHERE index_name = :index_name AND key = :key"
WINNER_BY_NAME = (
    f"SELECT w.name, w.collision, {CANDIDATE_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    "WHERE w.set_id = :set_id AND w.name = :name ORDER BY w.ordinal LIMIT 1")
WINNERS_PAGE = (
    f"SELECT w.ordinal, w.name, w.collision, {CANDIDATE_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    "WHERE w.set_id = :set_id AND w.ordinal > :after ORDER BY w.ordinal LIMIT :limit")
CATALOG_ITEMS = (
    "SELECT w.name, c.description, c.skill_path FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id WHERE w.set_id = :set_id ORDER BY w.ordinal")
COLLISIONS = ("SELECT collision FROM resolved_winner WHERE set_id = :set_id "
              "AND collision IS NOT NULL ORDER BY ordinal")
MANIFEST_FILE = ("SELECT rel_path, size, xxh3, sha256 FROM resource "
                 "WHERE candidate_id = :candidate_id AND rel_path = :rel_path")


def root_runs(paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """ROOT_RUNS for these paths (an IN list both drivers bind) and its path parameters."""
    names = [f"p{n}" for n in range(len(paths))]
    marks = ", ".join(f":{name}" for name in names) or "NULL"
    return ROOT_RUNS.format(paths=marks), dict(zip(names, paths, strict=True))
