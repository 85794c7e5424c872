"""The SQL of materialized resolutions: stored root sets and their winners, read in order."""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, text, update
from sqlalchemy.orm import Session

from skillindex.model import Listing
from skillindex.store import bulk, sql
from skillindex.store.models import Candidate, Finding, ResolvedSet, ResolvedWinner, Root

RESOLVED_SETS = 32  # resolutions kept per index (working directories and settings seen)
PAGE = 2_000  # rows a streamed read holds at once
# Winners are written GAP apart in catalog order, so that a winner added later takes an ordinal
# between its neighbours' and no other row moves (`place`). Ten additions in one gap fill it;
# the set is then written again. 2**31 / GAP = 2,097,151 winners fit the column.
GAP = 1_024
LAST_ORDINAL = 2**31 - 1
# A reindex that removes or adds more candidates than this resolves its roots from scratch.
CHANGE_MAX = 2_000

ResolvableRow = tuple[int, str, bool, str, str, str | None]


@dataclass(frozen=True, slots=True)
class Change:
    """What one reindex's write did to the candidates: the (id, name, real directory) of each
    it deleted, read before the delete, and the ids of those it added (a changed skill is
    both). The names and directories a stored resolution must judge again start here."""

    removed: tuple[tuple[int, str | None, str | None], ...]
    added: tuple[int, ...]


def removed_rows(session: Session, ids: Sequence[int],
                 ) -> tuple[tuple[int, str | None, str | None], ...]:
    """(id, name, real directory) of these candidates, before they are deleted."""
    found: list[tuple[int, str | None, str | None]] = []
    for start in range(0, len(ids), 500):
        found.extend((int(cid), name, real) for cid, name, real in session.execute(
            select(Candidate.id, Candidate.name, Candidate.real_path)
            .where(Candidate.id.in_(list(ids[start:start + 500])))))
    return tuple(found)


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


def _usable(index_name: str, paths: Sequence[str]) -> tuple[Any, ...]:
    return (Root.index_name == index_name, Root.path.in_(list(paths)),
            Candidate.status == "accepted", Candidate.name.is_not(None))


def _repeated(session: Session, column: Any, usable: tuple[Any, ...]) -> set[str]:
    """The values of `column` more than one usable candidate holds."""
    return {value for (value,) in session.connection().execute(
        select(column).join(Root, Root.id == Candidate.root_id).where(*usable)
        .group_by(column).having(func.count() > 1))}


def contested(session: Session, index_name: str, paths: Sequence[str]) -> set[str]:
    """The names more than one accepted candidate of these roots declares."""
    return _repeated(session, Candidate.name, _usable(index_name, paths)) if paths else set()


def resolvable(session: Session, index_name: str, paths: Sequence[str],
               ) -> tuple[list[ResolvableRow], set[str]]:
    """What resolution needs of every accepted, named candidate of these roots:
    (id, name, enabled, root path, SKILL.md path, real directory), and the names more than
    one of them declares. The real directory is given only where another candidate shares it
    (all resolution asks of it), each root path is one string however many rows hold it, and
    the rows are read through the connection, not buffered by the ORM first: at 100,000
    skills each of these is tens of megabytes."""
    if not paths:
        return [], set()
    usable = _usable(index_name, paths)
    connection = session.connection()
    shared = _repeated(session, Candidate.real_path, usable)
    named = _repeated(session, Candidate.name, usable)
    rows = connection.execute(
        select(Candidate.id, Candidate.name, Candidate.enabled, Root.path, Candidate.skill_path,
               Candidate.real_path)
        .join(Root, Root.id == Candidate.root_id).where(*usable))
    roots: dict[str, str] = {}
    return [(int(cid), str(name), bool(enabled), roots.setdefault(root, root), skill,
             real if real in shared else None)
            for cid, name, enabled, root, skill, real in rows], named


def related(session: Session, index_name: str, paths: Sequence[str], *,
            names: Collection[str] = (), reals: Collection[str] = (),
            ids: Collection[int] = ()) -> list[ResolvableRow]:
    """The rows of `resolvable` (real directories all given) that declare one of `names`, live
    in one of `reals` or are one of `ids`: through the name, real directory and primary key
    indexes, never the whole table."""
    if not paths:
        return []
    usable = _usable(index_name, paths)
    found: dict[int, ResolvableRow] = {}
    for column, values in ((Candidate.name, sorted(names)), (Candidate.real_path, sorted(reals)),
                           (Candidate.id, sorted(ids))):
        for start in range(0, len(values), 500):
            # `root_id + 0`: SQLite would walk every candidate of the roots otherwise.
            for cid, name, enabled, root, skill, real in session.connection().execute(
                    select(Candidate.id, Candidate.name, Candidate.enabled, Root.path,
                           Candidate.skill_path, Candidate.real_path)
                    .join(Root, Root.id == Candidate.root_id + 0)
                    .where(*usable, column.in_(values[start:start + 500]))):
                found[int(cid)] = (int(cid), str(name), bool(enabled), root, skill, real)
    return list(found.values())


_WINNER_COLUMNS = ("set_id", "ordinal", "name", "candidate_id", "collision")


def store_set(session: Session, index_name: str, key: str, roots: Sequence[str],
              winners: Iterable[tuple[str, int, str | None]]) -> int:
    """Write one resolution: (catalog name, candidate id, collision JSON) in catalog order,
    taken from `winners` a chunk at a time."""
    new_id = int(session.execute(
        insert(ResolvedSet).returning(ResolvedSet.id),
        [{"index_name": index_name, "key": key, "roots": json.dumps(sorted(roots)),
          "winners": 0}]).scalar_one())
    ordinals, pending = itertools.count(GAP, GAP), iter(winners)
    written = 0
    # The driver's executemany a chunk: no per-row bookkeeping of the ORM's or Core's.
    table = ResolvedWinner.metadata.tables[ResolvedWinner.__tablename__]
    connection = session.connection()
    while chunk := [(new_id, next(ordinals), name, cid, collision)
                    for name, cid, collision in itertools.islice(pending, 10_000)]:
        bulk.insert_rows(connection, table, _WINNER_COLUMNS, chunk)
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


def winners_of(session: Session, set_id: int, ids: Sequence[int],
               ) -> list[tuple[int, str, int, str | None]]:
    """(ordinal, catalog name, candidate id, collision JSON) of the winners that are these
    candidates."""
    found: list[tuple[int, str, int, str | None]] = []
    for start in range(0, len(ids), 500):
        found.extend((int(ordinal), str(name), int(cid), collision)
                     for ordinal, name, cid, collision in session.execute(
            select(ResolvedWinner.ordinal, ResolvedWinner.name, ResolvedWinner.candidate_id,
                   ResolvedWinner.collision)
            .where(ResolvedWinner.set_id == set_id,
                   ResolvedWinner.candidate_id.in_(list(ids[start:start + 500])))))
    return found


# The first or last winner of a set between two ordinals, and where its candidate stands:
# one seek of the primary key and two of candidate and root (`neighbour`).
_NEIGHBOUR = (
    "SELECT w.ordinal, r.path, c.skill_path FROM resolved_winner w "
    "JOIN candidate c ON c.id = w.candidate_id JOIN root r ON r.id = c.root_id "
    "WHERE w.set_id = :set_id AND w.ordinal > :above{below} ORDER BY w.ordinal{order} LIMIT 1")
_NEIGHBOURS = {(bounded, last): text(_NEIGHBOUR.format(
    below=" AND w.ordinal < :below" if bounded else "", order=" DESC" if last else ""))
    for bounded in (False, True) for last in (False, True)}


def neighbour(session: Session, set_id: int, above: int, below: int | None, *,
              last: bool) -> tuple[int, str, str] | None:
    """(ordinal, root path, SKILL.md path) of the first (or `last`) winner whose ordinal lies
    strictly between `above` and `below` (None: no upper bound); None when there is none."""
    row = session.connection().execute(_NEIGHBOURS[below is not None, last], {
        "set_id": set_id, "above": above, "below": below}).first()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def edit_winners(session: Session, set_id: int, gone: Sequence[int],
                 renamed: Sequence[tuple[int, str, str | None]], count: int) -> None:
    """Delete the winners at the `gone` ordinals, give those at the `renamed` ones (ordinal,
    catalog name, collision JSON) their new name and collision, and add `count` to the set's
    number of winners."""
    for start in range(0, len(gone), 500):
        session.execute(delete(ResolvedWinner).where(
            ResolvedWinner.set_id == set_id,
            ResolvedWinner.ordinal.in_(list(gone[start:start + 500]))))
    if renamed:
        session.connection().execute(
            update(ResolvedWinner)
            .where(ResolvedWinner.set_id == set_id, ResolvedWinner.ordinal == bindparam("at"))
            .values(name=bindparam("new_name"), collision=bindparam("new_collision")),
            [{"at": at, "new_name": name, "new_collision": collision}
             for at, name, collision in renamed])
    if count:
        session.execute(update(ResolvedSet).where(ResolvedSet.id == set_id)
                        .values(winners=ResolvedSet.winners + count))


def add_winner(session: Session, set_id: int, ordinal: int, name: str, cid: int,
               collision: str | None) -> None:
    session.connection().execute(insert(ResolvedWinner), [{
        "set_id": set_id, "ordinal": ordinal, "name": name, "candidate_id": cid,
        "collision": collision}])


def winner_row(session: Session, set_id: int, name: str) -> Any:
    return session.execute(text(sql.WINNER_BY_NAME), {"set_id": set_id, "name": name}).first()


def search_winners(session: Session, set_id: int, ids: Sequence[int]) -> list[Any]:
    """The rows of `sql.SEARCH_WINNERS`: the winners among these matched candidates."""
    if not ids:
        return []
    statement = sql.SEARCH_WINNERS.format(ids=", ".join(str(int(cid)) for cid in ids))
    return list(session.execute(text(statement), {"set_id": set_id}))


def catalog_order(session: Session, set_id: int) -> tuple[list[Listing], dict[int, str]]:
    """Every winner in catalog order, as far as ordering, naming and placing it take
    (`described` is left False: `descriptions` reads them for the few a catalog shows), and
    the stored host fields (JSON) of those that have any, in the same read."""
    rows = session.execute(text(sql.CATALOG_ORDER), {"set_id": set_id}).all()
    # tuple.__new__ rather than Listing(...): no Python-level call per winner (there may be
    # 100,000 of them, and every catalog that misses its cache reads them all).
    made = tuple.__new__
    listed = [made(Listing, (name, declared, cid, path, not manual, False))
              for name, declared, cid, path, manual, _fields in rows]
    hosts = {row[2]: row[5] for row in rows if row[5] is not None}
    return listed, hosts


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


def winner_rows(session: Session, set_id: int) -> list[tuple[str, int, str]]:
    """(catalog name, candidate id, root path) of every winner of the set: the root tells
    the precedence a name is held at."""
    return [(str(name), int(cid), str(root)) for name, cid, root in session.connection().execute(
        select(ResolvedWinner.name, ResolvedWinner.candidate_id, Root.path)
        .join(Candidate, Candidate.id == ResolvedWinner.candidate_id)
        .join(Root, Root.id == Candidate.root_id)
        .where(ResolvedWinner.set_id == set_id))]


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


def winner_signatures(session: Session, set_id: int) -> dict[int, str]:
    """The stored signatures (JSON) of the winners of a set that hold one."""
    return {cid: value for cid, value in session.execute(text(sql.LISTING_SIGNATURES),
                                                          {"set_id": set_id})}


def winners_page(session: Session, set_id: int, after: int, limit: int) -> list[Any]:
    return list(session.execute(text(sql.WINNERS_PAGE),
                                {"set_id": set_id, "after": after, "limit": limit}))


def collisions(session: Session, set_id: int) -> list[str]:
    return [str(value) for (value,) in session.execute(text(sql.COLLISIONS), {"set_id": set_id})]


def meeting_winners(session: Session, set_id: int) -> list[tuple[str, int]]:
    """The winners of a stored resolution whose URIs may meet another's
    (`resolve.uri_collisions`), in resolution order: the names holding `:`, the names that
    begin them, and the names with several winners; found in SQL, so a set without any costs
    two scans of its rows and nothing held."""
    where = ResolvedWinner.set_id == set_id
    repeated = (select(ResolvedWinner.name).where(where).group_by(ResolvedWinner.name)
                .having(func.count() > 1))
    columns = (ResolvedWinner.ordinal, ResolvedWinner.name, ResolvedWinner.candidate_id)
    rows = {(int(ordinal), str(name), int(cid)) for ordinal, name, cid in session.execute(
        select(*columns)
        .where(where, ResolvedWinner.name.like("%:%") | ResolvedWinner.name.in_(repeated)))}
    heads = sorted({":".join(parts[:cut]) for _, name, _ in rows if ":" in name
                    for parts in [name.split(":")] for cut in range(1, len(parts))})
    for start in range(0, len(heads), 500):
        rows.update((int(ordinal), str(name), int(cid)) for ordinal, name, cid in session.execute(
            select(*columns).where(where, ResolvedWinner.name.in_(heads[start:start + 500]))))
    # In resolution order, which `uri_collisions` needs to tell the higher side.
    return [(name, cid) for _, name, cid in sorted(rows)]


def non_ascii_winners(session: Session, set_id: int) -> list[tuple[str, int]]:
    """The winners (name, candidate id) of a stored resolution whose names are not ASCII: one
    scan of its rows, which finds none in nearly every set."""
    outside = (ResolvedWinner.name.op("~")("[^ -~]") if session.get_bind().dialect.name ==
               "postgresql" else ResolvedWinner.name.op("GLOB")("*[^ -~]*"))
    return sorted((str(name), int(cid)) for name, cid in session.execute(
        select(ResolvedWinner.name, ResolvedWinner.candidate_id)
        .where(ResolvedWinner.set_id == set_id, outside)))


def winners_named(session: Session, set_id: int,
                  names: Sequence[str]) -> list[tuple[str, int]]:
    """The winners (name, candidate id) of a stored resolution under these names."""
    found: list[tuple[str, int]] = []
    for start in range(0, len(names), 500):
        found.extend((str(name), int(cid)) for name, cid in session.execute(
            select(ResolvedWinner.name, ResolvedWinner.candidate_id)
            .where(ResolvedWinner.set_id == set_id,
                   ResolvedWinner.name.in_(list(names[start:start + 500])))))
    return sorted(found)


def record_findings(session: Session, index_name: str, paths: Sequence[str], code: str,
                    found: dict[int, list[str]]) -> None:
    """Replace the warnings of `code` that the candidates of these roots hold with `found`
    (messages by candidate id): findings of a resolution, not of a skill's own files, which a
    reindex writes again each time it resolves these roots."""
    if not paths:
        return
    # Asked of each finding of the code (few), not by listing every candidate of the roots
    # (0.06 s at 100,000 skills, after every reindex).
    of_roots = (select(Candidate.id).join(Root, Root.id == Candidate.root_id)
                .where(Candidate.id == Finding.candidate_id, Root.index_name == index_name,
                       Root.path.in_(list(paths))).exists())
    session.execute(delete(Finding).where(Finding.code == code, of_roots))
    rows = [{"candidate_id": cid, "code": code, "severity": "warning", "message": message,
             "path": None, "line": None}
            for cid, messages in sorted(found.items()) for message in messages]
    if rows:
        session.execute(insert(Finding), rows)
