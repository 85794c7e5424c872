"""SkillIndex, the library entry point: opens the store for a configuration and a working
directory; each method hands one use case of query/ the store and what it needs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self, overload

from skillindex.config import Environment, Settings, check_index_name, database_url, load_settings
from skillindex.errors import SkillIndexError
from skillindex.index.dialect import files_in_play
from skillindex.index.indexer import Progress
from skillindex.index.signing import Signature
from skillindex.model import (
    Approval,
    AuditListing,
    AuditRecord,
    Candidate,
    ChainReport,
    ContextFile,
    Disclosure,
    FindingCount,
    HeldSkill,
    IndexReport,
    LoggedEvent,
    LoggedListing,
    RiskFinding,
    RootState,
    ScanProblem,
    SessionLevels,
    SkillCommand,
    SkillManifest,
    Status,
    StoredApproval,
    StoredSkill,
    UsageReport,
    VerifyRecord,
    VerifyReport,
)
from skillindex.providers import (
    RootPlan,
    context_dirs,
    environment,
    plan_roots,
    project_top,
)
from skillindex.query import (
    approve,
    audit,
    disclose,
    explain,
    find,
    follow,
    listing,
    lock,
    lookup,
    quick,
    usage,
)
from skillindex.query import command as command_flow
from skillindex.query import feeds as feeds_flow
from skillindex.query import publish as publish_flow
from skillindex.query import read as read_flow
from skillindex.query import reindex as reindex_flow
from skillindex.query import report as report_flow
from skillindex.query import verify as verify_flow
from skillindex.query.admin import context_files, database_grants, migrate_database
from skillindex.query.catalog import SEARCH_COMMAND, Catalog
from skillindex.query.contextfiles import find_context_files
from skillindex.query.feeds import FEED_PROBLEM, FeedUpdate
from skillindex.query.library import Library
from skillindex.query.lock import LockEntries
from skillindex.query.lockfile import LockDrift, LockEntry
from skillindex.query.reader import Here
from skillindex.query.report import Report
from skillindex.query.resolve import Collision, Explanation, Resolution, Winner
from skillindex.query.search import SearchHit
from skillindex.store import migrate
from skillindex.store.engine import make_engine
from skillindex.store.feeds import StoredFeed
from skillindex.store.feeds import stored as stored_feeds
from skillindex.store.lock import OnWait

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from skillindex.query.wellknown import Published

__all__ = ["SkillIndex", "context_files", "database_grants", "migrate_database"]


class SkillIndex:
    """A catalog of skills for one configuration and working directory."""

    def __init__(self, settings: Settings, env: Environment, engine: Engine, url: str) -> None:
        self.settings = settings
        self.env = env
        self.engine = engine
        self.url = url
        self._plan: RootPlan | None = None
        self._where: Here | None = None
        self._store = Library(engine, settings.index_name,
                              audit_lock_timeout=settings.audit_lock_timeout)

    @classmethod
    def open(cls, config: Settings | str | Path | None = None, *, db: str | None = None,
             cwd: str | Path | None = None, env: Environment | None = None,
             index: str | None = None, create: bool = True) -> SkillIndex:
        """Load settings, open (creating and migrating if needed) the database.

        With `create=False` a SQLite file that does not exist is an IndexMissingError instead
        of a new, empty index: what a command that only reads wants for a mistyped path.
        """
        env = environment(env, cwd)
        settings = config if isinstance(config, Settings) else load_settings(config, env)
        if index is not None:
            settings = replace(settings, index_name=check_index_name(index))
        url = database_url(db, env)
        engine = make_engine(url, create=create)
        try:
            migrate.ensure_current(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(settings, env, engine, url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def index_name(self) -> str:
        return self.settings.index_name

    @property
    def plan(self) -> RootPlan:
        """The roots that apply to this working directory (a few stats, no scan)."""
        if self._plan is None:
            self._plan = plan_roots(self.settings, self.env)
        return self._plan

    def replan(self) -> RootPlan:
        """Plan the roots again, for a host that runs long: a root created since, or a
        plugin installed since, is then one of them."""
        self._plan = self._where = None
        return self.plan

    @property
    def _here(self) -> Here:
        """What the use cases are given of this directory: the settings and `plan`'s roots."""
        if self._where is None:
            self._where = Here.of(self.settings, self.plan.roots)
        return self._where

    def reindex(self, *, all_roots: bool = False, paths: Iterable[str | Path] | None = None,
                progress: Progress | None = None, wait: bool = True,
                timeout: float | None = None, on_wait: OnWait | None = None,
                jobs: int | None = None, offline: bool = False) -> IndexReport:
        """Rescan the roots of this working directory (every known root with `all_roots`).

        A rescan of whole roots first fetches what changed at each URL root's publisher
        (verified against its digests; the last good copy stays on any failure), unless
        `offline`; nothing else in the library goes to the network.

        With `paths` (files or directories that changed), only the skill directories holding
        them are scanned again, in the same one-transaction way; a path that is a root, lies
        above one, or belongs to a root never indexed rescans that whole root, and a path under
        no root changes nothing.

        Skills the index does not know yet are read, hashed and parsed by `jobs` worker
        processes (default: one per core) when a root holds enough of them; the writes stay
        in this process, in one transaction.

        One reindex of an index runs at a time, across every host sharing the database: while
        another holds the index's lock this one waits (`on_wait(holder)` is told once) up to
        `timeout` seconds (default: the `reindex_timeout` setting); with `wait=False`, or when
        the time is up, ReindexBusyError names the holder.
        """
        report = reindex_flow.reindex(self._store, self._here, self.plan.problems,
                                      cwd=self.env.cwd, all_roots=all_roots, paths=paths,
                                      progress=progress, wait=wait, timeout=timeout,
                                      on_wait=on_wait, jobs=jobs, offline=offline)
        if not self.settings.advisories:
            return report
        # Feed files are read again with every reindex (URLs only by update_advisories); one
        # that fails is a problem of the run, and the feed in force stays.
        failed = [ScanProblem(Path(item.source), Path(item.source), FEED_PROBLEM,
                              item.error or "") for item in self.update_advisories(fetch=False)
                  if item.status == feeds_flow.FAILED]
        return replace(report, problems=(*report.problems, *failed)) if failed else report

    def iter_winners(self, *, findings: bool = True) -> Iterator[Winner]:
        """The winners in catalog order, read a page at a time from the stored resolution."""
        return listing.iter_winners(self._store, self._here, findings=findings)

    def argument_hints(self) -> dict[int, str]:
        """The `argument-hint` of each winner that declares one, by candidate id."""
        return listing.argument_hints(self._store, self._here)

    def signers(self) -> dict[int, str]:
        """The signer of each winner whose `skill.oms.sig` was verified, by candidate id."""
        return listing.signers(self._store, self._here)

    def collisions(self) -> list[Collision]:
        """Every name more than one file of this directory's roots declares."""
        return listing.collisions(self._store, self._here)

    def candidates(self, *, code: str | None = None,
                   limit: int | None = None) -> list[Candidate]:
        """Every candidate of the roots that apply here, valid or not, in precedence order;
        with `code`, those with a finding of that code; with `limit`, the first so many."""
        return list(self.iter_candidates(code=code, limit=limit))

    def signatures(self, candidates: Sequence[Candidate]) -> dict[int, Signature | None]:
        """The `skill.oms.sig` of each of these candidates as verified at index time, by
        candidate id (None: it holds none, or its root judges no signatures)."""
        stored = self._store.signatures([c.id for c in candidates])
        return {c.id: Signature.from_json(stored.get(c.id)) for c in candidates}

    def rejections(self, *, code: str | None = None,
                   limit: int | None = None) -> list[Candidate]:
        """The rejected candidates, filtered as `candidates`."""
        return list(self.iter_candidates(status=Status.REJECTED, code=code, limit=limit))

    def count(self, *, rejected: bool = False) -> int:
        """How many candidates (rejected ones with `rejected`) the roots here hold."""
        return listing.count(self._store, self._here, rejected=rejected)

    def finding_counts(self, *, rejected: bool = False) -> list[FindingCount]:
        """How many candidates carry each finding code, the most common first; with
        `rejected`, only the errors that rejected candidates (the reasons)."""
        return listing.finding_counts(self._store, self._here, rejected=rejected)

    def stale_roots(self) -> list[Path]:
        """Roots of this directory whose skills the index may not show: never indexed, or
        changed (a skill folder added or removed) since their last scan. A stat per root."""
        return listing.stale_roots(self._store, self._here)

    def staleness(self) -> str | None:
        """Why the index may show fewer skills than the folders hold, in words; None if no
        reason is known: skills switched off, roots never indexed or changed since."""
        return listing.staleness_note(self._store, self._here)

    def iter_candidates(self, *, status: Status | None = None, code: str | None = None,
                        limit: int | None = None, page: int = 2_000) -> Iterator[Candidate]:
        """The candidates of the roots that apply here in precedence order (filtered as
        `candidates`), read a page at a time (root by root, each in path order), so memory
        stays flat."""
        return listing.iter_candidates(self._store, self._here, status=status, code=code,
                                       limit=limit, page=page)

    def origin(self, candidate: Candidate) -> dict[str, str | None] | None:
        """For a candidate of a URL root: the artifact's URL and digest it was fetched and
        verified from, and why that copy is stale if it is; None for a local candidate."""
        return listing.origin(self._here, candidate)

    def roots(self) -> list[RootState]:
        return listing.roots(self._store, self._here)

    def resolution(self, *, all_findings: bool = True) -> Resolution:
        """Every candidate of this directory judged by the filters and the collision policy.

        `all_findings=False` skips loading the warnings of accepted candidates, which no
        outcome depends on.
        """
        return listing.resolution(self._store, self._here, all_findings=all_findings)

    def winners(self) -> list[Winner]:
        """The skills the catalog is built from, in precedence order, under their catalog names."""
        return list(self.iter_winners())

    def winner(self, name: str) -> Winner:
        """The candidate `name` (a catalog name) stands for; SkillNotFoundError when none,
        QuarantinedError when risk_policy = quarantine holds it back."""
        return lookup.winner(self._store, self._here, name)

    def trust(self, name: str, *, note: str | None = None) -> Approval:
        """Approve the skill `name` as its content is now; any later change revokes it."""
        return approve.approve(self._store, self._here, name, note=note, now=datetime.now(UTC))

    def risks(self, *, code: str | None = None) -> list[RiskFinding]:
        """The risk findings of the skills of this directory's roots, by skill and file."""
        return listing.risks(self._store, self._here, code=code)

    def manifest(self, name: str) -> SkillManifest:
        """A catalog skill's stored frontmatter and file manifest; no file is read."""
        return listing.manifest(self._store, self._here, name)

    def explain(self, name: str) -> Explanation:
        """Every candidate for `name` with its outcome and the reason; NotFound when none."""
        return explain.explain(self._store, self._here, name)

    def search(self, query: str, *, limit: int = 10) -> list[SearchHit]:
        """The winners of this directory that match `query`, best first (at most `limit`).

        Any text may be given: its words are looked up, never parsed as query syntax; a text
        without a letter or digit raises SearchQueryError.
        """
        return find.search_hits(self._store, self._here, query, limit=limit)

    def catalog(self, *, max_chars: int | None = None, context_window: int | None = None,
                format: str = "xml", tools: Iterable[str] = ("read",),
                session: str | None = None, query: str | None = None,
                search_hint: str | None = SEARCH_COMMAND,
                files: Sequence[str] | None = None) -> Catalog:
        """The level-1 catalog for the model, within the budget, from the store alone.

        With a `query`, the skills most relevant to it come first and keep their descriptions
        (`ranked_by` "query"); without, the `catalog_order` setting orders them. Pinned skills
        come first, manual-only ones are left out (see `[skills.catalog]`). The result is
        cached in the store per roots, settings and request until the next reindex (or, in
        usage order, the next load), so a host asking again pays one lookup. With a `session`,
        the publication is audited as a `catalog.published` event at level 1 with the size of
        the text in bytes. A catalog that leaves skills out ends with a line saying how many and
        that `search_hint` (what the model can search with) finds them, unless it is None or
        the `catalog_search_hint` setting is off. With `files` (paths, relative to cwd or
        absolute), a skill whose `paths` or `globs` match none of them is left out; without,
        every one is listed.
        """
        request = quick.request(max_chars=max_chars, context_window=context_window,
                                format=format, tools=tools, query=query,
                                search_hint=search_hint,
                                files=None if files is None else files_in_play(
                                    files, self.env.cwd, project_top(self.env)))
        return publish_flow.catalog(self._store, self._here, request, session=session,
                                    now=datetime.now(UTC))

    def context_files(self) -> list[ContextFile]:
        """The `context_files` found in cwd and its ancestors (looked up now, not indexed)."""
        return find_context_files(context_dirs(self.env), self.settings.context_files)

    def manifests(self, winners: Sequence[Winner]) -> list[SkillManifest]:
        """The stored manifests of these winners, in one pass; no file is read.

        Unlike `manifest`, the frontmatter is exactly what the file declared (empty when it
        could not be parsed): no name or description is filled in.
        """
        return listing.manifests(self._store, winners)

    def publish_wellknown(self, directory: str | Path) -> tuple[Path, list[Published]]:
        """Write the catalog's winners under `directory`/.well-known/agent-skills as a static
        discovery index (v0.2.0), each skill's bytes checked against the index first; the
        index file written and what became of each skill."""
        from skillindex.query import wellknown  # noqa: PLC0415 (publish's alone)

        return wellknown.publish(self.manifests(self.winners()), Path(directory))

    def iter_stored_skills(self, *, page: int = 500) -> Iterator[StoredSkill]:
        """Every winner's stored frontmatter and files, in catalog order: what a server
        publishes. Read from the stored resolution `page` winners at a time, each page in a
        transaction of its own, so a caller may take the first skills now and the rest later
        (from another thread); no Candidate is built, no file read. The frontmatter is raw, as
        `manifests` gives it. Should a reindex drop the resolution meanwhile, the rest is
        missing: its caller learns of the reindex from `generation`."""
        return listing.iter_stored_skills(self._store, self._here, page=page)

    def generation(self) -> str:
        """A value that changes whenever a reindex commits to one of this directory's roots."""
        return listing.generation(self._store, self._here)

    def ready(self) -> str | None:
        """Why this index could not serve an audited read now (None: it could): the database
        does not answer, or would not take a write (an audit row) at this moment."""
        if not self._store.writable:
            return "the index was opened read-only: no read could be audited"
        try:
            listing.generation(self._store, self._here)
            self._store.probe_write()
        except SkillIndexError as exc:
            return str(exc)
        return None

    def _refuse_unserved(self, uri: str, *, outcome: str, reason: str | None,
                         session: str | None, principal: str | None = None) -> None:
        """Audit a read of `uri` that this package's server refused before asking the index
        (it serves no such URI, or the path is refused): outcome `not-found` or `refused`,
        nothing handed over. Not public: the audit has no way in from outside, and every row
        is a disclosure attempt this library or its server made (on PostgreSQL only the
        server's role may write one with a principal, see store/grants.py)."""
        audit.refuse_unserved(self._store, uri, outcome=outcome, reason=reason, session=session,
                              principal=principal)

    def _append_event(self, record: AuditRecord) -> None:
        """Append one audit row in a transaction of its own (a reindex never holds it up long).

        The store sets its time and links it to the chain of this index.
        """
        self._store.append(record)

    def read(self, uri: str, *, reason: str | None = None, session: str | None = None,
             max_bytes: int | None = None) -> Disclosure:
        """`skill://<name>` (the body, level 2) or `skill://<name>/<path>` (a file, level 3).

        The bytes are read once, checked against the index and audited; a file of exactly
        `max_bytes` bytes is returned, a larger one refused.
        """
        return read_flow.read(self._store, self._here, uri, reason=reason, session=session,
                              max_bytes=max_bytes)

    def read_stored(self, uri: str, ref: disclose.SkillRef, resolution: str | None, *,
                    reason: str | None = None, session: str | None = None,
                    principal: str | None = None) -> Disclosure:
        """`read` of a file of a winner of a stored resolution (what a server published, see
        `iter_stored_skills`): its candidate and the file's manifest row come from one statement,
        and the bytes are verified and the attempt audited exactly as `read` does, under the
        principal the server authenticated. When a reindex has dropped that resolution since
        (or there was none), the URI is resolved again, as `read` resolves it."""
        return read_flow.read_published(self._store, self._here, uri, ref, resolution,
                                        reason=reason, session=session, principal=principal)

    def skill_command(self, name: str, args: str | Sequence[str] | None = None, *,
                      session: str | None = None, reason: str | None = None) -> SkillCommand:
        """The message `/skill:<name> [args]` sends: the verified body, its path, the arguments."""
        return command_flow.command(self._store, self._here, name, args, session=session,
                                    reason=reason)

    def verify(self, *, progress: Progress | None = None,
               jobs: int | None = None) -> VerifyReport:
        """Hash every indexed file of this directory's roots again and report any drift.

        Candidates and their manifests are read a page at a time: memory stays flat however
        many skills the roots hold. `progress(done, None, root)` is told after each page.
        Past a page (1,000 skills), `jobs` worker processes hash them (default: one per
        core; 1: none); the report is the same at any `jobs`."""
        return verify_flow.verify(self._store, self._here, self.settings.limits,
                                  cwd=self.env.cwd, progress=progress, jobs=jobs)

    def last_verify(self) -> VerifyRecord | None:
        """What the last `verify` of this directory's roots found, as recorded; None if none."""
        return report_flow.last_verify(self._store, self._here)

    def approvals(self) -> list[StoredApproval]:
        """Every `trust` approval of this index, by name."""
        return report_flow.approvals(self._store)

    def update_advisories(self, *, fetch: bool = True) -> list[FeedUpdate]:
        """Read every advisory feed the settings name into the store: files, and with `fetch`
        URLs (ETag / If-None-Match). A feed that fails leaves the one in force; what it
        revokes is withheld by every query from the moment it is stored."""
        return feeds_flow.update(self._store, self._here,
                                 fetch=feeds_flow.http_fetch if fetch else None)

    def advisory_feeds(self) -> list[StoredFeed]:
        """The feeds the settings name, as stored: the advisories in force, the last error."""
        with self._store.session() as session:
            return stored_feeds(session, self.settings.index_name, self.settings.advisories)

    def quarantined(self) -> list[HeldSkill]:
        """The skills risk_policy = quarantine withholds here until approved."""
        return report_flow.quarantined(self._store, self._here)

    def lock(self, previous: Mapping[str, LockEntry] | None = None) -> LockEntries:
        """Lock entries (`skills-lock.json`) for the catalog's winners, each folder hashed now.

        A skill already in `previous` keeps its `source` and `sourceType` there. A skill whose
        folder cannot be hashed is left out and named in `.unhashed`, with the reason.
        """
        return lock.lock(self._store, self._here, previous or {}, cwd=self.env.cwd)

    def verify_lock(self, path: str | Path) -> list[LockDrift]:
        """The catalog's winners against a lock file: skills added, removed or changed (each
        folder hashed and compared as it comes, none of the new entries kept)."""
        return lock.verify_lock(self._store, self._here, Path(path), cwd=self.env.cwd)

    @overload
    def audit(self, *, session: str | None = None, skill: str | None = None,
              outcome: str | None = None, since: datetime | str | None = None,
              levels: Literal[False] = False) -> AuditListing: ...

    @overload
    def audit(self, *, session: str | None = None, skill: str | None = None,
              outcome: str | None = None, since: datetime | str | None = None,
              levels: Literal[True]) -> list[SessionLevels]: ...

    def audit(self, *, session: str | None = None, skill: str | None = None,
              outcome: str | None = None, since: datetime | str | None = None,
              levels: bool = False) -> AuditListing | list[SessionLevels]:
        """Audit rows, oldest first; with `levels`, bytes per disclosure level for each session."""
        return audit.rows(self._store, self._here, session=session, skill=skill,
                          outcome=outcome, since=since, levels=levels)

    def usage(self, *, since: datetime | str | None = None, session: str | None = None,
              skill: str | None = None, principal: str | None = None) -> UsageReport:
        """Loads and failed attempts per skill since `since` (an ISO time or a duration such
        as `30d`; default 30 days), the catalog skills nobody loaded (`usage_view`), and what
        each principal of `serve --http` did."""
        return usage.usage(self._store, self._here, since=since, session=session, skill=skill,
                           principal=principal, now=datetime.now(UTC))

    def failed_attempts(self, *, since: datetime | str | None = None,
                        limit: int = 100) -> list[LoggedEvent]:
        """The latest `limit` refused, mismatched, missing, not-found or failed skill loads
        since `since` (as `usage` reads it), newest first."""
        return usage.failed_attempts(self._store, self._here, since=since, limit=limit,
                                     now=datetime.now(UTC))

    def report(self, *, since: datetime | str | None = None, verify: bool = False) -> Report:
        """Everything a reviewer looks at, gathered for `report --html`: roots, collisions,
        rejections, risks, trust, usage, refusals, the last verify (run now with `verify`)
        and the audit chain."""
        return report_flow.gather(self._store, self._here, since=since, verify=verify,
                                  limits=self.settings.limits, cwd=self.env.cwd)

    def audit_after(self, after: int, *, limit: int = follow.PAGE, session: str | None = None,
                    skill: str | None = None, outcome: str | None = None) -> LoggedListing:
        """Up to `limit` events appended after the event `after` (an id), oldest first; the
        ids of rows that do not parse are its `skipped`."""
        return follow.events_after(self._store, after, limit=limit, session=session,
                                   skill=skill, outcome=outcome)

    def follow_audit(self, *, after: int | None = None, since: datetime | str | None = None,
                     interval: float = follow.INTERVAL, session: str | None = None,
                     skill: str | None = None, outcome: str | None = None,
                     stop: Callable[[], bool] = lambda: False,
                     skipped: Callable[[int], None] = lambda _id: None) -> Iterator[LoggedEvent]:
        """The events appended from now on (after the event `after`, or from `since`), as
        they come, each look at the log in a transaction of its own; until `stop()`. The id
        of a row that does not parse goes to `skipped`, and the stream goes on."""
        return follow.follow_audit(self._store, after=after, since=since, interval=interval,
                                   session=session, skill=skill, outcome=outcome, stop=stop,
                                   skipped=skipped)

    def last_event_id(self, *, before: datetime | str | None = None) -> int:
        """The id of this index's newest event (0 for none); with `before`, of the newest
        event before that time: where a stream from then on starts."""
        return follow.last_event_id(self._store, before=before)

    def verify_audit(self, *, head: str | None = None) -> ChainReport:
        """Recompute this index's audit chain from its first event.

        `report.head` is the hash of the newest event: publish it elsewhere to pin the history;
        a later call with `head=` that hash reports whether the chain still holds it
        (`report.ok` is False when a row is broken or the pinned hash is gone).
        """
        return self._store.verify_chain(head=head)
