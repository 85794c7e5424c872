"""The SQL a long-running server reads with: a stored resolution's manifests, and one file's row."""

from __future__ import annotations

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.store import sql
from skillindex.store.rows import candidate_of

# A page of a stored resolution, named by its key (see _WINNER_FILE): its winners, and the files
# of those winners, both in ordinal order so that a manifest's files arrive together.
_SKILLS = text(
    "SELECT w.ordinal, w.name, c.frontmatter, c.signature FROM resolved_set s "
    "JOIN resolved_winner w ON w.set_id = s.id JOIN candidate c ON c.id = w.candidate_id "
    "WHERE s.index_name = :index_name AND s.key = :key AND w.ordinal > :after "
    "ORDER BY w.ordinal LIMIT :limit")
_FILES = text(
    "SELECT w.ordinal, f.rel_path, f.size, f.xxh3, f.sha256 FROM resolved_set s "
    "JOIN resolved_winner w ON w.set_id = s.id "
    "JOIN resource f ON f.candidate_id = w.candidate_id "
    "WHERE s.index_name = :index_name AND s.key = :key AND w.ordinal > :after "
    "AND w.ordinal <= :last ORDER BY w.ordinal, f.rel_path")
# A winner's candidate and the manifest row of one of its files (NULLs when not indexed). The
# resolution is named by its key, which no other state of the index can have: an id could be
# reused by a later resolution (of other roots, say) once a reindex dropped this one.
_WINNER_FILE = text(
    f"SELECT {sql.CANDIDATE_COLUMNS}, f.rel_path, f.size, f.xxh3, f.sha256 "
    "FROM resolved_set s JOIN resolved_winner w ON w.set_id = s.id "
    "JOIN candidate c ON c.id = w.candidate_id "
    "JOIN root r ON r.id = c.root_id LEFT JOIN resource f ON f.candidate_id = c.id "
    "AND f.rel_path = :rel_path WHERE s.index_name = :index_name AND s.key = :key "
    f"AND w.name = :name {sql.BY_NAME_FIRST}")
_KEY = text("SELECT key FROM resolved_set WHERE id = :set_id")
_COLUMNS = len(sql.CANDIDATE_COLUMNS.split(","))

StoredRow = tuple[int, str, str | None, list[model.ManifestFile], str | None]


def stored_page(session: Session, index_name: str, key: str, after: int,
                limit: int) -> list[StoredRow]:
    """(ordinal, catalog name, frontmatter JSON, files by path, signature JSON) of up to
    `limit` winners after ordinal `after` of the stored resolution `key`, in catalog order:
    two statements. Empty when the resolution is gone (a reindex of its roots dropped it)."""
    params = {"index_name": index_name, "key": key, "after": after}
    skills = session.execute(_SKILLS, {**params, "limit": limit}).all()
    if not skills:
        return []
    files: dict[int, list[model.ManifestFile]] = {}
    for ordinal, rel_path, size, xxh3, sha256 in session.execute(
            _FILES, {**params, "last": skills[-1][0]}):
        files.setdefault(ordinal, []).append(model.ManifestFile(rel_path, size, xxh3, sha256))
    return [(int(ordinal), str(name), front, files.get(ordinal, []), signature)
            for ordinal, name, front, signature in skills]


def set_key(session: Session, set_id: int) -> str:
    return str(session.execute(_KEY, {"set_id": set_id}).scalar_one())


def winner_file(connection: Connection, index_name: str, key: str, name: str,
                rel_path: str) -> tuple[model.Candidate, model.ManifestFile | None] | None:
    """The candidate the stored resolution `key` gives `name`, and the manifest row of
    `rel_path` in it, in one statement; None when that resolution (dropped by a reindex of
    its roots) or the name is not there."""
    row = connection.execute(_WINNER_FILE, {"index_name": index_name, "key": key, "name": name,
                                            "rel_path": rel_path}).first()
    if row is None:
        return None
    candidate = candidate_of(row[:_COLUMNS], {})
    file = row[_COLUMNS:]
    return candidate, None if file[0] is None else model.ManifestFile(*file)
