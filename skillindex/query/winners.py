"""Materializes the resolution of a set of roots in the store and reads its winners back."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from skillindex.config import COLLISION_POLICIES
from skillindex.model import Candidate, Finding, RootSpec, Status
from skillindex.query import lookalike, resolve
from skillindex.query.resolve import Collision, Rules, Winner, set_key
from skillindex.store import queries, resolved
from skillindex.store.rows import RootCache, candidate_of

if TYPE_CHECKING:  # typing only: the sessions are the store's, opened by the caller
    from sqlalchemy.orm import Session

# id, name, enabled, root, SKILL.md, real directory (None where no other row shares it)
Row = tuple[int, str, bool, str, str, str | None]
Materialized = tuple[str, int, str | None]  # catalog name, candidate id, collision JSON


def key(session: Session, index_name: str, roots: Sequence[RootSpec], rules: Rules) -> str:
    """What names the resolution of these roots under these rules as the index is now."""
    runs = resolved.root_runs(session, index_name, [str(spec.path) for spec in roots])
    return set_key(runs, roots, rules)


def lookup(session: Session, index_name: str, roots: Sequence[RootSpec],
           rules: Rules) -> int | None:
    """The stored resolution of these roots under these rules, as the index is now; or None."""
    return resolved.set_id(session, index_name, key(session, index_name, roots, rules))


def ensure(session: Session, index_name: str, roots: Sequence[RootSpec], rules: Rules) -> int:
    """The stored resolution's id, resolving and storing it first when there is none, with
    the `uri-collision` warnings it makes (`record_collisions`).

    Run it in a write transaction (a reindex's, or one of its own).
    """
    named = key(session, index_name, roots, rules)
    found = resolved.set_id(session, index_name, named)
    if found is not None:
        return found
    paths = [str(spec.path) for spec in roots]
    rows, contested = resolved.resolvable(session, index_name, paths)
    stored = resolved.store_set(session, index_name, named, paths,
                                materialize(rows, roots, rules, contested))
    record_collisions(session, index_name, roots, rules, stored)
    return stored


def carry(session: Session, index_name: str, roots: Sequence[RootSpec], rules: Rules,
          previous: str, replaced: Sequence[tuple[int, int]]) -> int | None:
    """In a reindex's write transaction, when the write replaced candidates without changing
    what resolution reads of them (`Stage.keeps_resolution`): the resolution stored under
    `previous` (these roots' key before the write) carried over to the index as it is now,
    the replaced winners' ids swapped, instead of resolving every candidate again. Its id, or
    None when none was stored."""
    found = resolved.set_id(session, index_name, previous)
    if found is None:
        return None
    now = key(session, index_name, roots, rules)
    if now != previous:
        resolved.rekey(session, found, now, replaced)
    return found


def update(session: Session, index_name: str, roots: Sequence[RootSpec], rules: Rules,
           previous: str, change: resolved.Change) -> int | None:
    """In a reindex's write transaction, after a write that added, removed or changed a few
    candidates (`change`): the resolution stored under `previous` (these roots' key before the
    write) brought up to date in place, and its id; None when none was stored, or when it
    has to be written again whole (no room left between two ordinals).

    Only the names the change touches are judged again, with every candidate that shares a
    real directory with one of theirs (one copy counts) and, under `qualify`, every contested
    name (a qualified name avoids every name in use). Their winners are compared with the
    stored ones: a winner that stays keeps its row, one that goes is deleted, one that comes
    takes an ordinal between its neighbours' in catalog order (`_place`).
    """
    found = resolved.set_id(session, index_name, previous)
    if found is None:
        return None
    specs = {str(spec.path): spec for spec in roots}
    paths = list(specs)
    names = {name for _cid, name, _real in change.removed if name is not None}
    reals = {real for _cid, _name, real in change.removed if real is not None}
    if rules.policy == resolve.QUALIFY:
        names |= resolved.contested(session, index_name, paths)
    rows = resolved.related(session, index_name, paths, names=names, reals=reals,
                            ids=change.added)
    while True:  # widened until every copy of every judged name is in
        more_names = {row[1] for row in rows} - names
        more_reals = {row[5] for row in rows if row[5] is not None} - reals
        if not more_names and not more_reals:
            break
        names |= more_names
        reals |= more_reals
        rows = resolved.related(session, index_name, paths, names=names, reals=reals)
    stale = {cid for cid, _name, _real in change.removed}  # SQLite may give an id again
    judged = {row[0] for row in rows} | stale
    stored = {cid: (ordinal, name, collision)
              for ordinal, name, cid, collision in resolved.winners_of(session, found,
                                                                       sorted(judged))}
    taken: list[tuple[str, int]] = []
    if rules.policy == resolve.QUALIFY:  # the names in use that are not judged again
        taken = [(name, specs[root].precedence)
                 for name, cid, root in resolved.winner_rows(session, found)
                 if cid not in judged and root in specs]
    fresh = [(name, cid, collision)
             for name, cid, collision in materialize(rows, roots, rules, taken=taken)]
    kept = {cid for _name, cid, _collision in fresh if cid not in stale}
    gone = [ordinal for cid, (ordinal, _name, _collision) in stored.items() if cid not in kept]
    renamed = [(stored[cid][0], name, collision) for name, cid, collision in fresh
               if cid in kept and cid in stored and stored[cid][1:] != (name, collision)]
    added = [item for item in fresh if item[1] not in kept or item[1] not in stored]
    resolved.edit_winners(session, found, gone, renamed, len(added) - len(gone))
    where = {row[0]: (row[3], row[4]) for row in rows}
    gaps = [_gap(session, found, _rank(specs, *where[cid]), specs) for _name, cid, _c in added]
    for (above, below), group in itertools.groupby(zip(gaps, added, strict=True),
                                                   key=itemgetter(0)):
        members = [item for _gap_of, item in group]
        ordinals = _spread(above, below, len(members))
        if ordinals is None:
            resolved.drop_sets(session, [found])
            return None
        for ordinal, (name, cid, collision) in zip(ordinals, members, strict=True):
            resolved.add_winner(session, found, ordinal, name, cid, collision)
    resolved.rekey(session, found, key(session, index_name, roots, rules), ())
    return found


def _rank(specs: dict[str, RootSpec], root: str, skill: str) -> tuple[int, int, str]:
    """Where a candidate stands in catalog order (as `materialize` sorts)."""
    spec = specs[root]
    return -spec.precedence, spec.position, skill


def _gap(session: Session, set_id: int, rank: tuple[int, int, str],
         specs: dict[str, RootSpec]) -> tuple[int, int | None]:
    """The ordinals of the stored winners just before and just after a winner of this rank in
    catalog order (0 when none is before it, None when none is after it), found by halving
    the ordinals between them: a few probes of the primary key, never the whole set."""
    above, below = 0, None
    while True:
        if below is None:
            last = resolved.neighbour(session, set_id, above, None, last=True)
            if last is None:
                return above, None
            if _rank(specs, *last[1:]) < rank:
                return last[0], None
            below = last[0]
            continue
        middle = (above + below) // 2
        before = resolved.neighbour(session, set_id, above, middle, last=True)
        after = resolved.neighbour(session, set_id, max(above, middle - 1), below, last=False)
        if before is not None:
            if rank < _rank(specs, *before[1:]):
                below = before[0]
                continue
            above = before[0]
        if after is not None:
            if _rank(specs, *after[1:]) < rank:
                above = after[0]
                continue
            below = after[0]
        # Nothing is stored between `before` and `after`, the last below the middle and the
        # first from it on: the gap is found.
        return above, below


def _spread(above: int, below: int | None, count: int) -> list[int] | None:
    """`count` ordinals evenly between `above` and `below` (None: after the last winner), or
    None when they do not fit."""
    if below is None:
        ordinals = [above + resolved.GAP * step for step in range(1, count + 1)]
        return ordinals if ordinals[-1] <= resolved.LAST_ORDINAL else None
    if below - above <= count:
        return None
    return [above + (below - above) * step // (count + 1) for step in range(1, count + 1)]


def record_collisions(session: Session, index_name: str, roots: Sequence[RootSpec],
                      rules: Rules, set_id: int | None) -> None:
    """In a write transaction: the `uri-collision` warnings of these roots' skills, as their
    resolution (the stored one, `set_id`; else resolved here, as under quarantine) has them,
    in place of those recorded with an earlier resolution of these roots."""
    paths = [str(spec.path) for spec in roots]
    if set_id is None:
        rows, contested = resolved.resolvable(session, index_name, paths)
        named = [(name, cid) for name, cid, _ in materialize(rows, roots, rules, contested)]
        shapes = lookalike.skeletons(name for name, _ in named)
        alike = [(name, cid) for name, cid in named if not name.isascii() or name in shapes]
    else:
        named = resolved.meeting_winners(session, set_id)
        alike = resolved.non_ascii_winners(session, set_id)
        shapes = lookalike.skeletons(name for name, _ in alike)
        alike += resolved.winners_named(session, set_id, sorted(shapes))
    resolved.record_findings(session, index_name, paths, resolve.URI_COLLISION,
                             resolve.uri_collisions(named))
    resolved.record_findings(session, index_name, paths, lookalike.NAME_CONFUSABLE,
                             lookalike.confusable_names(alike))


def materialize(rows: Sequence[Row], roots: Sequence[RootSpec], rules: Rules,
                contested: Collection[str] | None = None,
                taken: Iterable[tuple[str, int]] = ()) -> Iterator[Materialized]:
    """The winners `resolve.resolve` would give, in its order, from a few columns per candidate.

    Names declared once (nearly all of them) need no Candidate at all; only the candidates of a
    contested name are built, and the policy of `resolve` judges them. `contested` may name
    more than are (the store counts names before filters); None counts them here. A row's real
    directory may be None where no other row shares it (see `resolved.resolvable`). The
    winners are yielded in order, so a resolution of 100,000 skills is written without a copy.
    `taken`: names in use besides these rows', each with the precedence of its skill (what
    `qualify` must avoid at that precedence or below), when `rows` are only some of the roots'
    candidates.
    """
    if rules.policy not in COLLISION_POLICIES:
        raise ValueError(f"unknown collision policy {rules.policy!r}")
    specs = {str(spec.path): spec for spec in roots}
    by_root: dict[str, list[Row]] = {}
    for row in rows:
        if row[3] in specs:
            by_root.setdefault(row[3], []).append(row)
    # Roots by precedence and registration, then SKILL.md paths: sorted a root at a time on a
    # column, which makes no key object per row.
    order = sorted(by_root, key=lambda root: (-specs[root].precedence, specs[root].position))
    for root in order:
        by_root[root].sort(key=itemgetter(4))
    if contested is None:
        counted = Counter(row[1] for row in rows)
        contested = {name for name, count in counted.items() if count > 1}
    first_copy: set[str] = set()
    eligible: list[Row] = []
    groups: dict[str, list[int]] = {}  # eligible rows of the contested names, first seen first
    for row in itertools.chain.from_iterable(by_root[root] for root in order):
        _cid, name, enabled, root, _skill, real = row
        if resolve.screen(name, enabled, specs[root], rules) is not None:
            continue
        if real is not None:
            if real in first_copy:
                continue
            first_copy.add(real)
        if name in contested:
            groups.setdefault(name, []).append(len(eligible))
        eligible.append(row)
    del by_root
    # Qualified names must avoid every name in use at their precedence or above; no other
    # policy asks.
    names = resolve.Names()
    if rules.policy == resolve.QUALIFY:
        for name, precedence in itertools.chain(
                ((row[1], specs[row[3]].precedence) for row in eligible), taken):
            names.add(name, precedence)
    judged: dict[int, Materialized | None] = {}
    for name, members in groups.items():
        if len(members) < 2:
            continue
        group = [_candidate(eligible[number], specs) for number in members]
        verdicts = resolve.apply_policy(name, group, rules.policy, names)
        collision = resolve.collision_of(name, rules.policy, verdicts)
        text = None if collision is None else json.dumps(collision.as_dict())
        for number, verdict in zip(members, verdicts, strict=True):
            judged[number] = ((verdict.name or name, eligible[number][0], text)
                              if verdict.outcome is resolve.Outcome.WINNER else None)
    for number, (cid, name, *_) in enumerate(eligible):
        if number not in judged:
            yield name, cid, None
        elif (kept := judged[number]) is not None:
            yield kept


def _candidate(row: Row, specs: dict[str, RootSpec]) -> Candidate:
    cid, name, enabled, root, skill, real = row
    spec = specs[root]
    path = Path(skill)
    return Candidate(name=name, description=None, path=path, directory=path.parent,
                     real_path=path.parent if real is None else Path(real), root=spec.path,
                     scope=spec.scope, provider=spec.provider, precedence=spec.precedence,
                     position=spec.position, status=Status.ACCEPTED, enabled=enabled, id=cid)


class Reader:
    """Winners of one stored resolution, as Winner values rebased on the planned roots."""

    def __init__(self, session: Session, set_id: int, roots: Sequence[RootSpec]) -> None:
        self.session = session
        self.set_id = set_id
        self.specs = {spec.path: spec for spec in roots}
        self._roots: RootCache = {}

    def _winner(self, name: str, collision: str | None, columns: Sequence[object],
                findings: tuple[Finding, ...] = ()) -> Winner:
        candidate = candidate_of(columns, self._roots, findings)
        candidate = resolve.rebase(candidate, self.specs.get(candidate.root))
        return Winner(name, candidate, resolve.stored_collision(collision))

    def winner(self, name: str) -> Winner | None:
        row = resolved.winner_row(self.session, self.set_id, name)
        if row is None:
            return None
        return self._winner(row[0], row[1], row[2:])

    def winners(self, *, findings: bool = True) -> Iterator[Winner]:
        """Every winner in catalog order, a page at a time (memory stays flat)."""
        after = 0
        while True:
            page = resolved.winners_page(self.session, self.set_id, after, resolved.PAGE)
            if not page:
                return
            found = (queries.findings_of(self.session, [row[3] for row in page])
                     if findings else {})
            for row in page:
                yield self._winner(row[1], row[2], row[3:], tuple(found.get(row[3], ())))
            after = int(page[-1][0])

    def among(self, ids: Sequence[int]) -> dict[int, list[Winner]]:
        """The winners these candidates are (a name qualified by several roots: several)."""
        found: dict[int, list[Winner]] = {}
        for cid, name, collision, *columns in resolved.search_winners(self.session,
                                                                      self.set_id, ids):
            found.setdefault(int(cid), []).append(self._winner(name, collision, columns))
        return found

    def collisions(self) -> list[Collision]:
        seen: dict[str, Collision] = {}
        for text in resolved.collisions(self.session, self.set_id):
            collision = resolve.stored_collision(text)
            if collision is not None:
                seen.setdefault(collision.name, collision)
        return list(seen.values())

