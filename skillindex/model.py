"""Frozen value objects and enums shared by every layer of skillindex."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Status(enum.StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Scope(enum.StrEnum):
    PROJECT = "project"
    USER = "user"
    ADMIN = "admin"
    PLUGIN = "plugin"
    BUILTIN = "builtin"


class Validation(enum.StrEnum):
    STRICT = "strict"
    LENIENT = "lenient"


class RiskPolicy(enum.StrEnum):
    """What a skill with risk findings gets: a warning, or withheld until approved."""

    WARN = "warn"
    QUARANTINE = "quarantine"


# What an audit row says happened to a disclosure attempt.
AUDIT_OUTCOMES = ("ok", "refused", "mismatch", "missing", "not-found", "error")
# The events a disclosure writes, each at its one level (1 catalog, 2 body, 3 file); the
# store refuses any other pair (migration 0009's CHECK constraints, which must agree).
AUDIT_EVENT_LEVELS = {"catalog.published": 1, "skill.read": 2, "skill.command": 2,
                      "resource.read": 3}


class ResourceKind(enum.StrEnum):
    ENTRY = "entry"  # the SKILL.md itself
    REFERENCE = "reference"
    SCRIPT = "script"
    ASSET = "asset"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    severity: Severity
    message: str
    # The file inside the skill it is about, where the walk knows one (never stored: the
    # message names it too).
    path: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": str(self.severity), "message": self.message}


class Gravity(enum.StrEnum):
    """How much a finding weighs for an author: an error rejects, a risk is what a scanner
    flags, a warning is advice. `--fail-on` counts a gravity and every heavier one."""

    ERROR = "error"
    RISK = "risk"
    WARNING = "warning"

    @property
    def weight(self) -> int:
        return _WEIGHTS[self]


_WEIGHTS = {Gravity.ERROR: 3, Gravity.RISK: 2, Gravity.WARNING: 1}


@dataclass(frozen=True, slots=True)
class FileFinding:
    """A finding where an author can see it: the file it is about and the line, when known."""

    code: str
    gravity: Gravity
    message: str
    file: Path
    line: int | None = None  # 1-based; None for the file as a whole
    skill: str | None = None  # the name of the skill it belongs to, when it has one

    @property
    def severity(self) -> Severity:
        return Severity.ERROR if self.gravity is Gravity.ERROR else Severity.WARNING


@dataclass(frozen=True, slots=True)
class FindingCount:
    """How many candidates carry a finding of one code and severity."""

    code: str
    severity: Severity
    candidates: int

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "severity": str(self.severity), "candidates": self.candidates}


class FileStat(NamedTuple):
    """The identity of a file's version: unchanged when all five fields are unchanged.
    (A named tuple, not a frozen dataclass: one is made for every file a reindex reads, and
    a frozen dataclass's constructor costs three times as much.)"""

    size: int
    mtime_ns: int
    inode: int
    device: int
    ctime_ns: int | None = None  # None only in rows stored before ctime was recorded

    def unread_key(self) -> str:
        """What stands for the bytes of a file too large to read: any write moves its ctime
        (which no call can set back) and a replacement its inode. The device is left out, as
        some filesystems number theirs anew at each mount."""
        return f"stat:{self.size}:{self.mtime_ns}:{self.ctime_ns}:{self.inode}"


@dataclass(frozen=True, slots=True)
class KnownFile:
    """A file of a skill as the last reindex stored it: its stat, its hashes (None for a file
    recorded by its size alone) and its risk findings as stored."""

    stat: FileStat
    xxh3: str | None
    sha256: str | None
    risks: str | None = None


@dataclass(frozen=True, slots=True)
class KnownSkill:
    """A skill as the last reindex stored it; `tree_key` tells whether anything changed."""

    candidate_id: int
    tree_key: str
    rejected: bool = False


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of a skill a reindex reads: larger files and skills are recorded, not read."""

    max_file_bytes: int = 16 << 20
    max_skill_files: int = 512
    max_skill_bytes: int = 16 << 20


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class SigningPolicy:
    """How a root's `skill.oms.sig` signatures are judged: recorded or required, verified by a
    public key or a certificate chain, by the signers allowed (any when empty)."""

    require: bool = False
    key: str | None = None
    certificates: tuple[str, ...] = ()
    signers: tuple[str, ...] = ()

    def key_text(self) -> str:
        return (f"{'require' if self.require else 'record'}:{self.key}:"
                f"{','.join(self.certificates)}:{','.join(self.signers)}")


@dataclass(frozen=True, slots=True)
class RootSpec:
    """One directory to scan, with everything the policy needs to judge what it holds."""

    path: Path
    scope: Scope
    provider: str
    precedence: int
    position: int = 0  # registration order; breaks precedence ties
    max_depth: int = 1
    require_description: bool = True
    validation: Validation = Validation.LENIENT
    name_prefix: str = ""  # claude-plugins qualify their names as `plugin:name`
    disabled_by: str | None = None  # the setting that switched this source off, if any
    allow_hardlinks: bool = False  # disclose files with more than one link
    risk_policy: RiskPolicy = RiskPolicy.WARN
    remote: RemoteSource | None = None  # a URL root: `path` is its verified cache
    signing: SigningPolicy | None = field(default_factory=SigningPolicy)  # None: off



@dataclass(frozen=True, slots=True)
class RemoteSource:
    """Where a URL root's skills come from, and how much one archive of it may unpack to."""

    url: str
    allow_http: bool = False
    max_archive_files: int = 1000
    max_archive_bytes: int = 50 << 20


# The columns of a manifest row as a reindex stages it: a tuple in this order (one a file, so
# not a dict: a cold index made 40,000 dicts at 10,000 skills and then took them apart).
RESOURCE_ROW = ("rel_path", "kind", "size", "mtime_ns", "inode", "device", "xxh3", "sha256",
                "risks", "ctime_ns", "mode")


class ResourceEntry(NamedTuple):
    """One file of a skill as a scan found it (a named tuple: one a file, see FileStat)."""

    rel_path: str
    kind: ResourceKind
    stat: FileStat
    xxh3: str | None  # None (both) for a file over the size limit: recorded, never read
    sha256: str | None
    risks: str | None = None  # the risk rules' record of the file (index.risk.record)
    mode: int | None = None  # the permission bits (st_mode & 0o7777)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One SKILL.md found under a root, valid or not, as the store holds it."""

    name: str | None
    description: str | None
    path: Path  # the SKILL.md
    directory: Path
    real_path: Path  # the resolved skill directory
    root: Path
    scope: Scope
    provider: str
    precedence: int
    position: int
    status: Status
    enabled: bool
    findings: tuple[Finding, ...] = ()
    id: int = 0
    # The frontmatter's `disable-model-invocation: true`: kept out of the catalog, still loadable.
    model_invocation: bool = True

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "root": str(self.root),
            "scope": str(self.scope),
            "provider": self.provider,
            "precedence": self.precedence,
            "status": str(self.status),
            "enabled": self.enabled,
            "model_invocation": self.model_invocation,
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class ScanProblem:
    """Something under a root that could not be walked; recorded, and the walk goes on."""

    root: Path
    path: Path
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"root": str(self.root), "path": str(self.path), "code": self.code,
                "message": self.message}


@dataclass(frozen=True, slots=True)
class ContextFile:
    """A standalone instruction file (XCSH.md, AGENTS.md ...) in cwd or one of its ancestors."""

    path: Path
    depth: int  # 0 in cwd, 1 in its parent ...
    size: int
    mtime_ns: int
    xxh3: str
    sha256: str

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "name": self.path.name, "depth": self.depth,
                "size": self.size, "mtime_ns": self.mtime_ns, "xxh3": self.xxh3,
                "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class RootState:
    """A root as the store last saw it."""

    spec: RootSpec
    present: bool
    candidates: int
    rejected: int
    problems: tuple[ScanProblem, ...] = ()
    indexed: bool = True
    stale: str | None = None  # a URL root whose last fetch failed: "stale since T: why"

    def as_dict(self) -> dict[str, object]:
        return {
            "path": str(self.spec.path),
            "scope": str(self.spec.scope),
            "provider": self.spec.provider,
            "precedence": self.spec.precedence,
            "max_depth": self.spec.max_depth,
            "require_description": self.spec.require_description,
            "validation": str(self.spec.validation),
            "enabled": self.spec.disabled_by is None,
            "disabled_by": self.spec.disabled_by,
            "present": self.present,
            "indexed": self.indexed,
            "candidates": self.candidates,
            "rejected": self.rejected,
            "problems": [p.as_dict() for p in self.problems],
            "url": self.spec.remote.url if self.spec.remote else None,
            "stale": self.stale,
        }


@dataclass(frozen=True, slots=True)
class IndexReport:
    run_id: int
    seen: int
    added: int
    changed: int
    unchanged: int
    removed: int
    rejected: int
    duration_s: float
    files_read: int = 0
    roots: int = 0
    problems: tuple[ScanProblem, ...] = field(default=())
    # Files unchanged, judged again: the validation mode or another rule of the root changed.
    rejudged: int = 0
    # What each URL root's fetch did (requests, downloads, bytes, stale reasons).
    fetches: tuple[dict[str, object], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "seen": self.seen,
            "added": self.added,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "rejected": self.rejected,
            "duration_s": round(self.duration_s, 6),
            "files_read": self.files_read,
            "roots": self.roots,
            "rejudged": self.rejudged,
            "problems": [p.as_dict() for p in self.problems],
            "fetches": list(self.fetches),
        }


class Level(enum.IntEnum):
    """How much of a skill a disclosure hands over: catalog entry, body, or a file of it."""

    CATALOG = 1
    BODY = 2
    RESOURCE = 3


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One file of a skill as the last reindex recorded it; what a read is checked against."""

    rel_path: str
    size: int
    xxh3: str | None  # None (both) for a file over the size limit: never read, never disclosed
    sha256: str | None
    # Loaded only where an approval or `verify` needs them: the permission bits, and the stat
    # that stands for the bytes of a file never read.
    mode: int | None = None
    stat: FileStat | None = None


@dataclass(frozen=True, slots=True)
class SkillManifest:
    """A catalog skill as the last reindex recorded it: its frontmatter and its files."""

    name: str  # the name the catalog gives it (qualified where the collision policy says so)
    candidate: Candidate
    frontmatter: dict[str, object]  # as stored; always holds `name`, and `description` if known
    files: tuple[ManifestFile, ...]  # sorted by relative path, SKILL.md included

    @property
    def size(self) -> int:
        return sum(entry.size for entry in self.files)


@dataclass(frozen=True, slots=True)
class StoredSkill:
    """A catalog skill's stored frontmatter and files, without its Candidate: what publishing
    every winner at once needs. A read names it by the stored resolution it came from."""

    name: str  # the catalog name
    resolution: str | None  # that resolution's key; None when the winners were resolved anew
    frontmatter: dict[str, object]  # exactly as the file declared it (empty if unparsable)
    files: tuple[ManifestFile, ...]  # sorted by relative path, SKILL.md included
    signer: str | None = None  # who signed it, when its `skill.oms.sig` was verified

    @property
    def size(self) -> int:
        return sum(entry.size for entry in self.files)


@dataclass(frozen=True, slots=True)
class Disclosure:
    """Verified content of a skill: `data` are exactly the bytes handed over."""

    uri: str
    skill: str
    resource: str | None  # None for the body
    data: bytes
    text: str | None  # None when the bytes are not UTF-8
    content_type: str
    path: Path  # the file that was read
    digest: str  # sha256 of the whole file read (for the body: of SKILL.md)
    level: Level

    def as_dict(self) -> dict[str, object]:
        return {"uri": self.uri, "path": str(self.path), "content_type": self.content_type,
                "bytes": len(self.data), "digest": self.digest, "level": int(self.level),
                "text": self.text}


@dataclass(frozen=True, slots=True)
class SkillCommand:
    """The follow-up message of `/skill:<name> [args]`, as the seed system sends it."""

    name: str
    path: Path  # the SKILL.md
    args: str | None
    message: str
    digest: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "args": self.args,
                "message": self.message, "digest": self.digest}


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One row of the append-only audit: an attempt to disclose something, never its contents."""

    time: datetime
    event: str
    level: int
    outcome: str
    skill: str | None = None
    resource: str | None = None
    bytes: int = 0
    digest: str | None = None
    reason: str | None = None
    session: str | None = None
    path: str | None = None
    # Who the server authenticated (a bearer token's principal); None when nobody was asked.
    principal: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"time": self.time.isoformat(), "event": self.event, "skill": self.skill,
                "resource": self.resource, "level": self.level, "bytes": self.bytes,
                "digest": self.digest, "outcome": self.outcome, "reason": self.reason,
                "session": self.session, "path": self.path, "principal": self.principal}


class AuditListing(list[AuditEvent]):
    """Audit rows as listed, and the ids of rows left out because a field does not parse
    (only an edit of the database leaves one; `audit verify` names it)."""

    def __init__(self, events: Iterable[AuditEvent] = (), skipped: Iterable[int] = ()) -> None:
        super().__init__(events)
        self.skipped = tuple(skipped)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """An event to append to the audit: the store adds its time and its place in the chain."""

    event: str
    level: int
    outcome: str
    skill: str | None = None
    resource: str | None = None
    bytes: int = 0
    digest: str | None = None
    reason: str | None = None
    session: str | None = None
    path: str | None = None
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class BrokenEvent:
    """The first audit row whose link to the chain does not hold."""

    id: int
    time: str
    problem: str

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "time": self.time, "problem": self.problem}


@dataclass(frozen=True, slots=True)
class Anchor:
    """The audit chain's head and length as a reindex found them, kept in its `index_run`."""

    run: int
    time: str
    events: int
    head: str | None

    def as_dict(self) -> dict[str, object]:
        return {"run": self.run, "time": self.time, "events": self.events, "head": self.head}


@dataclass(frozen=True, slots=True)
class AnchorProblem:
    """An anchor the chain no longer reaches: its end was cut, or its history rewritten."""

    anchor: Anchor
    problem: str

    def as_dict(self) -> dict[str, object]:
        return {**self.anchor.as_dict(), "problem": self.problem}


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The audit chain of one index recomputed: its head hash and the first broken row, if any.

    `events` counts the rows that verified (all of them when nothing is broken); `head` is the
    hash of the last of them. `pinned` is a head published earlier; `pinned_at` its position in
    the chain (1 = the first event), None when the chain no longer holds it. `anchors` counts
    the anchors the chain still reaches, `anchored` the length of the longest of them; `lost`
    is the first anchor it does not reach.
    """

    index: str
    events: int
    head: str
    broken: BrokenEvent | None
    pinned: str | None = None
    pinned_at: int | None = None
    anchors: int = 0
    anchored: int = 0
    lost: AnchorProblem | None = None

    @property
    def ok(self) -> bool:
        return (self.broken is None and self.lost is None
                and (self.pinned is None or self.pinned_at is not None))

    @property
    def unproven(self) -> int:
        """The newest events whose removal this check could not tell: those after the last
        anchor and after the pinned head."""
        return max(0, self.events - max(self.anchored, self.pinned_at or 0))

    def as_dict(self) -> dict[str, object]:
        pinned = None if self.pinned is None else {
            "hash": self.pinned, "found": self.pinned_at is not None,
            "position": self.pinned_at,
            "events_after": None if self.pinned_at is None else self.events - self.pinned_at}
        return {"ok": self.ok, "index": self.index, "events": self.events, "head": self.head,
                "broken": None if self.broken is None else self.broken.as_dict(),
                "pinned": pinned,
                "anchors": {"reached": self.anchors, "covered": self.anchored,
                            "lost": None if self.lost is None else self.lost.as_dict()},
                "unproven": self.unproven}


@dataclass(frozen=True, slots=True)
class SessionLevels:
    """Bytes disclosed to one session per level, and how many attempts it made."""

    session: str | None
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int
    events: int

    def as_dict(self) -> dict[str, object]:
        return {"session": self.session, "l1_bytes": self.l1_bytes, "l2_bytes": self.l2_bytes,
                "l3_bytes": self.l3_bytes, "events": self.events}


class Drift(enum.StrEnum):
    CHANGED = "changed"
    MISSING = "missing"
    UNEXPECTED = "unexpected"


@dataclass(frozen=True, slots=True)
class DriftItem:
    skill: str
    resource: str
    problem: Drift
    path: Path
    detail: str | None = None  # why a skill could not be verified (a failure no rule foresaw)

    def as_dict(self) -> dict[str, str]:
        shown = {"skill": self.skill, "resource": self.resource, "problem": str(self.problem),
                 "path": str(self.path)}
        return shown if self.detail is None else {**shown, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Files on disk compared with the index: `ok` when nothing drifted."""

    skills: int
    files: int
    drift: tuple[DriftItem, ...]

    @property
    def ok(self) -> bool:
        return not self.drift

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "skills": self.skills, "files": self.files,
                "drift": [item.as_dict() for item in self.drift]}


@dataclass(frozen=True, slots=True)
class RiskFinding:
    """A risk finding of one skill, in one of its files, for `skillindex risks`."""

    name: str | None
    skill_path: Path  # the SKILL.md
    code: str
    path: str | None  # the file, relative to the skill directory
    line: int | None  # 0 for the file as a whole
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "skill_path": str(self.skill_path), "code": self.code,
                "path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True, slots=True)
class Approval:
    """`skillindex trust NAME`: the content (manifest digest) that was approved."""

    name: str
    digest: str
    path: Path  # the SKILL.md
    findings: tuple[Finding, ...]  # the risk findings that were approved with it
    new: bool  # False when this content had been approved before
    files: tuple[ManifestFile, ...] = ()  # what was approved: hashed again on disk, unchanged

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "digest": self.digest, "path": str(self.path),
                "findings": [f.as_dict() for f in self.findings], "new": self.new,
                "files": [{"path": f.rel_path, "sha256": f.sha256, "size": f.size,
                           "executable": None if f.mode is None else bool(f.mode & 0o111)}
                          for f in self.files]}


@dataclass(frozen=True, slots=True)
class SearchMatch:
    """A candidate the full-text index matched, before resolution decides whether it is used."""

    candidate_id: int
    name: str
    score: float  # higher is better; comparable within one search on one backend


class Listing(NamedTuple):
    """What the catalog reads of a winner, in catalog order: no description, which is fetched
    only for the skills a budget can show it for (see catalog.describable)."""

    name: str
    declared: str | None
    candidate_id: int
    location: str
    model_invocation: bool
    described: bool  # whether it has a description with more than whitespace


def has_text(description: str | None) -> bool:
    return bool(description and not description.isspace())


@dataclass(frozen=True, slots=True)
class SkillUsage:
    """What the audit log says of one skill name over a window: its successful loads, what
    they handed over and to how many sessions, and its failed attempts by outcome."""

    name: str
    in_catalog: bool  # a winner of the working directory's roots
    body_loads: int  # level 2: a read of the body or a `/skill:` command
    resource_loads: int  # level 3: a read of a file of the skill
    bytes: int
    sessions: int  # distinct sessions among the successful loads
    first_load: datetime | None
    last_load: datetime | None
    refused: int = 0
    mismatch: int = 0
    missing: int = 0
    not_found: int = 0
    error: int = 0
    attempts: int = 0  # every skill-level event of the name, successful or not

    @property
    def loads(self) -> int:
        return self.body_loads + self.resource_loads

    @property
    def failed(self) -> int:
        return self.refused + self.mismatch + self.missing + self.not_found + self.error

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "in_catalog": self.in_catalog, "loads": self.loads,
                "body_loads": self.body_loads, "resource_loads": self.resource_loads,
                "bytes": self.bytes, "sessions": self.sessions,
                "first_load": None if self.first_load is None else self.first_load.isoformat(),
                "last_load": None if self.last_load is None else self.last_load.isoformat(),
                "refused": self.refused, "mismatch": self.mismatch, "missing": self.missing,
                "not_found": self.not_found, "error": self.error, "failed": self.failed,
                "attempts": self.attempts}


@dataclass(frozen=True, slots=True)
class PrincipalUsage:
    """What one principal (a caller `serve --http` authenticated) did over a window."""

    principal: str
    loads: int  # successful loads of bodies and files
    bytes: int
    sessions: int
    skills: int  # distinct skills among its loads
    failed: int  # refused, mismatch, missing, not-found and error attempts
    last_load: datetime | None

    def as_dict(self) -> dict[str, object]:
        return {"principal": self.principal, "loads": self.loads, "bytes": self.bytes,
                "sessions": self.sessions, "skills": self.skills, "failed": self.failed,
                "last_load": None if self.last_load is None else self.last_load.isoformat()}


@dataclass(frozen=True, slots=True)
class UsageDay:
    """Successful loads and failed skill-level attempts on one UTC day."""

    day: str  # YYYY-MM-DD
    loads: int
    failed: int

    def as_dict(self) -> dict[str, object]:
        return {"day": self.day, "loads": self.loads, "failed": self.failed}


@dataclass(frozen=True, slots=True)
class UsageReport:
    """The audit log over a window, skill by skill (`skillindex usage`)."""

    index: str
    since: datetime
    until: datetime
    session: str | None  # the filters it was narrowed to
    skill: str | None
    skills: tuple[SkillUsage, ...]  # every name with skill-level events, most loaded first
    never_loaded: tuple[str, ...]  # catalog skills without a successful load, in catalog order
    catalog_skills: int
    sessions: int  # distinct sessions that loaded anything
    published: int  # catalog publications (level 1)
    days: tuple[UsageDay, ...]  # every day of the window, oldest first
    busiest: tuple[tuple[str, tuple[int, ...]], ...]  # the most loaded names, loads per day
    principal: str | None = None  # the principal it was narrowed to
    principals: tuple[PrincipalUsage, ...] = ()  # each authenticated caller, by name

    def total(self, field_name: str) -> int:
        return sum(int(getattr(row, field_name)) for row in self.skills)

    def totals(self) -> dict[str, int]:
        fields = ("loads", "body_loads", "resource_loads", "bytes", "refused", "mismatch",
                  "missing", "not_found", "error", "failed", "attempts")
        return {"catalog_skills": self.catalog_skills,
                "loaded_skills": sum(1 for row in self.skills if row.loads and row.in_catalog),
                "never_loaded": len(self.never_loaded), "sessions": self.sessions,
                "catalog_published": self.published,
                **{name: self.total(name) for name in fields}}

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "since": self.since.isoformat(),
                "until": self.until.isoformat(), "session": self.session, "skill": self.skill,
                "skills": [row.as_dict() for row in self.skills],
                "never_loaded": list(self.never_loaded), "totals": self.totals(),
                "days": [day.as_dict() for day in self.days],
                "busiest": [{"name": name, "loads": list(loads)}
                            for name, loads in self.busiest],
                "principal": self.principal,
                "principals": [row.as_dict() for row in self.principals]}


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An audit row with its place in the log: its id (a stream resumes after it), its index
    and its link hash."""

    id: int
    index: str
    event: AuditEvent
    row_hash: str | None

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "index": self.index, **self.event.as_dict(),
                "row_hash": self.row_hash}


class LoggedListing(list[LoggedEvent]):
    """Audit rows read in id order, and the ids of rows left out because a field does not
    parse (only an edit of the database leaves one; `audit verify` names it)."""

    def __init__(self, events: Iterable[LoggedEvent] = (), skipped: Iterable[int] = ()) -> None:
        super().__init__(events)
        self.skipped = tuple(skipped)


@dataclass(frozen=True, slots=True)
class VerifyRecord:
    """What the last `verify` of a directory's roots found, as the store kept it."""

    time: datetime
    cwd: str
    skills: int
    files: int
    drifted: int  # every drifted file; `drift` names the first of them
    drift: tuple[DriftItem, ...]

    @property
    def ok(self) -> bool:
        return self.drifted == 0

    def as_dict(self) -> dict[str, object]:
        return {"time": self.time.isoformat(), "cwd": self.cwd, "ok": self.ok,
                "skills": self.skills, "files": self.files, "drifted": self.drifted,
                "drift": [item.as_dict() for item in self.drift]}


@dataclass(frozen=True, slots=True)
class StoredApproval:
    """One `skillindex trust NAME`: the content digest approved, when, and why."""

    name: str
    digest: str
    approved_at: datetime
    note: str | None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "digest": self.digest,
                "approved_at": self.approved_at.isoformat(), "note": self.note}


@dataclass(frozen=True, slots=True)
class HeldSkill:
    """A skill that would win but is withheld until approved (risk_policy = quarantine)."""

    name: str
    path: Path  # the SKILL.md
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "reason": self.reason}
