"""The one exception tree of skillindex, each error carrying the exit code the CLI reports."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4


class SkillIndexError(Exception):
    """Base of every error skillindex raises on purpose."""

    exit_code = EXIT_ERROR
    # What an audit row records when this error ends a disclosure attempt.
    outcome = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(SkillIndexError):
    """The settings file or an option is wrong; the user must fix the input."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source
        self.key = key


class SearchQueryError(SkillIndexError):
    """A search text that holds nothing to search for (no letters or digits)."""

    exit_code = EXIT_USAGE


class StoreError(SkillIndexError):
    """The database could not be opened, migrated or written."""


class AuditKeptError(StoreError):
    """A downgrade would drop audit events and was not told to discard them."""


class AuditBusyError(StoreError):
    """The audit chain's lock was held by another transaction longer than the bounded wait."""

    def __init__(self, index_name: str, waited: float) -> None:
        super().__init__(f"cannot write the audit log of index {index_name}: another "
                         f"transaction held its lock for more than {waited:g} s "
                         "(audit_lock_timeout); nothing was disclosed")
        self.index_name = index_name
        self.waited = waited


class ReadOnlyIndexWarning(UserWarning):
    """An index that cannot be written was opened read-only: reads answer from it as it is,
    caches are not written, and disclosures are refused (AuditUnwritableError)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"the index {path} cannot be written ({why}): reading it read-only; "
                         "disclosures are refused until its audit log can be written")
        self.path = path
        self.why = why


class ReindexBusyError(SkillIndexError):
    """Another process holds the reindex lock of this index."""

    def __init__(self, index_name: str, holder: str, *, waited: float | None = None) -> None:
        if waited is None:
            message = f"index {index_name!r} is being reindexed by {holder}; try again later"
        else:
            message = (f"index {index_name!r} is still being reindexed by {holder} after waiting "
                       f"{waited:g} s; try again later")
        super().__init__(message)
        self.index_name = index_name
        self.holder = holder
        self.waited = waited


class ReindexLockLostError(StoreError):
    """Another process took this reindex's lock over as stale; the reindex wrote nothing."""

    def __init__(self, index_name: str) -> None:
        super().__init__(f"lost the reindex lock of index {index_name!r} (another process took "
                         "it over as stale); nothing was written")
        self.index_name = index_name


class NotFoundError(SkillIndexError):
    """A skill, resource or run that was asked for does not exist."""

    exit_code = EXIT_NOT_FOUND
    outcome = "not-found"


class IndexMissingError(NotFoundError):
    """A command that only reads was pointed at a SQLite index that does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no index at {path}: `skillindex reindex` creates it (or check --db "
                         "and $SKILLINDEX_DB for a typing error)")
        self.path = path


class SkillNotFoundError(NotFoundError):
    def __init__(self, name: str, *, hint: str | None = None) -> None:
        super().__init__(f"skill not found: {name}" + (f"; {hint}" if hint else ""))
        self.name = name


class SkillRejectedError(SkillNotFoundError):
    """The name is a skill the index holds but rejected: nothing of it is served."""

    def __init__(self, name: str, codes: Sequence[str]) -> None:
        listed = ", ".join(codes) or "rejected at index time"
        NotFoundError.__init__(self, f"skill {name} was rejected ({listed}); "
                                     f"`skillindex explain {shlex.quote(name)}` says why")
        self.name = name
        self.codes = tuple(codes)


class ResourceNotFoundError(NotFoundError):
    def __init__(self, skill: str, path: str) -> None:
        super().__init__(f"file not found: {path} (skill {skill})")
        self.skill = skill
        self.path = path


class FileReadError(SkillIndexError):
    """A file inside a skill exists but could not be read (permissions, I/O error)."""

    def __init__(self, message: str, *, skill: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.skill = skill
        self.path = path


class RefusedError(SkillIndexError):
    """A request was understood and deliberately refused (containment, integrity, size, policy)."""

    exit_code = EXIT_REFUSED
    outcome = "refused"

    def __init__(self, message: str, *, skill: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.skill = skill
        self.path = path


class PathRefusedError(RefusedError):
    """The requested path is not a plain relative path inside the skill."""


class AmbiguousUriError(PathRefusedError):
    """A skill:// URI that would name the files of two skills (or of two winners of one name):
    no surface serves it."""


class UriCollisionError(PathRefusedError):
    """A skill whose skill:// URIs meet those of a skill of higher precedence: the lower side
    of the collision, which every surface withholds."""


class IntegrityError(RefusedError):
    """The file on disk is not the file that was indexed."""

    outcome = "mismatch"


class ModifiedFileError(IntegrityError):
    """The file's bytes differ from the stored hash."""


class UnindexedFileError(IntegrityError):
    """The file exists but was not there at the last reindex."""


class DeletedFileError(IntegrityError):
    """The file was indexed but is gone now."""

    outcome = "missing"


class TooLargeError(RefusedError):
    """The file is larger than the caller's byte limit."""

    def __init__(self, message: str, *, size: int, limit: int, skill: str | None = None,
                 path: str | None = None) -> None:
        super().__init__(message, skill=skill, path=path)
        self.size = size
        self.limit = limit


class QuarantinedError(RefusedError):
    """The skill has risk findings under risk_policy = quarantine and no matching approval."""

    def __init__(self, message: str, *, skill: str) -> None:
        super().__init__(message)
        self.skill = skill


class CommandsDisabledError(RefusedError):
    """`/skill:` commands are switched off by `enable_skill_commands = false`."""


class NotUserInvocableError(RefusedError):
    """A skill whose frontmatter says `user-invocable: false` is asked for as a `/skill:`
    command (where host dialects are on)."""


class AuditUnwritableError(RefusedError):
    """A disclosure's audit row could not be written (a read-only index, a full disk, a
    database that refuses the insert): nothing was handed over."""

    def __init__(self, database: str, said: str) -> None:
        super().__init__(f"cannot disclose: the audit log of {database} cannot be written "
                         f"({said}); nothing was handed over")
        self.database = database
        self.said = said


def describe(exc: BaseException, *, limit: int = 200) -> str:
    """An exception nobody foresaw, as one bounded line: its type and the start of its message
    (what a finding, a withheld skill or a drift item can carry without quoting a whole file)."""
    message = " ".join(str(exc).split())
    if len(message) > limit:
        message = message[:limit - 1] + "…"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
