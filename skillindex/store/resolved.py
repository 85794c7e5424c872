"""The SQL of materialized resolutions: stored root sets and their winners, read in order."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, text, update
from sqlalchemy.orm import Session

from skillindex.model import Listing, has_text
from skillindex.store import sql
from skillindex.store.models import Candidate, ResolvedSet, ResolvedWinner, Root

RESOLVED_SETS = 32  # resolutions kept per index (working directories and settings seen)
PAGE = 2_000  # rows a streamed read holds at once


def root_runs(session: Session, index_name: str, paths: Sequence[str]) -> list[tuple[str, int]]:
    """The last run that changed each of these roots: what a resolution depends on."""
    statement, params = sql.root_runs(paths)
    return [(path, run or 0) for path, run in session.execute(
        text(statement), {"index_name": index_name, **params})]


def set_id(session: Session, index_name: str, key: str) -> int | None:
    found = session.execute(text(sql.SET_BY_KEY), {"index_name": index_name, "key": key}).scalar()
    return None if found is None else int(found)


# What resolution reads of a candidate besides its id and root: `resolvable` selects or
# filters on each. A reindex that replaces candidates leaving all of them as they were may
# carry a stored resolution over (staging.Stage.keeps_resolution).
RESOLVED_COLUMNS = ("name", "enabled", "status", "skill_path", "real_path")


def resolvable(session: Session, index_name: str, paths: Sequence[str],
               ) -> tuple[list[tuple[int, str, bool, str, str, str | None]], set[str]]:
    """What resolution needs of every accepted, named candidate of these roots:
    (id, name, enabled, root path, SKILL.md path, real directory), and the names more than
    one of them declares. The real directory is given only where another candidate shares it
    (all resolution asks of it), each root path is one string however many rows hold it, and
    the rows are read through the connection, not buffered by the ORM first: at 100,000
    skills each of these is tens of megabytes."""
    if not paths:
        return [], set()
    usable = (Root.index_name == index_name, Root.path.in_(list(paths)),
              Candidate.status == "accepted", Candidate.name.is_not(None))
    connection = session.connection()

    def repeated(column: Any) -> set[str]:
        return {value for (value,) in connection.execute(
            select(column).join(Root, Root.id == Candidate.root_id).where(*usable)
            .group_by(column).having(func.count() > 1))}

    shared, contested = repeated(Candidate.real_path), repeated(Candidate.name)
    rows = connection.execute(
        select(Candidate.id, Candidate.name, Candidate.enabled, Root.path, Candidate.skill_path,
               Candidate.real_path)
        .join(Root, Root.id == Candidate.root_id).where(*usable))
    roots: dict[str, str] = {}
    return [(int(cid), str(name), bool(enabled), roots.setdefault(root, root), skill,
             real if real in shared else None)
            for cid, name, enabled, root, skill, real in rows], contested


def store_set(session: Session, index_name: str, key: str, roots: Sequence[str],
              winners: Iterable[tuple[str, int, str | None]]) -> int:
    """Write one resolution: (catalog name, candidate id, collision JSON) in catalog order,
    taken from `winners` a chunk at a time."""
    new_id = int(session.execute(
        insert(ResolvedSet).returning(ResolvedSet.id),
        [{"index_name": index_name, "key": key, "roots": json.dumps(sorted(roots)),
          "winners": 0}]).scalar_one())
    ordinals, pending = itertools.count(1), iter(winners)
    written = 0
    # Core, not the ORM's bulk insert: one executemany a chunk, no per-row bookkeeping.
    statement = insert(ResolvedWinner)
    connection = session.connection()
    while chunk := [{"set_id": new_id, "ordinal": next(ordinals), "name": name,
                     "candidate_id": cid, "collision": collision}
                    for name, cid, collision in itertools.islice(pending, 10_000)]:
        connection.execute(statement, chunk)
        written += len(chunk)
    session.execute(update(ResolvedSet).where(ResolvedSet.id == new_id).values(winners=written))
    # Hosts in ever new directories (or settings) must not grow the table without bound.
    old = [sid for (sid,) in session.execute(
        select(ResolvedSet.id).where(ResolvedSet.index_name == index_name,
                                     ResolvedSet.id <= new_id - RESOLVED_SETS))]
    if old:
        drop_sets(session, old)
    return new_id


def drop_sets(session: Session, ids: Sequence[int]) -> None:
    # Winners first: a cascade needs foreign keys on, which a raw connection may not have.
    session.execute(delete(ResolvedWinner).where(ResolvedWinner.set_id.in_(list(ids))))
    session.execute(delete(ResolvedSet).where(ResolvedSet.id.in_(list(ids))))


def drop_sets_over(session: Session, index_name: str, paths: Iterable[str],
                   keep: int | None = None) -> None:
    """Delete the resolutions that cover any of these roots (their candidates changed), but
    `keep`."""
    changed = set(paths)
    if not changed:
        return
    stale = [sid for sid, roots in session.execute(
        select(ResolvedSet.id, ResolvedSet.roots).where(ResolvedSet.index_name == index_name))
        if sid != keep and changed.intersection(json.loads(roots))]
    if stale:
        drop_sets(session, stale)


def rekey(session: Session, set_id: int, key: str, replaced: Sequence[tuple[int, int]]) -> None:
    """Carry a resolution over to a new state of the index: its new key, and the new id of
    each replaced candidate among its winners (found by a pass over the set in SQL, then
    updated by ordinal)."""
    new_ids = dict(replaced)
    olds = sorted(new_ids)
    connection = session.connection()
    moved = [{"at": ordinal, "new_id": new_ids[cid]}
             for start in range(0, len(olds), 500)
             for ordinal, cid in connection.execute(
                 select(ResolvedWinner.ordinal, ResolvedWinner.candidate_id)
                 .where(ResolvedWinner.set_id == set_id,
                        ResolvedWinner.candidate_id.in_(olds[start:start + 500])))]
    if moved:
        connection.execute(
            update(ResolvedWinner)
            .where(ResolvedWinner.set_id == set_id,
                   ResolvedWinner.ordinal == bindparam("at"))
            .values(candidate_id=bindparam("new_id")), moved)
    session.execute(update(ResolvedSet).where(ResolvedSet.id == set_id).values(key=key))


def winner_row(session: Session, set_id: int, name: str) -> Any:
    return session.execute(text(sql.WINNER_BY_NAME), {"set_id": set_id, "name": name}).first()


def search_winners(session: Session, set_id: int, ids: Sequence[int]) -> list[Any]:
    """The rows of `sql.SEARCH_WINNERS`: the winners among these matched candidates."""
    if not ids:
        return []
    statement = sql.SEARCH_WINNERS.format(ids=", ".join(str(int(cid)) for cid in ids))
    return list(session.execute(text(statement), {"set_id": set_id}))


def catalog_listing(session: Session, set_id: int) -> Iterator[Listing]:
    """Every winner as the catalog reads it, in catalog order, streamed: the descriptions pass
    through one page at a time, never all held."""
    rows = session.execute(text(sql.CATALOG_LISTING), {"set_id": set_id},
                           execution_options={"yield_per": PAGE})
    for name, declared, cid, path, manual, description in rows:
        yield Listing(name, declared, cid, path, not manual, has_text(description))


def descriptions(session: Session, ids: Sequence[int]) -> dict[int, str]:
    """The descriptions of these candidates (none for one without)."""
    found: dict[int, str] = {}
    for start in range(0, len(ids), PAGE):
        chunk = ids[start:start + PAGE]
        marks = ", ".join(str(int(cid)) for cid in chunk)
        for cid, description in session.execute(text(sql.DESCRIPTIONS.format(ids=marks))):
            if description is not None:
                found[cid] = description
    return found


def winner_names(session: Session, set_id: int) -> list[str]:
    return [str(name) for (name,) in session.execute(text(sql.WINNER_NAMES), {"set_id": set_id})]


def host_fields(session: Session, ids: Sequence[int]) -> dict[int, str]:
    """The stored host fields (JSON) of those of these candidates that have any."""
    found: dict[int, str] = {}
    for start in range(0, len(ids), PAGE):
        marks = ", ".join(str(int(cid)) for cid in ids[start:start + PAGE])
        for cid, value in session.execute(text(sql.HOST_FIELDS.format(ids=marks))):
            found[cid] = value
    return found


def winner_host_fields(session: Session, set_id: int) -> dict[int, str]:
    """The stored host fields (JSON) of the winners of a set that have any."""
    return {cid: value for cid, value in session.execute(text(sql.LISTING_HOSTS),
                                                          {"set_id": set_id})}


def winners_page(session: Session, set_id: int, after: int, limit: int) -> list[Any]:
    return list(session.execute(text(sql.WINNERS_PAGE),
                                {"set_id": set_id, "after": after, "limit": limit}))


def collisions(session: Session, set_id: int) -> list[str]:
    return [str(value) for (value,) in session.execute(text(sql.COLLISIONS), {"set_id": set_id})]
