"""The SQL a long-running server reads with: a stored resolution's manifests, and one file's row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.store import sql
from skillindex.store.rows import candidate_of

# Both follow the resolution's ordinal, so a manifest's files arrive right after one another.
_SKILLS = text(
    "SELECT w.ordinal, w.name, c.frontmatter FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id WHERE w.set_id = :set_id ORDER BY w.ordinal")
_FILES = text(
    "SELECT w.ordinal, f.rel_path, f.size, f.xxh3, f.sha256 FROM resolved_winner w "
    "JOIN resource f ON f.candidate_id = w.candidate_id WHERE w.set_id = :set_id "
    "ORDER BY w.ordinal, f.rel_path")
# A winner's candidate and the manifest row of one of its files (NULLs when not indexed). The
# resolution is named by its key, which no other state of the index can have: an id could be
# reused by a later resolution (of other roots, say) once a reindex dropped this one.
_WINNER_FILE = text(
    f"SELECT {sql.CANDIDATE_COLUMNS}, f.rel_path, f.size, f.xxh3, f.sha256 "
    "FROM resolved_set s JOIN resolved_winner w ON w.set_id = s.id "
    "JOIN candidate c ON c.id = w.candidate_id "
    "JOIN root r ON r.id = c.root_id LEFT JOIN resource f ON f.candidate_id = c.id "
    "AND f.rel_path = :rel_path WHERE s.index_name = :index_name AND s.key = :key "
    "AND w.name = :name ORDER BY w.ordinal LIMIT 1")
_KEY = text("SELECT key FROM resolved_set WHERE id = :set_id")
_COLUMNS = len(sql.CANDIDATE_COLUMNS.split(","))

StoredRow = tuple[str, str | None, list[model.ManifestFile]]


def stored_manifests(session: Session, set_id: int) -> Iterator[StoredRow]:
    """(catalog name, frontmatter JSON, files by path) of every winner of a stored
    resolution, in catalog order: two statements, whatever the number of skills."""
    files = iter(session.execute(_FILES, {"set_id": set_id}).all())
    pending: Any = next(files, None)
    for ordinal, name, frontmatter in session.execute(_SKILLS, {"set_id": set_id}):
        found: list[model.ManifestFile] = []
        while pending is not None and pending[0] <= ordinal:
            if pending[0] == ordinal:
                found.append(model.ManifestFile(pending[1], pending[2], pending[3], pending[4]))
            pending = next(files, None)
        yield str(name), frontmatter, found


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
