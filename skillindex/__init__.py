"""skillindex: a persistent, SQL-backed, audited catalog of Agent Skills."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillindex.errors import (
    AmbiguousUriError,
    AuditBusyError,
    AuditKeptError,
    AuditUnwritableError,
    CommandsDisabledError,
    ConfigError,
    DeletedFileError,
    FileReadError,
    IndexMissingError,
    IntegrityError,
    ModifiedFileError,
    NotFoundError,
    NotUserInvocableError,
    PathRefusedError,
    QuarantinedError,
    ReadOnlyIndexWarning,
    RefusedError,
    ReindexBusyError,
    ReindexLockLostError,
    ResourceNotFoundError,
    SearchQueryError,
    SkillIndexError,
    SkillNotFoundError,
    SkillRejectedError,
    StoreError,
    TooLargeError,
    UnindexedFileError,
    UriCollisionError,
)

if TYPE_CHECKING:
    from skillindex.api import SkillIndex

# The errors are part of the interface: callers catch them by these names.
__all__ = [
    "AmbiguousUriError",
    "AuditBusyError",
    "AuditKeptError",
    "AuditUnwritableError",
    "CommandsDisabledError",
    "ConfigError",
    "DeletedFileError",
    "FileReadError",
    "IndexMissingError",
    "IntegrityError",
    "ModifiedFileError",
    "NotFoundError",
    "NotUserInvocableError",
    "PathRefusedError",
    "QuarantinedError",
    "ReadOnlyIndexWarning",
    "RefusedError",
    "ReindexBusyError",
    "ReindexLockLostError",
    "ResourceNotFoundError",
    "SearchQueryError",
    "SkillIndex",
    "SkillIndexError",
    "SkillNotFoundError",
    "SkillRejectedError",
    "StoreError",
    "TooLargeError",
    "UnindexedFileError",
    "UriCollisionError",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The library entry point pulls in SQLAlchemy; load it only when it is asked for.
    if name == "SkillIndex":
        from skillindex.api import SkillIndex  # noqa: PLC0415

        return SkillIndex
    raise AttributeError(name)
