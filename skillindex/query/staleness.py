"""Which roots of a directory the index may be behind on, and the note that says so."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from skillindex.config import Settings
from skillindex.model import RootSpec
from skillindex.providers import missing_configured

# Per stored root path: whether it was there at its last scan, and when that scan started.
Scans = Mapping[str, tuple[bool, datetime | None]]


def stale_roots(specs: Sequence[RootSpec], scans: Scans) -> list[Path]:
    """Roots whose skills the index may not show: never indexed, or changed (a skill folder
    added or removed) since their last scan. A stat per root."""
    stale = []
    for spec in specs:
        if spec.disabled_by is not None:
            continue
        try:
            changed = datetime.fromtimestamp(spec.path.stat().st_mtime, UTC)
        except OSError:
            continue  # not there: nothing to index
        scan = scans.get(str(spec.path))
        if scan is None or not scan[0] or scan[1] is None or changed > scan[1]:
            stale.append(spec.path)
    return stale


def note(settings: Settings, stale: Callable[[], list[Path]],
         specs: Sequence[RootSpec] = ()) -> str | None:
    """Why the index may show fewer skills than the folders hold, in words; None if no reason
    is known: skills switched off, roots never indexed or changed since (`stale()`), URL
    roots among `specs` whose last fetch failed."""
    if not settings.enabled:
        where = f" in {settings.source}" if settings.source else ""
        return f"skills are switched off ([skills] enabled = false{where})"
    notes = remote_notes(specs)
    missing = missing_configured(specs)
    if missing:
        shown = ", ".join(str(path) for path in missing[:3]) + (", …" if len(missing) > 3 else "")
        notes.append(f"{'a configured root does' if len(missing) == 1 else 'configured roots do'}"
                     f" not exist ({shown})")
    paths = stale()
    if paths:
        shown = ", ".join(str(path) for path in paths[:3]) + (", …" if len(paths) > 3 else "")
        some = "1 root" if len(paths) == 1 else f"{len(paths)} roots"
        notes.insert(0, f"{some} of this directory changed since the last reindex or never "
                     f"had one ({shown}); `skillindex reindex` brings the index up to date")
    return "; ".join(notes) or None


def remote_notes(specs: Sequence[RootSpec]) -> list[str]:
    """"URL: stale since T: why" for each URL root whose indexed copy is not its publisher's
    as of the last fetch."""
    if not any(spec.remote for spec in specs):
        return []
    from skillindex.index import remote  # noqa: PLC0415 (only where a URL root is)

    notes = []
    for spec in specs:
        if spec.remote is not None and spec.disabled_by is None:
            stale = remote.stale_note(spec)
            if stale:
                notes.append(f"{spec.remote.url}: {stale}")
    return notes
