"""Typed SQLAlchemy models of the index: runs, roots, candidates, findings, resources, events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from skillindex.model import AUDIT_EVENT_LEVELS, AUDIT_OUTCOMES

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# The full-text index is dialect-specific and lives outside the models: an FTS5 table (and its
# shadow tables) on SQLite; on PostgreSQL generated tsvector and length columns, their GIN
# index and the table of totals BM25 reads (migration 0010).
FULL_TEXT_OBJECTS = frozenset({"candidate_fts", "search_vector", "ix_candidate_search_vector",
                               "search_length", "search_total"})
# So are the audit chain's lock and the reindex lock on PostgreSQL (a row per index, locked by
# the owner's functions: migrations 0009 and 0017).
LOCK_OBJECTS = frozenset({"load_event_lock", "reindex_mutex"})


def modelled(obj: object, name: str | None, type_: str, reflected: bool,
             compare_to: object) -> bool:
    """Alembic's `include_object`: whether a schema object is the models' to compare."""
    if not reflected or name is None:
        return True
    if name in LOCK_OBJECTS:
        return False
    return name not in FULL_TEXT_OBJECTS and not name.startswith("candidate_fts_")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class FileId(TypeDecorator[int]):
    """An unsigned 64-bit inode or device number kept in a signed BIGINT column.

    Neither SQLite nor PostgreSQL has an unsigned 64-bit integer, and some file systems hand out
    inode numbers of 2^63 and above; those are stored as their two's-complement (negative) value
    and come back unchanged, so a SQL reader sees them negative.
    """

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        number = int(value)
        return number - 2**64 if number >= 2**63 else number

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        return int(value) + 2**64 if value < 0 else int(value)


class IndexRun(Base):
    """One reindex: when, from where, what it found."""

    __tablename__ = "index_run"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100), default="default")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cwd: Mapped[str] = mapped_column(Text)
    all_roots: Mapped[bool] = mapped_column(Boolean, default=False)
    roots: Mapped[int] = mapped_column(Integer, default=0)
    seen: Mapped[int] = mapped_column(Integer, default=0)
    added: Mapped[int] = mapped_column(Integer, default=0)
    changed: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    removed: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    files_read: Mapped[int] = mapped_column(Integer, default=0)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    # The audit chain of this index as the run found it: its head hash and how many events it
    # held (an anchor `audit verify` checks the chain still reaches). NULL before 0009.
    audit_head: Mapped[str | None] = mapped_column(String(64))
    audit_events: Mapped[int | None] = mapped_column(BigInteger)


class Root(Base):
    """A directory that was indexed, with the provenance its candidates inherit."""

    __tablename__ = "root"
    __table_args__ = (UniqueConstraint("index_name", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100), default="default")
    path: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(20))
    provider: Mapped[str] = mapped_column(String(100))
    precedence: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer, default=0)
    max_depth: Mapped[int] = mapped_column(Integer, default=1)
    require_description: Mapped[bool] = mapped_column(Boolean, default=True)
    validation: Mapped[str] = mapped_column(String(20))
    name_prefix: Mapped[str] = mapped_column(String(200), default="")
    present: Mapped[bool] = mapped_column(Boolean, default=True)
    # The last run that changed this root's candidates (not merely the last that scanned it).
    last_run_id: Mapped[int | None] = mapped_column(Integer)


class Candidate(Base):
    """One SKILL.md under a root, accepted or rejected, with its provenance and file identity."""

    __tablename__ = "candidate"
    __table_args__ = (
        UniqueConstraint("root_id", "rel_dir"),
        Index("ix_candidate_name", "name"),
        Index("ix_candidate_real_path", "real_path"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    root_id: Mapped[int] = mapped_column(ForeignKey("root.id", ondelete="CASCADE"))
    rel_dir: Mapped[str] = mapped_column(Text)
    dir_name: Mapped[str] = mapped_column(Text)
    dir_path: Mapped[str] = mapped_column(Text)
    skill_path: Mapped[str] = mapped_column(Text)
    real_path: Mapped[str] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    frontmatter: Mapped[str | None] = mapped_column(Text)
    tree_key: Mapped[str] = mapped_column(String(32))
    size: Mapped[int | None] = mapped_column(BigInteger)
    mtime_ns: Mapped[int | None] = mapped_column(BigInteger)
    inode: Mapped[int | None] = mapped_column(FileId)
    device: Mapped[int | None] = mapped_column(FileId)
    xxh3: Mapped[str | None] = mapped_column(String(32))
    sha256: Mapped[str | None] = mapped_column(String(64))
    ctime_ns: Mapped[int | None] = mapped_column(BigInteger)
    first_run_id: Mapped[int] = mapped_column(Integer)
    changed_run_id: Mapped[int] = mapped_column(Integer)
    # Text a search reads beside name and description: other frontmatter values and the body's
    # headings and opening (see index/searchtext.py).
    search_text: Mapped[str | None] = mapped_column(Text)
    disable_model_invocation: Mapped[bool] = mapped_column(Boolean, default=False,
                                                           server_default=false())
    # Other hosts' fields (index/dialect.py), as JSON; NULL when the skill uses none.
    host_fields: Mapped[str | None] = mapped_column(Text)
    # The skill's skill.oms.sig as verified at index time (index/signing.py), as JSON: status,
    # signer, the signature's sha256, the reason it failed; NULL when it holds none.
    signature: Mapped[str | None] = mapped_column(Text)


class Finding(Base):
    """A validation finding of a candidate: an error rejects it, a warning does not."""

    __tablename__ = "finding"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("candidate.id", ondelete="CASCADE"), index=True
    )
    code: Mapped[str] = mapped_column(String(50))
    severity: Mapped[str] = mapped_column(String(10))
    message: Mapped[str] = mapped_column(Text)
    # Risk findings name the file (relative to the skill) and the line they were found on.
    path: Mapped[str | None] = mapped_column(Text)
    line: Mapped[int | None] = mapped_column(Integer)


class Resource(Base):
    """One regular file of a skill's manifest, with the hashes a disclosure is checked against."""

    __tablename__ = "resource"
    __table_args__ = (UniqueConstraint("candidate_id", "rel_path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidate.id", ondelete="CASCADE"))
    rel_path: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(20))
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    inode: Mapped[int] = mapped_column(FileId)
    device: Mapped[int] = mapped_column(FileId)
    # Both None for a file over the size limit: recorded by its size, never read.
    xxh3: Mapped[str | None] = mapped_column(String(32))
    sha256: Mapped[str | None] = mapped_column(String(64))
    ctime_ns: Mapped[int | None] = mapped_column(BigInteger)
    # The risk rules' verdict on this file (index.risk.record); NULL when not judged yet.
    risks: Mapped[str | None] = mapped_column(Text)
    # The permission bits (st_mode & 0o7777), part of an approval; NULL in rows stored before.
    mode: Mapped[int | None] = mapped_column(Integer)


class Approval(Base):
    """`skillindex trust NAME`: the skill may be served while its content has this digest."""

    __tablename__ = "approval"
    __table_args__ = (UniqueConstraint("index_name", "name", "digest"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64))
    approved_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    note: Mapped[str | None] = mapped_column(Text)


class ScanIssue(Base):
    """Something under a root the walk could not enter; replaced at each reindex of the root."""

    __tablename__ = "scan_issue"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    root_id: Mapped[int] = mapped_column(ForeignKey("root.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(Text)
    code: Mapped[str] = mapped_column(String(50))
    message: Mapped[str] = mapped_column(Text)


class CatalogCache(Base):
    """A rendered catalog for one set of roots, settings and request; emptied by every reindex."""

    __tablename__ = "catalog_cache"
    __table_args__ = (UniqueConstraint("index_name", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100), default="default")
    key: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)


class ResolvedSet(Base):
    """The resolution of one set of roots under one set of rules, as of the runs in its key.

    Written by the reindex of a working directory whose roots these are, or by the first query
    from one that was never resolved; `key` digests the planned roots, the runs that last
    changed them and the resolution settings.
    """

    __tablename__ = "resolved_set"
    __table_args__ = (UniqueConstraint("index_name", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100))
    key: Mapped[str] = mapped_column(String(64))
    roots: Mapped[str] = mapped_column(Text)  # JSON list of the root paths it covers
    winners: Mapped[int] = mapped_column(Integer)


class ResolvedWinner(Base):
    """One winner of a resolved set, in catalog order, under its catalog name.

    `candidate_id` has no foreign key: a set is keyed by the runs that wrote its roots, so a
    candidate a later run replaced is only referenced by a set no key reaches any more (and the
    reindex deletes those sets in the same transaction).
    """

    __tablename__ = "resolved_winner"
    __table_args__ = (Index("ix_resolved_winner_name", "set_id", "name"),
                      Index("ix_resolved_winner_candidate", "set_id", "candidate_id"))

    set_id: Mapped[int] = mapped_column(ForeignKey("resolved_set.id", ondelete="CASCADE"),
                                        primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(Text)
    candidate_id: Mapped[int] = mapped_column(Integer)
    collision: Mapped[str | None] = mapped_column(Text)  # JSON, when the name was contested


EVENT_LEVELS = " OR ".join(f"(event = '{event}' AND level = {level})"
                           for event, level in AUDIT_EVENT_LEVELS.items())
OUTCOMES = "outcome IN ({})".format(", ".join(f"'{o}'" for o in AUDIT_OUTCOMES))


class LoadEvent(Base):
    """One disclosure attempt; the database refuses UPDATE and DELETE on this table.

    Each row is a link of its index's hash chain: `prev_hash` is the `row_hash` of the event
    before it (64 zeros for the first), `row_hash` the sha256 over that and the row's fields
    (store/audit.py), so an edited, deleted, inserted or replaced row breaks the chain.
    """

    __tablename__ = "load_event"
    __table_args__ = (
        Index("ix_load_event_session", "session"),
        Index("ix_load_event_skill", "skill"),
        Index("ix_load_event_principal", "principal"),
        # The head of a chain is the newest row of its index.
        Index("ix_load_event_index_name_id", "index_name", "id"),
        # A window of one index's events (usage, the report) is a range of this index.
        Index("ix_load_event_index_name_time", "index_name", "time"),
        # A chain cannot fork: no two events of an index follow the same one.
        Index("ix_load_event_chain", "index_name", "prev_hash", unique=True),
        # Only what a disclosure writes (model.AUDIT_EVENT_LEVELS, AUDIT_OUTCOMES); on SQLite
        # also `time` in its one text form (migration 0009).
        CheckConstraint(EVENT_LEVELS, name="event_level"),
        CheckConstraint(OUTCOMES, name="outcome"),
        CheckConstraint("bytes >= 0", name="bytes"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100), default="default")
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    event: Mapped[str] = mapped_column(String(50))
    skill: Mapped[str | None] = mapped_column(Text)
    resource: Mapped[str | None] = mapped_column(Text)
    level: Mapped[int] = mapped_column(Integer)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    digest: Mapped[str | None] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    session: Mapped[str | None] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(Text)
    # Who the server authenticated (migration 0013); None for a local or unauthenticated caller.
    principal: Mapped[str | None] = mapped_column(Text)
    # Nullable only because SQLite cannot add a NOT NULL column; every row has both.
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    row_hash: Mapped[str | None] = mapped_column(String(64))


class VerifyRun(Base):
    """What one `verify` found: the files it hashed and the drift, for the report to show."""

    __tablename__ = "verify_run"
    __table_args__ = (Index("ix_verify_run_index_name_id", "index_name", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100))
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    cwd: Mapped[str] = mapped_column(Text)
    roots: Mapped[str] = mapped_column(Text)  # JSON list of the root paths it covered
    skills: Mapped[int] = mapped_column(Integer)
    files: Mapped[int] = mapped_column(Integer)
    drifted: Mapped[int] = mapped_column(Integer)  # how many files drifted in all
    drift: Mapped[str] = mapped_column(Text)  # JSON list of the first of them (DRIFT_KEPT)


class UsageDay(Base):
    """What one UTC day's audit events of one skill name sum to (migration 0014), kept by an
    insert trigger on `load_event` and derived from it alone: `usage` reads whole days here
    and the events of a window's partial days from the audit itself."""

    __tablename__ = "usage_day"
    __table_args__ = (Index("ix_usage_day_index_name_day_skill", "index_name", "day", "skill"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100))
    day: Mapped[str] = mapped_column(String(10))  # the UTC date, YYYY-MM-DD
    skill: Mapped[str | None] = mapped_column(Text)
    body: Mapped[int] = mapped_column(Integer, server_default="0")
    resource: Mapped[int] = mapped_column(Integer, server_default="0")
    bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    refused: Mapped[int] = mapped_column(Integer, server_default="0")
    mismatch: Mapped[int] = mapped_column(Integer, server_default="0")
    missing: Mapped[int] = mapped_column(Integer, server_default="0")
    not_found: Mapped[int] = mapped_column(Integer, server_default="0")
    error: Mapped[int] = mapped_column(Integer, server_default="0")
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    published: Mapped[int] = mapped_column(Integer, server_default="0")
    failed: Mapped[int] = mapped_column(Integer, server_default="0")
    first_load: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_load: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ReindexLock(Base):
    """Who is reindexing an index now; the lock itself on SQLite, a notice beside PostgreSQL's.

    On SQLite the row is the lock: taken in a write transaction, refreshed while the reindex runs
    and deleted at its end; a row whose holder died on this host, or whose lease expired, is stale.
    On PostgreSQL a row of `reindex_mutex`, which only the owner's function may lock (migration
    0017), excludes the other reindexes and this row only names the holder.
    """

    __tablename__ = "reindex_lock"

    index_name: Mapped[str] = mapped_column(String(100), primary_key=True)
    token: Mapped[str] = mapped_column(String(32))
    holder: Mapped[str] = mapped_column(Text)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AdvisoryFeed(Base):
    """One advisory or revocation feed named in settings, as last read well.

    `advisories` is the feed in force (a JSON list, query/advisories.py); a read that fails
    leaves it and sets `error`, so a malformed or unreachable feed never lifts a revocation.
    """

    __tablename__ = "advisory_feed"
    __table_args__ = (UniqueConstraint("index_name", "source"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    index_name: Mapped[str] = mapped_column(String(100))
    source: Mapped[str] = mapped_column(Text)  # an absolute path or a URL
    advisories: Mapped[str] = mapped_column(Text)
    digest: Mapped[str | None] = mapped_column(String(64))  # sha256 of the body in force
    etag: Mapped[str | None] = mapped_column(Text)
    loaded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
