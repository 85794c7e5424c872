"""The audit trail as the use cases write and read it: the one row of every disclosure attempt,
appended before anything is handed over, and the listings of the rows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from skillindex.errors import SkillIndexError
from skillindex.model import AuditRecord
from skillindex.query.disclose import OK, Attempt
from skillindex.query.reader import Unanswered


class Appender(Protocol):
    def append(self, record: AuditRecord) -> None:
        """Append one row to this index's chain, in a transaction of its own."""
        ...


@contextmanager
def audited(store: Appender, attempt: Attempt, *, reason: str | None,
            session: str | None) -> Iterator[None]:
    """Write the attempt's one audit row when the block ends, before its caller gets anything:
    `ok`, the outcome a SkillIndexError names, else `error`. A store that could not answer
    (Unanswered) leaves no row: the path that answers instead writes it."""
    def append(outcome: str) -> None:
        store.append(attempt.record(outcome=outcome, reason=reason, session=session))

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
