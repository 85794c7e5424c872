"""SQL text shared by the SQLAlchemy path and the sqlite3 start-up path, with `:name` parameters.

Both drivers bind `:name` parameters as written here (SQLAlchemy through `text()`, the sqlite3
module natively), so a statement is defined once and cannot drift between the two paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Every SQLite connection, either driver's: wait for a writer rather than fail, WAL (readers
# never wait for the reindex's write), commits that sync at checkpoints only, and deleted
# rows zeroed only on pages written anyway. SQLite built with SECURE_DELETE (Debian's, and
# the Pythons built on it) otherwise writes every page a delete frees: dropping the cached
# catalogs of 100,000 skills after each reindex wrote 1.7 MB, and the checkpoints that this
# brought due fell on whichever read came next (0.3 s on a catalog read). The setting is per
# schema, and the temporary one (a reindex's staged rows) keeps the build's unless told: it
# zeroed every page of the stage as the stage was dropped (0.06 s of a new index of 10,000).
SQLITE_BUSY_MS = 15_000
SQLITE_PRAGMAS = (f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}", "PRAGMA foreign_keys = ON",
                  "PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL",
                  "PRAGMA secure_delete = FAST", "PRAGMA temp.secure_delete = FAST")

# The columns a candidate is built from, in `rows.candidate_of`'s order.
CANDIDATE_COLUMNS = (
    "c.id, c.name, c.description, c.skill_path, c.dir_path, c.real_path, c.status, c.enabled, "
    "c.disable_model_invocation, r.path, r.scope, r.provider, r.precedence, r.position")

SCHEMA_VERSION = "SELECT version_num FROM alembic_version"
# Reads the schema, so a connection that opened but cannot read its file fails here.
SCHEMA_PROBE = "SELECT count(*) FROM sqlite_master"
ROOT_RUNS = ("SELECT path, last_run_id FROM root WHERE index_name = :index_name "
             "AND path IN ({paths}) ORDER BY path")
CACHED_CATALOG = "SELECT payload FROM catalog_cache WHERE index_name = :index_name AND key = :key"
SET_BY_KEY = "SELECT id FROM resolved_set WHERE index_name = :index_name AND key = :key"
# A name is looked up through (set_id, name); `ordinal + 0` keeps SQLite from walking the
# whole set in ordinal order instead (LIMIT 1 tempts it), which cost a name no skill has 9 ms
# at 61,452 skills rather than 0.03 ms. A resource URI tries up to three names.
BY_NAME_FIRST = "ORDER BY w.ordinal + 0 LIMIT 1"
WINNER_BY_NAME = (
    f"SELECT w.name, w.collision, {CANDIDATE_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    f"WHERE w.set_id = :set_id AND w.name = :name {BY_NAME_FIRST}")
# The winners' names alone, in catalog order (what `usage` needs of a catalog).
WINNER_NAMES = "SELECT name FROM resolved_winner WHERE set_id = :set_id ORDER BY ordinal"
WINNERS_PAGE = (
    f"SELECT w.ordinal, w.name, w.collision, {CANDIDATE_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    "WHERE w.set_id = :set_id AND w.ordinal > :after ORDER BY w.ordinal LIMIT :limit")
DESCRIPTIONS = "SELECT id, description FROM candidate WHERE id IN ({ids})"
# What a catalog reads of every winner to order it and to name those it leaves out; the
# descriptions only of the first few, those its budget can show (`DESCRIPTIONS`).
CATALOG_ORDER = (
    "SELECT w.name, c.name, c.id, c.skill_path, c.disable_model_invocation, c.host_fields "
    "FROM resolved_winner w JOIN candidate c ON c.id = w.candidate_id "
    "WHERE w.set_id = :set_id ORDER BY w.ordinal")
# Other hosts' fields of the few candidates that have any (index/dialect.py).
HOST_FIELDS = ("SELECT id, host_fields FROM candidate WHERE id IN ({ids}) "
               "AND host_fields IS NOT NULL")
# The winners among a search's matched candidates (ids inlined as integers), in catalog order.
SEARCH_WINNERS = (
    f"SELECT w.candidate_id, w.name, w.collision, {CANDIDATE_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    "WHERE w.set_id = :set_id AND w.candidate_id IN ({ids}) ORDER BY w.ordinal")
# What `list` prints of each winner, in catalog order, and the codes of their findings.
# (Roots are few: joined in Python, a lookup per row in SQL costs as much as the rest.)
LISTING = (
    "SELECT w.name, c.id, c.skill_path, c.root_id FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id WHERE w.set_id = :set_id ORDER BY w.ordinal")
# The winners that declare other hosts' fields (few): `list` shows their argument-hint.
LISTING_HOSTS = (
    "SELECT c.id, c.host_fields FROM resolved_winner w JOIN candidate c ON c.id = w.candidate_id "
    "WHERE w.set_id = :set_id AND c.host_fields IS NOT NULL")
# The winners that hold a signature (few): `list` shows who signed them.
LISTING_SIGNATURES = (
    "SELECT c.id, c.signature FROM resolved_winner w JOIN candidate c ON c.id = w.candidate_id "
    "WHERE w.set_id = :set_id AND c.signature IS NOT NULL")
LISTING_ROOTS = ("SELECT id, path, scope, provider, precedence FROM root "
                 "WHERE index_name = :index_name")
LISTING_FINDINGS = (
    "SELECT f.candidate_id, f.code, f.severity FROM finding f "
    "JOIN resolved_winner w ON w.candidate_id = f.candidate_id WHERE w.set_id = :set_id")
# What `list --json` and `candidates --json` print, read by one statement each: a row per
# finding (one row of NULLs for a candidate without any), the findings in the order they were
# written; the winners in catalog order, or the candidates of one root in path order.
ENTRY_COLUMNS = ("c.id, c.name, c.description, c.skill_path, c.status, c.enabled, "
                 "c.disable_model_invocation, f.code, f.severity, f.message")
WINNER_ENTRIES = (
    f"SELECT w.ordinal, w.name, w.collision, c.root_id, {ENTRY_COLUMNS} FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id "
    "LEFT OUTER JOIN finding f ON f.candidate_id = c.id "
    "WHERE w.set_id = :set_id ORDER BY w.ordinal, f.id")
CANDIDATE_ENTRIES = (
    f"SELECT {ENTRY_COLUMNS} FROM candidate c JOIN root r ON r.id = c.root_id "
    "LEFT OUTER JOIN finding f ON f.candidate_id = c.id "
    "WHERE r.index_name = :index_name AND r.path = :root{where} ORDER BY c.skill_path, f.id")
ROOT_SCANS = (
    "SELECT r.path, r.present, i.started_at FROM root r "
    "LEFT OUTER JOIN index_run i ON i.id = r.last_run_id "
    "WHERE r.index_name = :index_name AND r.path IN ({paths})")
COLLISIONS = ("SELECT collision FROM resolved_winner WHERE set_id = :set_id "
              "AND collision IS NOT NULL ORDER BY ordinal")
# The names of those collisions (SQLite's JSON functions: the listing needs nothing else).
COLLIDED_NAMES = ("SELECT json_extract(collision, '$.name') FROM resolved_winner "
                  "WHERE set_id = :set_id AND collision IS NOT NULL ORDER BY ordinal")
# The `uri-collision` warning the reindex recorded on a winner: on the lower side of two
# skills whose URIs meet, which every surface withholds (`lookup.locate`).
URI_COLLISION = ("SELECT message FROM finding WHERE candidate_id = :candidate_id "
                 "AND code = 'uri-collision' ORDER BY id LIMIT 1")
MANIFEST_FILE = ("SELECT rel_path, size, xxh3, sha256 FROM resource "
                 "WHERE candidate_id = :candidate_id AND rel_path = :rel_path")

# What a reindex compares the disk with (both paths; `{paths}` through `for_paths`): each
# skill's tree key, each root's stored values (`ROOT_VALUES` names them, in `rows.root_values`'
# order) and its scan issues; and the row that records a run.
KNOWN_SKILLS = ("SELECT r.path, c.rel_dir, c.id, c.tree_key, c.status FROM root r "
                "JOIN candidate c ON c.root_id = r.id "
                "WHERE r.index_name = :index_name AND r.path IN ({paths})")
ROOT_VALUES = ("scope", "provider", "precedence", "position", "max_depth",
               "require_description", "validation", "name_prefix", "present")
# Every root of an index with its values, in the order a reindex --all adds those the
# directory does not use.
INDEX_ROOTS = (f"SELECT path, {', '.join(ROOT_VALUES)} FROM root "
               "WHERE index_name = :index_name ORDER BY position, id")
SCAN_ISSUES = ("SELECT r.path, s.path, s.code, s.message FROM scan_issue s "
               "JOIN root r ON r.id = s.root_id "
               "WHERE r.index_name = :index_name AND r.path IN ({paths})")
# What a run counts, then every column of its row.
RUN_COUNTS = ("seen", "added", "changed", "unchanged", "removed", "rejected", "files_read")
RUN_COLUMNS = ("index_name", "started_at", "finished_at", "cwd", "all_roots", "roots",
               "duration_s", *RUN_COUNTS, "audit_head", "audit_events")
INSERT_RUN = (f"INSERT INTO index_run ({', '.join(RUN_COLUMNS)}) "
              f"VALUES ({', '.join(':' + name for name in RUN_COLUMNS)}) RETURNING id")
REINDEX_HOLDER = "SELECT holder FROM reindex_lock WHERE index_name = :index_name"

# The audit chain (see store/chain.py): the head of an index's chain, and one append after it.
AUDIT_HEAD = ("SELECT row_hash, time FROM load_event WHERE index_name = :index_name "
              "ORDER BY id DESC LIMIT 1")
AUDIT_APPEND = (
    "INSERT INTO load_event (index_name, time, event, skill, resource, level, bytes, digest, "
    "outcome, reason, session, path, principal, prev_hash, row_hash) VALUES (:index_name, "
    ":time, :event, :skill, :resource, :level, :bytes, :digest, :outcome, :reason, :session, "
    ":path, :principal, :prev_hash, :row_hash) RETURNING id")
# The same without the principal, which only the server's role may insert on PostgreSQL
# (store/grants.py): what every append names when no principal was authenticated.
AUDIT_APPEND_UNATTRIBUTED = (
    "INSERT INTO load_event (index_name, time, event, skill, resource, level, bytes, digest, "
    "outcome, reason, session, path, prev_hash, row_hash) VALUES (:index_name, :time, :event, "
    ":skill, :resource, :level, :bytes, :digest, :outcome, :reason, :session, :path, "
    ":prev_hash, :row_hash) RETURNING id")
# An anchor (store/chain.py `anchor`): the head's id and hash, the newest anchor recorded,
# the event that follows a hash, and how many events an id range of the index holds.
AUDIT_HEAD_ID = ("SELECT id, row_hash FROM load_event WHERE index_name = :index_name "
                 "ORDER BY id DESC LIMIT 1")
LAST_ANCHOR = ("SELECT audit_head, audit_events FROM index_run WHERE index_name = :index_name "
               "AND audit_events IS NOT NULL ORDER BY id DESC LIMIT 1")
AUDIT_AFTER = ("SELECT id FROM load_event WHERE index_name = :index_name "
               "AND prev_hash = :prev_hash ORDER BY id LIMIT 1")
AUDIT_COUNT_FROM = ("SELECT count(*) FROM load_event WHERE index_name = :index_name "
                    "AND id >= :low AND id <= :high")
# Every anchor of an index once, with the first run that recorded it (`chain.anchors_of`).
AUDIT_ANCHORS = (
    "SELECT audit_events, audit_head, MIN(id), MIN(started_at) FROM index_run "
    "WHERE index_name = :index_name AND audit_events IS NOT NULL "
    "GROUP BY audit_events, audit_head ORDER BY audit_events")
# Audit rows oldest first, in `rows.event_of`'s order, then the id; bytes per level for each
# session.
AUDIT_EVENTS = ("SELECT time, event, level, outcome, skill, resource, bytes, digest, reason, "
                "session, path, principal, id FROM load_event WHERE {where} ORDER BY id")
AUDIT_LEVELS = (
    "SELECT session, "
    "COALESCE(SUM(CASE WHEN level = 1 THEN bytes ELSE 0 END), 0), "
    "COALESCE(SUM(CASE WHEN level = 2 THEN bytes ELSE 0 END), 0), "
    "COALESCE(SUM(CASE WHEN level = 3 THEN bytes ELSE 0 END), 0), COUNT(*) "
    "FROM load_event WHERE {where} GROUP BY session ORDER BY MIN(id)")


def audit_filter(statement: str, index_name: str, *, session: str | None, skill: str | None,
                 outcome: str | None, since: object | None) -> tuple[str, dict[str, Any]]:
    """AUDIT_EVENTS or AUDIT_LEVELS narrowed to one index and the filters given; `since` is
    bound as the caller's driver compares times (`:since`)."""
    params: dict[str, Any] = {"index_name": index_name}
    where = ["index_name = :index_name"]
    for column, value in (("session", session), ("skill", skill), ("outcome", outcome)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    if since is not None:
        where.append("time >= :since")
        params["since"] = since
    return statement.format(where=" AND ".join(where)), params


def for_paths(statement: str, paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """A statement with a `{paths}` IN list, for these root paths (as both drivers bind it),
    and its path parameters."""
    names = [f"p{n}" for n in range(len(paths))]
    marks = ", ".join(f":{name}" for name in names) or "NULL"
    return statement.format(paths=marks), dict(zip(names, paths, strict=True))


def root_runs(paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """ROOT_RUNS for these paths and its path parameters."""
    return for_paths(ROOT_RUNS, paths)


def root_scans(paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """ROOT_SCANS for these paths and its path parameters."""
    return for_paths(ROOT_SCANS, paths)


def candidate_entries(*, status: bool, code: bool) -> str:
    """CANDIDATE_ENTRIES of the candidates of one status (`:status`) and with a finding of one
    code (`:code`), where asked."""
    where = (" AND c.status = :status" if status else "") + (
        " AND c.id IN (SELECT candidate_id FROM finding WHERE code = :code)" if code else "")
    return CANDIDATE_ENTRIES.format(where=where)
