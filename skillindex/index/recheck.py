"""Whether a reindex would change anything, found without the store's write path.

A scheduled reindex mostly finds nothing new. This walks the roots as the indexer does (its
scanner, each root's rules and the same limits, so the same tree keys) and compares what it
finds with what the store holds of them. Any difference, even one the indexer would only
record (a root's settings, a scan problem), answers None: the indexer then does the whole work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skillindex.index import policy
from skillindex.index.scanner import KnownFile, RootScan, scan_root
from skillindex.model import Limits, RootSpec, ScanProblem
from skillindex.store.fastpath import StoredRoots
from skillindex.store.rows import issue_of, root_values, stored_form

Progress = Callable[[int, int | None, str], None]  # as the indexer reports it


def _unread(candidate_id: int) -> dict[str, KnownFile]:
    return {}  # a skill that needs its manifest has changed: the walk stops at it


def unchanged(roots: Sequence[RootSpec], stored: StoredRoots, *, limits: Limits,
              progress: Progress | None = None,
              ) -> tuple[dict[str, int], list[ScanProblem]] | None:
    """The counts of a reindex of `roots` and the problems it would record, when it would find
    every skill as stored, no skill gone, and each root's values and problems as stored;
    else None, as soon as a difference shows."""
    counts = {"seen": 0, "added": 0, "changed": 0, "unchanged": 0, "removed": 0,
              "rejected": 0, "files_read": 0, "rejudged": 0}
    problems: list[ScanProblem] = []
    expected = sum(map(len, stored.known.values())) or None
    for spec in roots:
        path = str(spec.path)
        values = stored.values.get(path)
        if values is None:
            return None  # never indexed
        known = stored.known.get(path, {})
        result = RootScan(spec)
        seen = 0
        for scan in scan_root(spec, result, known, policy.rules_key(spec), _unread,
                              limits=limits):
            if not scan.unchanged or scan.known is None:
                return None
            seen += 1
            counts["rejected"] += scan.known.rejected
            if progress is not None:
                progress(counts["seen"] + seen, expected, path)
        # Every skill seen is a stored one: as many means none is gone.
        if seen != len(known) or stored_form(root_values(spec, result.present).values()) != values:
            return None
        if sorted(map(issue_of, result.problems)) != sorted(stored.issues.get(path, ())):
            return None
        counts["seen"] += seen
        problems.extend(result.problems)
    counts["unchanged"] = counts["seen"]
    return counts, problems
