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
from skillindex.model import IndexReport

if TYPE_CHECKING:
    from skillindex.api import SkillIndex

INSTALL_HINT = "pip install 'skillindex[watch]'"


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
            f"watch needs the watchfiles package: {INSTALL_HINT}") from None
    return watchfiles


def relevant(changed: Iterable[str], roots: Iterable[str]) -> list[str]:
    """The changed paths a reindex can care about: inside or above a root, and not inside a
    hidden entry (which the scanner skips)."""
    tops = [root.rstrip(os.sep) for root in roots]
    kept = []
    for path in changed:
        for root in tops:
            if root.startswith(path.rstrip(os.sep) + os.sep) or path == root:
                kept.append(path)
                break
            if path.startswith(root + os.sep):
                if not any(part.startswith(".") for part in path[len(root) + 1:].split(os.sep)):
                    kept.append(path)
                break
    return sorted(set(kept))


def watch(index: SkillIndex, *, full_every: float = 600.0, quiet_ms: int = 200,
          max_wait_ms: int = 2000, stop: threading.Event | None = None,
          on_pass: OnPass | None = None, retry_first: float = 1.0,
          retry_max: float = 300.0) -> None:
    """Reindex now, then after every burst of changes under the roots, until `stop` is set
    (or KeyboardInterrupt).

    A burst ends when nothing changed for `quiet_ms` (or after `max_wait_ms` of continuous
    change), so a checkout of a thousand files is one reindex. Only the skill directories that
    hold changed paths are rescanned; every `full_every` seconds a full reindex catches what
    events cannot show (roots that appeared, skills reached through symlinks).

    A failed pass (a full disk, a read-only index, a lost server, another reindex holding the
    lock too long) is reported and the watch goes on: it retries with a full reindex after
    `retry_first` seconds, doubling the wait after each failure in a row up to `retry_max`
    (and never beyond `full_every`); changes meanwhile wait for that retry.
    """
    watchfiles = _watchfiles()
    stop = stop or threading.Event()
    report = on_pass or (lambda _pass: None)
    failures = 0

    def pause() -> float:
        """Seconds until the next full pass is due."""
        if not failures:
            return full_every
        return float(min(retry_first * 2.0 ** (failures - 1), retry_max, full_every))

    def run(full: bool, paths: list[str]) -> float:
        """Run one pass; the time at which the next full one is due."""
        nonlocal failures
        try:
            done = index.reindex() if full else index.reindex(paths=paths)
        except SkillIndexError as exc:
            failures += 1
            report(Pass(full, len(paths), None, exc.message, retry_in=pause()))
            return time.monotonic() + pause()
        failures = 0
        report(Pass(full, len(paths), done))
        return time.monotonic() + pause()

    due = run(True, [])
    while not stop.is_set():
        roots = [str(spec.path) for spec in index.plan.roots if spec.path.is_dir()]
        left = max(0.0, due - time.monotonic())
        if not roots:
            if stop.wait(left):
                return
        else:
            events = watchfiles.watch(
                *roots, watch_filter=None, debounce=max_wait_ms, step=quiet_ms,
                stop_event=stop, rust_timeout=max(1, int(left * 1000)),
                yield_on_timeout=True, ignore_permission_denied=True)
            try:
                with closing(events):
                    for changes in events:
                        paths = relevant((path for _change, path in changes), roots)
                        if paths and not failures:
                            full_due = due
                            due = run(False, paths)
                            if not failures:
                                due = full_due  # a targeted pass does not put off the full one
                            else:
                                break  # wait for the retry with the watch's new timeout
                        if time.monotonic() >= due:
                            break
            except (OSError, RuntimeError) as exc:  # a watched root vanished under the watcher
                report(Pass(True, 0, None, f"watch restarted: {exc}"))
                due = time.monotonic()
        if not stop.is_set() and time.monotonic() >= due:
            due = run(True, [])
