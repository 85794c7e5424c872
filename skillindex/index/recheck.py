"""Whether a reindex would change anything, found without the store's write path.

A scheduled reindex mostly finds nothing new. This walks the roots as the indexer does (its
scanner, each root's rules and the same limits, so the same tree keys) and compares what it
finds with what the store holds of them. Any difference, even one the indexer would only
record (a root's settings, a scan problem), answers None: the indexer then does the whole work.

With more than one core and enough skills, the walk is shared with forked processes, each
taking every n-th entry under each root; they only walk and compare what the parent read
before forking, and send their counts back through a pipe.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from skillindex.index import policy
from skillindex.index.scanner import RootScan, scan_root
from skillindex.model import KnownFile, Limits, RootSpec, ScanProblem
from skillindex.store.fastpath import StoredRoots
from skillindex.store.rows import issue_of, root_values, stored_form

Progress = Callable[[int, int | None, str], None]  # as the indexer reports it
Counts = dict[str, int]
# Below this many stored skills a second process costs more than the share of the walk it takes.
SHARED_FROM = 2_000


@dataclass(slots=True)
class _Found:
    """What one process found of its share of the roots."""

    seen: dict[str, int] = field(default_factory=dict)  # per root path
    rejected: int = 0
    present: dict[str, bool] = field(default_factory=dict)  # per root path it listed
    problems: dict[str, list[ScanProblem]] = field(default_factory=dict)


class _AllBut:
    """The entries under one root not given to another process (also those that appeared
    since)."""

    def __init__(self, others: frozenset[str]) -> None:
        self.others = others

    def __contains__(self, name: object) -> bool:
        return name not in self.others


def _rest(given: Sequence[Share]) -> dict[str, _AllBut]:
    """Per root, what the first process walks: every entry under it that no other process
    was given under that same root (a name given out under one root is still this process's
    under another)."""
    others: dict[str, set[str]] = {}
    for share in given:
        for path, names in share.items():
            others.setdefault(path, set()).update(names)
    return {path: _AllBut(frozenset(names)) for path, names in others.items()}


def _unread(candidate_id: int) -> dict[str, KnownFile]:
    return {}  # a skill that needs its manifest has changed: the walk stops at it


def unchanged(roots: Sequence[RootSpec], stored: StoredRoots, *, limits: Limits,
              progress: Progress | None = None, jobs: int = 1,
              ) -> tuple[Counts, list[ScanProblem]] | None:
    """The counts of a reindex of `roots` and the problems it would record, when it would find
    every skill as stored, no skill gone, and each root's values and problems as stored;
    else None, as soon as a difference shows. Up to `jobs` processes share the walk."""
    if any(str(spec.path) not in stored.values for spec in roots):
        return None  # a root never indexed
    total = sum(len(stored.known.get(str(spec.path), {})) for spec in roots)
    parts = jobs if jobs > 1 and total >= SHARED_FROM and sys.platform == "linux" else 1
    found = _shared(roots, stored, _shares(roots, parts), limits, progress)
    if found is None:
        return None
    counts = {"seen": 0, "added": 0, "changed": 0, "unchanged": 0, "removed": 0,
              "rejected": sum(part.rejected for part in found), "files_read": 0,
              "rejudged": 0}
    problems: list[ScanProblem] = []
    for spec in roots:
        path = str(spec.path)
        seen = sum(part.seen.get(path, 0) for part in found)
        present = {part.present[path] for part in found if path in part.present}
        here = [problem for part in found for problem in part.problems.get(path, ())]
        # Every skill seen is a stored one: as many means none is gone.
        if seen != len(stored.known.get(path, {})) or len(present) != 1:
            return None
        if stored_form(root_values(spec, present.pop()).values()) != stored.values[path]:
            return None
        if sorted(map(issue_of, here)) != sorted(stored.issues.get(path, ())):
            return None
        counts["seen"] += seen
        problems.extend(here)
    counts["unchanged"] = counts["seen"]
    return counts, problems


Share = dict[str, frozenset[str]]  # per root path, the entries under it a process walks


def _shares(roots: Sequence[RootSpec], parts: int) -> list[Share]:
    """Every n-th entry under each root, for each process after the first (none when one
    process walks); the first walks all the rest."""
    shares: list[Share] = [{} for _ in range(parts - 1)]
    if not shares:
        return shares
    for spec in roots:
        try:
            with os.scandir(spec.path) as entries:
                names = sorted(e.name for e in entries if not e.name.startswith("."))
        except OSError:
            names = []  # the first process reports it
        for number, share in enumerate(shares, start=1):
            share[str(spec.path)] = frozenset(names[number::parts])
    return shares


def _shared(roots: Sequence[RootSpec], stored: StoredRoots, shares: list[Share],
            limits: Limits, progress: Progress | None) -> list[_Found] | None:
    """Each share walked by a forked process of its own, and the rest by this one; None when
    any of them finds a difference or fails."""
    unread: dict[int, int] = {}  # pid: the read end of its pipe, not closed yet
    unreaped: set[int] = set()
    given: list[Share] = []  # the shares a child walks
    try:
        for share in shares:
            try:
                read, write = os.pipe()
            except OSError:
                break  # no descriptor to spare: this process walks the rest
            try:
                pid = os.fork()
            except OSError:  # no process to spare: this process walks the rest
                os.close(read)
                os.close(write)
                break
            if pid == 0:  # pragma: no cover (runs in the forked process)
                _child(write, roots, stored, share, limits)
            os.close(write)
            unread[pid] = read
            unreaped.add(pid)
            given.append(share)
        found = _walk(roots, stored, _rest(given), limits, progress, parts=len(given) + 1,
                      first=True)
        if found is None:
            return None
        results = [found]
        for pid in list(unreaped):
            with os.fdopen(unread.pop(pid), "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            unreaped.discard(pid)
            # From this process's own child, through a pipe no other process holds.
            theirs = pickle.loads(data) if status == 0 else None  # noqa: S301
            if theirs is None:
                return None
            results.append(theirs)
        return results
    finally:
        # Children left when this walk ended first or failed: stopped and reaped, not waited on.
        for read in unread.values():
            os.close(read)
        for pid in unreaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _child(write: int, roots: Sequence[RootSpec], stored: StoredRoots, share: Share,
           limits: Limits) -> None:  # pragma: no cover (runs in the forked process)
    """Walk the share, send what was found, and leave without running any cleanup of the
    parent's (its database connection, its buffered output)."""
    code = 1
    try:
        with os.fdopen(write, "wb") as pipe:
            pipe.write(pickle.dumps(_walk(roots, stored, share, limits, None, parts=1,
                                                 first=False)))
        code = 0
    finally:
        os._exit(code)


def _walk(roots: Sequence[RootSpec], stored: StoredRoots,
          share: Share | dict[str, _AllBut], limits: Limits, progress: Progress | None, *,
          parts: int, first: bool) -> _Found | None:
    """Walk what `share` gives this process under each root: all of a root missing from it
    for the first process, none of it for the others."""
    found = _Found()
    done = 0
    expected = sum(len(stored.known.get(str(spec.path), {})) for spec in roots) or None
    for spec in roots:
        path = str(spec.path)
        only = share.get(path)
        if not first and not only:
            continue  # nothing of this root here: the first process lists it
        known = stored.known.get(path, {})
        result = RootScan(spec)
        seen = 0
        scans = scan_root(spec, result, known, policy.rules_key(spec), _unread, only,
                          limits=limits)
        while True:
            try:
                scan = next(scans, None)
            except Exception:  # the walk of the root failed: the indexer records how
                return None
            if scan is None:
                break
            if not scan.unchanged or scan.known is None:
                return None
            seen += 1
            found.rejected += scan.known.rejected
            if progress is not None:
                done += 1
                # The other processes walk about as much again: an estimate of the whole.
                progress(min(done * parts, expected) if expected else done, expected, path)
        found.seen[path] = seen
        found.present[path] = result.present
        found.problems[path] = result.problems
    return found
