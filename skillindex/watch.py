"""Keeps an index fresh: filesystem events become targeted reindexes, with periodic full ones."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skillindex.errors import SkillIndexError
from skillindex.extras import hint
from skillindex.index.skilldir import NOT_OF_THE_SKILL
from skillindex.model import IndexReport

if TYPE_CHECKING:
    from skillindex.api import SkillIndex

AWAIT_CHECK_MS = 1000  # how often the watch of missing roots checks them by stats as well


class WatchUnavailableError(SkillIndexError):
    """The optional filesystem-event package is not installed."""


@dataclass(frozen=True, slots=True)
class Pass:
    """One reindex the watcher ran: `full` (start, safety net) or for `paths` changed paths."""

    full: bool
    paths: int
    report: IndexReport | None
    error: str | None = None
    retry_in: float | None = None  # after a failed pass: seconds until the next attempt

    def as_dict(self) -> dict[str, object]:
        return {"full": self.full, "paths": self.paths, "error": self.error,
                "retry_in": self.retry_in,
                "report": None if self.report is None else self.report.as_dict()}


OnPass = Callable[[Pass], None]


def _watchfiles() -> Any:
    try:
        import watchfiles  # noqa: PLC0415
    except ImportError:
        raise WatchUnavailableError(
            f"watch needs the watch extra: {hint('watch')}") from None
    return watchfiles


def relevant(changed: Iterable[str], roots: Iterable[str]) -> list[str]:
    """The changed paths a reindex can care about: inside or above a root, not under a hidden
    entry directly under the root (the walk never looks into one) nor inside a `.git` folder
    (no part of a skill); a hidden file or folder inside a skill is part of it."""
    tops = [root.rstrip(os.sep) for root in roots]
    kept = []
    for path in changed:
        for root in tops:
            if root.startswith(path.rstrip(os.sep) + os.sep) or path == root:
                kept.append(path)
                break
            if path.startswith(root + os.sep):
                parts = path[len(root) + 1:].split(os.sep)
                if not parts[0].startswith(".") and NOT_OF_THE_SKILL not in parts[1:]:
                    kept.append(path)
                break
    return sorted(set(kept))


class _Either:
    """Set when either event is: what the watchers are told to stop on."""

    def __init__(self, stop: threading.Event, wake: threading.Event) -> None:
        self.stop = stop
        self.wake = wake

    def is_set(self) -> bool:
        return self.stop.is_set() or self.wake.is_set()


def _nearest_folder(path: str) -> str | None:
    """The nearest existing folder at or above `path`."""
    current = path
    while not os.path.isdir(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return current


@dataclass(frozen=True, slots=True)
class _Watched:
    """What one round of watching covers: the roots that exist (watched with everything
    below them), and, for each root that does not exist yet and each file the plan read, the
    nearest existing folder above it (watched alone: its own entries)."""

    roots: list[str]
    folder_ids: list[tuple[int, int] | None]  # each root's (device, inode) when planned
    missing: list[str]  # the roots that do not exist
    sources: dict[str, tuple[int, ...] | None]  # the plan's files: their stats when planned
    folders: list[str]  # the folders watched for them

    @classmethod
    def of(cls, index: SkillIndex) -> _Watched:
        plan = index.replan()
        roots: list[str] = []
        missing: list[str] = []
        for spec in plan.roots:
            (roots if spec.path.is_dir() else missing).append(str(spec.path))
        folders = {_nearest_folder(path) for path in missing}
        folders |= {_nearest_folder(str(source.parent)) for source in plan.sources}
        return cls(roots, [_folder_id(root) for root in roots], missing,
                   {str(source): _stat(str(source)) for source in plan.sources},
                   sorted(folder for folder in folders if folder is not None))

    def awaits(self, changed: Iterable[str]) -> bool:
        """Whether a change is one of the awaited paths or a folder on the way to one."""
        return any(path == target or target.startswith(path.rstrip(os.sep) + os.sep)
                   for path in changed for target in (*self.missing, *self.sources))

    def moved(self) -> bool:
        """Whether a missing root exists now or a plan's file changed (a few stats): what
        happened before the folders' watch was set up, or in a folder created since."""
        return (any(os.path.isdir(root) for root in self.missing)
                or any(_stat(path) != was for path, was in self.sources.items()))

    def vanished(self) -> bool:
        """Whether a root is gone, or is another folder now (removed and created again: the
        watch follows the folder that was removed)."""
        return [_folder_id(root) for root in self.roots] != self.folder_ids


def _folder_id(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _stat(path: str) -> tuple[int, ...] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns, found.st_ino, found.st_dev


def _await(watchfiles: Any, watched: _Watched, until: _Either, wake: threading.Event,
           quiet_ms: int) -> None:
    """Set `wake` when something appears on the way to a missing root or a plan's file
    changes: told by the folders' events at once, and checked by a few stats once a second
    (what changed before the watch was set up, or deeper than the folders watched)."""
    try:
        for changes in watchfiles.watch(
                *watched.folders, watch_filter=None, recursive=False, debounce=quiet_ms,
                step=quiet_ms, stop_event=until, ignore_permission_denied=True,
                yield_on_timeout=True, rust_timeout=AWAIT_CHECK_MS):
            if watched.awaits(path for _change, path in changes) or watched.moved():
                break
    except (OSError, RuntimeError):
        pass  # a watched folder vanished: watch again from what exists now
    wake.set()


class _Passes:
    """The passes of one watch, and when the next full one is due: `full_every` after a full
    pass that succeeded; after a failed pass, `retry_first` seconds, doubled after each failure
    in a row up to `retry_max` (and never beyond `full_every`)."""

    def __init__(self, index: SkillIndex, report: OnPass, *, full_every: float,
                 retry_first: float, retry_max: float) -> None:
        self.index = index
        self.report = report
        self.full_every = full_every
        self.retry_first = retry_first
        self.retry_max = retry_max
        self.failures = 0  # failed passes in a row: while there are any, the watch backs off
        self.full_runs = 0  # full passes tried
        self.due = time.monotonic()

    def pause(self) -> float:
        if not self.failures:
            return self.full_every
        return min(self.backoff(self.failures), self.full_every)

    def backoff(self, tries: int) -> float:
        """The wait after `tries` failures in a row: `retry_first`, doubled after each one
        more, up to `retry_max`."""
        return float(min(self.retry_first * 2.0 ** (tries - 1), self.retry_max))

    def left(self) -> float:
        """Seconds until the next full pass is due."""
        return max(0.0, self.due - time.monotonic())

    def run(self, full: bool, paths: list[str]) -> None:
        """One pass. A targeted pass that succeeds does not put off the full one."""
        self.full_runs += full
        try:
            done = self.index.reindex() if full else self.index.reindex(paths=paths)
        except SkillIndexError as exc:
            self.failures += 1
            self.due = time.monotonic() + self.pause()
            self.report(Pass(full, len(paths), None, exc.message, retry_in=self.pause()))
            return
        self.failures = 0
        if full:
            self.due = time.monotonic() + self.full_every
        self.report(Pass(full, len(paths), done))
        # Reported first: the pass is in the catalog already, and what the log's copy costs
        # (two syncs) falls between passes, not on the next catalog a host reads.
        # (Imported here: the command's module reads this one's defaults for its options.)
        from skillindex.store.queries import checkpoint  # noqa: PLC0415

        checkpoint(self.index.engine)


# A burst of changes ends after this long without one: watchfiles' own step. An editor's save
# or a copied skill is over well within it; a burst split in two makes two targeted passes,
# each cheap, and the change is in the catalog sooner (a person waits the whole quiet time).
QUIET_MS = 50


def watch(index: SkillIndex, *, full_every: float = 600.0, quiet_ms: int = QUIET_MS,
          max_wait_ms: int = 2000, stop: threading.Event | None = None,
          on_pass: OnPass | None = None, retry_first: float = 1.0,
          retry_max: float = 300.0) -> None:
    """Reindex now, then after every burst of changes under the roots, until `stop` is set
    (or KeyboardInterrupt).

    A burst ends when nothing changed for `quiet_ms` (or after `max_wait_ms` of continuous
    change), so a checkout of a thousand files is one reindex. Only the skill directories that
    hold changed paths are rescanned. A root that does not exist yet is awaited at the
    nearest folder above it, and so is the plugin registry: when either appears or changes,
    the roots are planned again, a full reindex runs and the new roots are watched; a root
    removed is awaited again. Every `full_every` seconds a full reindex catches what events
    cannot show (skills reached through symlinks).

    Each full reindex runs once the watch of the roots it walks is up, so a change made at any
    moment is either walked by it or reported by an event afterwards (a root removed or
    written just before its watch was up is not missed).

    A failed pass (a full disk, a read-only index, a lost server, another reindex holding the
    lock too long) is reported and the watch goes on: it retries with a full reindex after
    `retry_first` seconds, doubling the wait after each failure in a row up to `retry_max`
    (and never beyond `full_every`); changes meanwhile wait for that retry. A watch the
    system refuses (too many folders for its limit) is reported, the full reindex runs without
    it, and the watch is tried again after the same backoff.
    """
    watchfiles = _watchfiles()
    stop = stop or threading.Event()
    passes = _Passes(index, on_pass or (lambda _pass: None), full_every=full_every,
                     retry_first=retry_first, retry_max=retry_max)
    refused = 0  # rounds in a row whose watch could not be set up
    while not stop.is_set():
        # While it backs off, only the retry, when it is due, runs a pass.
        full = not passes.failures or passes.left() == 0
        runs = passes.full_runs
        watched = _Watched.of(index)
        wake = threading.Event()
        until = _Either(stop, wake)
        waiter = None
        if watched.folders:
            waiter = threading.Thread(target=_await, name="skillindex-await", daemon=True,
                                      args=(watchfiles, watched, until, wake, quiet_ms))
            waiter.start()
        try:
            if watched.roots:
                _follow(watchfiles, watched, until, passes, full, max_wait_ms=max_wait_ms,
                        quiet_ms=quiet_ms)
            else:
                if full:
                    passes.run(True, [])
                while not until.is_set() and passes.left() > 0:
                    wake.wait(min(1.0, passes.left()))
            refused = 0
        except (OSError, RuntimeError) as exc:
            # A root vanished before or under its watch (the next round plans without it), or
            # the system refused the watch: the full pass due runs all the same.
            passes.report(Pass(True, 0, None, f"watch restarted: {exc}"))
            if full and passes.full_runs == runs and not stop.is_set():
                passes.run(True, [])
            refused += 1
            if refused > 1:
                stop.wait(passes.backoff(refused - 1))
        finally:
            wake.set()
            if waiter is not None:
                waiter.join()


def _follow(watchfiles: Any, watched: _Watched, until: _Either, passes: _Passes, full: bool,
            *, max_wait_ms: int, quiet_ms: int) -> None:
    """A full pass once the watch of the roots is up (its first yield, after `quiet_ms`) if
    `full`, then targeted passes for the changes under the roots, until `until` is set, the
    next full pass is due, a pass fails or a root vanishes (checked at every yield: at least
    once a second)."""
    events = watchfiles.watch(
        *watched.roots, watch_filter=None, debounce=max_wait_ms, step=quiet_ms,
        stop_event=until, yield_on_timeout=True, ignore_permission_denied=True,
        rust_timeout=quiet_ms if full else AWAIT_CHECK_MS)
    with closing(events):
        for changes in events:
            if full:
                full = False
                passes.run(True, [])  # what changes from now on is in the next yields
                if passes.failures:
                    break
                continue
            paths = relevant((path for _change, path in changes), watched.roots)
            if paths and not passes.failures:
                passes.run(False, paths)
                if passes.failures:
                    break  # wait for the retry, with a watch timed for it
            if passes.left() == 0 or watched.vanished():
                break
