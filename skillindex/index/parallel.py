"""Scans new skill directories in worker processes: read, hash, parse and judge off the writer."""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from skillindex.index import policy
from skillindex.index.skilldir import ENTRY
from skillindex.model import Limits, RootSpec, ScanProblem

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

# Below this many new entries under a root, starting workers costs more than it saves.
PARALLEL_MIN = 256
SHARD = 64  # entries per task: small enough to keep memory flat, large enough to amortize
# Entries per task under a root with many of them: each task lists the root once, and its
# result goes back in one message.
LARGEST_SHARD = 256
IN_FLIGHT = 8  # shards submitted ahead of the one being staged

# One new skill, scanned and judged in a worker, ready to be staged: its directory (relative
# to the root), its row, findings and manifest, and the number of files read. A tuple: it is
# pickled back to the parent once per skill.
# (rel_dir, candidate row, finding rows, resource rows as model.RESOURCE_ROW, files read)
Judged = tuple[str, dict[str, Any], list[dict[str, Any]], list[tuple[Any, ...]], int]


@dataclass(slots=True)
class Shard:
    judged: list[Judged] = field(default_factory=list)
    problems: list[ScanProblem] = field(default_factory=list)


def default_jobs() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def split_entries(root: str, known_tops: set[str],
                  only: frozenset[str] | None) -> tuple[frozenset[str], list[str]]:
    """The names directly under `root` to scan (all, or those in `only`), and among them the
    ones that hold no skill the index knows, so that no stored manifest could spare a read."""
    try:
        with os.scandir(root) as entries:
            names = {entry.name for entry in entries if not entry.name.startswith(".")}
    except OSError:
        return frozenset(), []
    if only is not None:
        names &= only
    return frozenset(names), sorted(names - known_tops)


def enough_to_share(root: str, new: Sequence[str], max_depth: int) -> bool:
    """Whether these new entries of a root hold at least PARALLEL_MIN skill folders: the
    entries themselves under a flat root; under a root walked deeper, what each group holds
    (one listing of each group, until there are enough)."""
    if len(new) >= PARALLEL_MIN or max_depth == 1:
        return len(new) >= PARALLEL_MIN
    folders = 0
    for name in new:
        try:
            with os.scandir(os.path.join(root, name)) as entries:
                inside = [entry.name for entry in entries]
        except OSError:
            inside = []
        folders += 1 if not inside or ENTRY in inside else len(inside)
        if folders >= PARALLEL_MIN:
            return True
    return False


def shard_size(entries: int, jobs: int) -> int:
    """Entries per task: a quarter of each worker's share, from SHARD up to LARGEST_SHARD; or
    fewer than SHARD when a root holds fewer than PARALLEL_MIN entries (groups of skills), so
    that every worker has several tasks of them."""
    if entries >= PARALLEL_MIN:
        return min(LARGEST_SHARD, max(SHARD, -(-entries // (4 * jobs))))
    return max(1, min(SHARD, -(-entries // (8 * jobs))))


class Workers:
    """Up to `jobs` worker processes, started the first time a root has enough new entries to
    need them: creating the executor starts multiprocessing's resource tracker, a process of
    its own, which a reindex with nothing new has no use for.

    They are spawned unless `start` says otherwise: a reindex holds database connections and a
    heartbeat thread, which a forked worker must not inherit.
    """

    def __init__(self, jobs: int, start: str = "spawn") -> None:
        self.jobs = jobs
        self.start = start
        self._executor: Executor | None = None

    def executor(self) -> Executor:
        if self._executor is None:
            self._take_ahead(None)
        if self._executor is None:
            # Imported here: a reindex that starts no worker (and default_jobs) needs neither.
            import multiprocessing  # noqa: PLC0415
            from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

            self._executor = ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=multiprocessing.get_context(self.start))
        return self._executor

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)

    def pipe(self, plans: list[Plan]) -> ScanPipe:
        """The shards of these plans in the workers: those `start_ahead` submitted for the
        same plans, else submitted now."""
        if self._executor is None:
            pipe = self._take_ahead(plans)
            if pipe is not None:
                return pipe
        return ScanPipe(self.executor(), plans)

    def _take_ahead(self, plans: list[Plan] | None) -> ScanPipe | None:
        """Take the workers `start_ahead` started for this many, if any, and their pipe when
        it holds exactly `plans`; else its shards are cancelled and the workers kept."""
        ahead = _AHEAD.pop((self.jobs, self.start), None)
        if ahead is None:
            return None
        self._executor, pipe = ahead
        if plans is not None and pipe.plans == plans:
            return pipe
        pipe.cancel()
        return None


# Workers started ahead by `start_ahead`, with the shards they were given, by (jobs, start
# method), until the first Workers of that size takes them.
_AHEAD: dict[tuple[int, str], tuple[Executor, ScanPipe]] = {}


def start_ahead(jobs: int, plans: list[Plan]) -> None:
    """Start `jobs` spawned workers now on the first shards of `plans`, for a reindex that will
    surely give them these (a new index, or large roots never indexed): they scan while this
    process imports and opens the store, instead of after. The next `Workers(jobs)` of this
    process takes them, with the shards when its plans are the same (else those are
    cancelled); `stop_ahead` ends them when none does."""
    if jobs < 2 or not plans or (jobs, "spawn") in _AHEAD:
        return
    executor = Workers(jobs).executor()
    _AHEAD[(jobs, "spawn")] = (executor, ScanPipe(executor, plans))


def stop_ahead() -> None:
    """End the workers `start_ahead` started that no reindex took."""
    while _AHEAD:
        _AHEAD.popitem()[1][0].shutdown(cancel_futures=True)


def plan(scanned: Sequence[tuple[RootSpec, frozenset[str] | None]],
         known_tops: Mapping[str, set[str]], jobs: int, limits: Limits,
         ) -> list[tuple[int, Plan, frozenset[str]]]:
    """The roots (by their place in `scanned`, each with the entries to scan: all, or those
    given) whose new entries, those holding no skill in `known_tops` (per root path), hold
    enough skills for `jobs` workers: each one's plan, and every entry scanned under it."""
    planned: list[tuple[int, Plan, frozenset[str]]] = []
    for number, (spec, only) in enumerate(scanned):
        root = str(spec.path)
        names, new = split_entries(root, known_tops.get(root, set()), only)
        if enough_to_share(root, new, spec.max_depth):
            planned.append((number, Plan(spec, policy.rules_key(spec), new, limits,
                                         shard_size(len(new), jobs)), names))
    return planned


T = TypeVar("T")
# What a worker does with some entries of a root: (root, rules key, entry names, limits).
ShardTask = Callable[[RootSpec, str, list[str], Limits], T]


@dataclass(slots=True)
class Plan:
    """The new entries of one root that workers scan, `size` entries a shard."""

    spec: RootSpec
    rules_key: str
    names: list[str]
    limits: Limits
    size: int


class ScanPipe:
    """The shards of several roots' plans, submitted in their order across the roots, IN_FLIGHT
    at a time: the workers start on the next root's shards while the last ones of a root are
    still being staged, instead of waiting for them."""

    def __init__(self, executor: Executor, plans: Sequence[Plan]) -> None:
        self._executor = executor
        self.plans = list(plans)
        # (plan number, the task's arguments), in the order the shards are staged
        self._waiting = deque(
            (number, (plan.spec, plan.rules_key, plan.names[start:start + plan.size],
                      plan.limits))
            for number, plan in enumerate(plans) for start in range(0, len(plan.names),
                                                                    plan.size))
        self._pending: deque[tuple[int, Future[Shard]]] = deque()
        self._fill()

    def _fill(self) -> None:
        while self._waiting and len(self._pending) < IN_FLIGHT:
            number, arguments = self._waiting.popleft()
            self._pending.append((number, self._executor.submit(_scan_shard, *arguments)))

    def cancel(self) -> None:
        """Submit no more, and cancel what has not started."""
        self._waiting.clear()
        while self._pending:
            self._pending.popleft()[1].cancel()

    def shards(self, number: int) -> Iterator[Shard]:
        """The judged skills of plan `number`, a shard at a time, in order. A plan whose
        shards are not all taken (one failed) leaves the rest to the caller: they are
        cancelled or dropped, never handed to the next plan."""
        try:
            while self._pending and self._pending[0][0] == number:
                _number, future = self._pending.popleft()
                self._fill()
                yield future.result()
        finally:
            while self._pending and self._pending[0][0] == number:
                self._pending.popleft()[1].cancel()
            while self._waiting and self._waiting[0][0] == number:
                self._waiting.popleft()
            self._fill()


def map_shards(executor: Executor, task: ShardTask[T], spec: RootSpec, rules_key: str,
               names: Sequence[str], limits: Limits, size: int = SHARD) -> Iterator[T]:
    """`task` over the entries of the root `size` at a time, in order, as the shards finish."""
    shards = (list(names[start:start + size]) for start in range(0, len(names), size))
    # A few shards in flight, not all: finished shards wait in memory until they are used.
    pending = deque(executor.submit(task, spec, rules_key, shard, limits)
                    for shard in itertools.islice(shards, IN_FLIGHT))
    while pending:
        done = pending.popleft().result()
        following = next(shards, None)
        if following is not None:
            pending.append(executor.submit(task, spec, rules_key, following, limits))
        yield done


def _scan_shard(spec: RootSpec, rules_key: str, names: list[str], limits: Limits) -> Shard:
    from skillindex.index.judge import judge  # noqa: PLC0415 (keeps the parent's import light)
    from skillindex.index.scanner import RootScan, scan_root  # noqa: PLC0415

    result = RootScan(spec)
    shard = Shard(problems=result.problems)
    for scan in scan_root(spec, result, {}, rules_key, lambda _cid: {}, frozenset(names),
                          limits=limits):
        row, findings, resources = judge(scan, spec)
        shard.judged.append((scan.rel_dir, row, findings, resources, scan.files_read))
    return shard
