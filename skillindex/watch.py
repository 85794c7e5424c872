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

    def as_dict(self) -> dict[str, object]:
        return {"full": self.full, "paths": self.paths, "error": self.error,
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
          on_pass: OnPass | None = None) -> None:
    """Reindex now, then after every burst of changes under the roots, until `stop` is set
    (or KeyboardInterrupt).

    A burst ends when nothing changed for `quiet_ms` (or after `max_wait_ms` of continuous
    change), so a checkout of a thousand files is one reindex. Only the skill directories that
    hold changed paths are rescanned; every `full_every` seconds a full reindex catches what
    events cannot show (roots that appeared, skills reached through symlinks). A failed pass
    is reported and the watch goes on.
    """
    watchfiles = _watchfiles()
    stop = stop or threading.Event()
    report = on_pass or (lambda _pass: None)

    def run(full: bool, paths: list[str]) -> None:
        try:
            done = index.reindex() if full else index.reindex(paths=paths)
        except SkillIndexError as exc:
            report(Pass(full, len(paths), None, exc.message))
            return
        report(Pass(full, len(paths), done))

    run(True, [])
    while not stop.is_set():
        deadline = time.monotonic() + full_every
        roots = [str(spec.path) for spec in index.plan.roots if spec.path.is_dir()]
        if not roots:
            if stop.wait(full_every):
                return
            run(True, [])
            continue
        events = watchfiles.watch(
            *roots, watch_filter=None, debounce=max_wait_ms, step=quiet_ms, stop_event=stop,
            rust_timeout=max(1, int(full_every * 1000)), yield_on_timeout=True,
            ignore_permission_denied=True)
        try:
            with closing(events):
                for changes in events:
                    paths = relevant((path for _change, path in changes), roots)
                    if paths:
                        run(False, paths)
                    if time.monotonic() >= deadline:
                        break
        except (OSError, RuntimeError) as exc:  # a watched root vanished under the watcher
            report(Pass(True, 0, None, f"watch restarted: {exc}"))
        if not stop.is_set():
            run(True, [])
