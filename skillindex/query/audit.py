"""The audit trail as the use cases write and read it: the one row of every disclosure attempt,
appended before anything is handed over, and the listings of the rows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Protocol

from skillindex.errors import ConfigError, SkillIndexError
from skillindex.model import AUDIT_OUTCOMES, AuditListing, AuditRecord, SessionLevels
from skillindex.query.disclose import OK, Attempt
from skillindex.query.reader import Here, Unanswered
from skillindex.store.chain import since_of


class Appender(Protocol):
    def append(self, record: AuditRecord) -> None:
        """Append one row to this index's chain, in a transaction of its own."""
        ...


@contextmanager
def audited(store: Appender, attempt: Attempt, *, reason: str | None, session: str | None,
            principal: str | None = None) -> Iterator[None]:
    """Write the attempt's one audit row when the block ends, before its caller gets anything:
    `ok`, the outcome a SkillIndexError names, else `error`. A store that could not answer
    (Unanswered) leaves no row: the path that answers instead writes it."""
    def append(outcome: str) -> None:
        store.append(attempt.record(outcome=outcome, reason=reason, session=session,
                                    principal=principal))

    try:
        yield
    except Unanswered:
        raise
    except SkillIndexError as exc:
        append(exc.outcome)
        raise
    except Exception:
        append("error")
        raise
    except BaseException:
        # Interrupted: the row if it can be written, and the interruption either way.
        with contextlib.suppress(Unanswered):
            append("error")
        raise
    append(OK)


class Trail(Protocol):
    def audit_rows(self, here: Here, *, levels: bool, session: str | None, skill: str | None,
                   outcome: str | None,
                   since: datetime | None) -> AuditListing | list[SessionLevels]:
        """This index's audit rows (or, with `levels`, its sessions' bytes per level) that
        match every filter given, oldest first."""
        ...


def rows(store: Trail, here: Here, *, session: str | None, skill: str | None,
         outcome: str | None, since: datetime | str | None,
         levels: bool) -> AuditListing | list[SessionLevels]:
    """Audit rows, oldest first; with `levels`, bytes per disclosure level for each session."""
    start = since_of(since)
    if outcome is not None and outcome not in AUDIT_OUTCOMES:
        raise ConfigError(f"unknown outcome {outcome!r} (use one of "
                          f"{', '.join(AUDIT_OUTCOMES)})")
    return store.audit_rows(here, levels=levels, session=session, skill=skill, outcome=outcome,
                            since=start)


def refuse_unserved(store: Appender, uri: str, *, outcome: str, reason: str | None,
                    session: str | None, principal: str | None = None) -> None:
    """Audit a read of `uri` that a server refused before asking the index (it serves no such
    URI, or the path is refused): outcome `not-found` or `refused`, nothing handed over. The
    audit has no other way in from outside: every row is a disclosure attempt this library
    made."""
    if outcome not in ("not-found", "refused"):
        raise ConfigError(f"a refused read is not-found or refused, not {outcome!r}")
    store.append(Attempt.of_uri(uri).record(outcome=outcome, reason=reason, session=session,
                                            principal=principal))
