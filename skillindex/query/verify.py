"""Drift: every indexed file of this directory's roots hashed again against its manifest row,
and every skill directory listed again for files a reindex would add."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from skillindex.errors import StoreError
from skillindex.model import Candidate, DriftItem, Limits, VerifyReport
from skillindex.query import disclose, listing
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries, reporting

PAGE = 1_000  # candidates whose manifests are read at once


Progress = Callable[[int, int | None, str], None]  # skills done, expected (None), the root


def verify(store: Library, here: Here, limits: Limits, *, cwd: Path,
           progress: Progress | None = None) -> VerifyReport:
    """Every candidate, accepted or rejected, checked a page at a time: memory stays flat
    however many skills the roots hold. What it found is recorded (`verify_run`) for the
    report; a read-only database still verifies, unrecorded. `progress` is told after each page."""
    skills = files = 0
    drift: list[DriftItem] = []
    page: list[Candidate] = []

    def check() -> None:
        nonlocal skills, files
        with store.session() as session:
            manifests = queries.manifest_files(session, [c.id for c in page])
        part = disclose.verify(page, manifests, limits)
        skills, files = skills + part.skills, files + part.files
        drift.extend(part.drift)
        if progress is not None and page:
            progress(skills, None, str(page[-1].root))
        page.clear()

    for candidate in listing.iter_candidates(store, here, status=None, code=None, limit=None,
                                             page=2_000):
        page.append(candidate)
        if len(page) >= PAGE:
            check()
    check()
    report = VerifyReport(skills=skills, files=files, drift=tuple(drift))
    try:
        with store.transaction("record the verify") as session:
            reporting.record_verify(session, here.index_name, str(cwd), here.paths, report,
                                    datetime.now(UTC))
    except StoreError:
        pass
    return report
