"""`skills-lock.json`: an entry for each of the catalog's winners, its folder hashed now
(query/lockfile.py), and the drift of the catalog from a lock file."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from skillindex.query import listing, lockfile
from skillindex.query.library import Library
from skillindex.query.lockfile import LockDrift, LockEntry
from skillindex.query.reader import Here


def lock(store: Library, here: Here, previous: Mapping[str, LockEntry], *,
         cwd: Path) -> dict[str, LockEntry]:
    """The entries of the winners; a skill already in `previous` keeps its `source` and
    `sourceType` there."""
    return dict(_entries(store, here, previous, cwd=cwd))


def verify_lock(store: Library, here: Here, path: Path, *, cwd: Path) -> list[LockDrift]:
    """The winners against a lock file: skills added, removed or changed (each folder hashed
    and compared as it comes, none of the new entries kept)."""
    locked = lockfile.read(path)
    return lockfile.compare(locked, _entries(store, here, locked, cwd=cwd))


def _entries(store: Library, here: Here, previous: Mapping[str, LockEntry], *,
             cwd: Path) -> Iterator[tuple[str, LockEntry]]:
    limit = here.settings.max_skill_bytes
    for winner in listing.iter_winners(store, here, findings=False):
        yield winner.name, lockfile.entry_for(winner.candidate.real_path, cwd=cwd,
                                              previous=previous.get(winner.name),
                                              max_bytes=limit)
