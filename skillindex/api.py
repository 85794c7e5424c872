"""SkillIndex, the library entry point: opens the store for a configuration, owns sessions."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, overload

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from skillindex.config import (
    Environment,
    Settings,
    check_index_name,
    database_url,
    load_settings,
)
from skillindex.errors import (
    ConfigError,
    SkillNotFoundError,
    StoreError,
)
from skillindex.index import indexer, parallel, risk
from skillindex.index.indexer import Progress
from skillindex.model import (
    AUDIT_OUTCOMES,
    Approval,
    AuditListing,
    AuditRecord,
    Candidate,
    ChainReport,
    ContextFile,
    Disclosure,
    DriftItem,
    FindingCount,
    IndexReport,
    Level,
    Listing,
    RiskFinding,
    RiskPolicy,
    RootState,
    SessionLevels,
    SkillCommand,
    SkillManifest,
    Status,
    StoredSkill,
    VerifyReport,
)
from skillindex.providers import RootPlan, context_dirs, plan_roots
from skillindex.query import command as command_flow
from skillindex.query import (
    disclose,
    lockfile,
    lookup,
    modes,
    resolve,
    search,
    staleness,
    trust,
    winners,
)
from skillindex.query import read as read_flow
from skillindex.query.catalog import (
    FORMATS,
    Catalog,
    CatalogItem,
    build_ranked,
    describable,
    with_omitted,
)
from skillindex.query.catalog import Format as CatalogFormat
from skillindex.query.catalog import budget as catalog_budget
from skillindex.query.catalog import build as build_catalog
from skillindex.query.catalog import empty as empty_catalog
from skillindex.query.contextfiles import find_context_files
from skillindex.query.library import Library
from skillindex.query.lockfile import LockDrift, LockEntry
from skillindex.query.quick import catalog_key, usage_since
from skillindex.query.reader import Here
from skillindex.query.resolve import Explanation, Resolution, Winner
from skillindex.query.search import SearchHit
from skillindex.store import audit, grants, migrate, queries, resolved, served
from skillindex.store import search as store_search
from skillindex.store import usage as store_usage
from skillindex.store.chain import since_of
from skillindex.store.engine import IMMEDIATE, make_engine, store_error
from skillindex.store.fts import Ranked
from skillindex.store.lock import OnWait, reindex_lock
from skillindex.text import shown_name

CATALOG_PUBLISHED = "catalog.published"


class SkillIndex:
    """A catalog of skills for one configuration and working directory."""

    def __init__(self, settings: Settings, env: Environment, engine: Engine, url: str) -> None:
        self.settings = settings
        self.env = env
        self.engine = engine
        self.url = url
        self._plan: RootPlan | None = None
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
        env = _environment(env, cwd)
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

    @property
    def _here(self) -> Here:
        return Here.of(self.settings, self.plan.roots)

    def _root_paths(self) -> list[str]:
        return [str(spec.path) for spec in self.plan.roots]

    @contextmanager
    def _session(self, doing: str = "read the index") -> Iterator[Session]:
        """A session whose database errors reach the caller as one StoreError line."""
        try:
            with Session(self.engine) as session:
                yield session
        except SQLAlchemyError as exc:
            raise store_error(exc, doing, url=self.engine.url) from exc

    def reindex(self, *, all_roots: bool = False, paths: Iterable[str | Path] | None = None,
                progress: Progress | None = None, wait: bool = True,
                timeout: float | None = None, on_wait: OnWait | None = None,
                jobs: int | None = None) -> IndexReport:
        """Rescan the roots of this working directory (every known root with `all_roots`).

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
        limit = self.settings.reindex_timeout if timeout is None else timeout
        try:
            with reindex_lock(self.engine, self.index_name, wait=wait, timeout=limit,
                              on_wait=on_wait) as lock:
                previous = self._stored_key()
                roots = list(self.plan.roots)
                targets = None
                if all_roots or paths is not None:
                    with self._session() as session:
                        stored = queries.stored_roots(session, self.index_name)
                    if all_roots:
                        planned = {spec.path for spec in roots}
                        roots.extend(spec for spec in stored if spec.path not in planned)
                    if paths is not None:
                        targets = indexer.targets_of(paths, roots,
                                                     {str(spec.path) for spec in stored})
                return indexer.reindex(self.engine, roots, index_name=self.index_name,
                                       cwd=self.env.cwd, all_roots=all_roots,
                                       limits=self.settings.limits,
                                       extra_problems=self.plan.problems, progress=progress,
                                       lock=lock,
                                       after_write=functools.partial(self._materialize,
                                                                     previous=previous),
                                       targets=targets,
                                       jobs=parallel.default_jobs() if jobs is None else jobs)
        except SQLAlchemyError as exc:
            raise store_error(exc, "write the index", url=self.engine.url) from exc

    @property
    def _quarantining(self) -> bool:
        """Whether a root here holds risky skills back until approved: then the winners
        depend on approvals as well, and are resolved at each query, not stored."""
        return any(spec.risk_policy is RiskPolicy.QUARANTINE for spec in self.plan.roots)

    def _rules(self) -> resolve.Rules:
        return resolve.Rules.from_settings(self.settings)

    def _stored_key(self) -> str | None:
        """The key this directory's resolution has before a reindex writes (taken under its
        lock, so no other reindex can change it meanwhile); None where a root quarantines,
        since no resolution is stored then."""
        if self._quarantining:
            return None
        with self._session() as session:
            return winners.key(session, self.index_name, self.plan.roots, self._rules())

    def _materialize(self, session: Session, changed: Sequence[str],
                     replaced: Sequence[tuple[int, int]] | None, *,
                     previous: str | None) -> None:
        """In the reindex's write transaction: resolve this directory's roots, so that the
        first listing after the reindex is a lookup. A write that only replaced skills
        without changing what resolution reads of them (an edited description or body)
        carries the stored resolution over instead of resolving every skill again."""
        carried = None
        if previous is not None and replaced is not None:  # none is stored when quarantining
            carried = winners.carry(session, self.index_name, self.plan.roots, self._rules(),
                                    previous, replaced)
        resolved.drop_sets_over(session, self.index_name, changed, keep=carried)
        if self._quarantining:
            return  # what is withheld depends on approvals, which change without a reindex
        if carried is None:
            winners.ensure(session, self.index_name, self.plan.roots, self._rules())


    def _resolution_set(self, session: Session) -> int | None:
        """The id of the stored resolution of this directory's roots, resolving and storing
        it first when there is none; None when it cannot be stored (a read-only database).

        Ends `session`'s transaction when it has to write, so call it before other reads.
        """
        if self._quarantining:
            return None
        rules = self._rules()
        found = winners.lookup(session, self.index_name, self.plan.roots, rules)
        if found is not None:
            return found
        session.rollback()
        try:
            with self.engine.connect() as connection:
                connection.execution_options(**IMMEDIATE)
                with connection.begin(), Session(bind=connection) as writer:
                    winners.ensure(writer, self.index_name, self.plan.roots, rules)
        except IntegrityError:
            pass  # another process stored the same resolution first
        except SQLAlchemyError:
            return None
        return winners.lookup(session, self.index_name, self.plan.roots, rules)

    def iter_winners(self, *, findings: bool = True) -> Iterator[Winner]:
        """The winners in catalog order, read a page at a time from the stored resolution."""
        with self._session() as session:
            set_id = self._resolution_set(session)
            if set_id is None:
                yield from self.resolution(all_findings=findings).winners
                return
            yield from winners.Reader(session, set_id, self.plan.roots).winners(
                findings=findings)

    def collisions(self) -> list[resolve.Collision]:
        """Every name more than one file of this directory's roots declares."""
        with self._session() as session:
            set_id = self._resolution_set(session)
            if set_id is None:
                return list(self.resolution(all_findings=False).collisions)
            return winners.Reader(session, set_id, self.plan.roots).collisions()

    def candidates(self, *, code: str | None = None,
                   limit: int | None = None) -> list[Candidate]:
        """Every candidate of the roots that apply here, valid or not, in precedence order;
        with `code`, those with a finding of that code; with `limit`, the first so many."""
        return list(self.iter_candidates(code=code, limit=limit))

    def rejections(self, *, code: str | None = None,
                   limit: int | None = None) -> list[Candidate]:
        """The rejected candidates, filtered as `candidates`."""
        return list(self.iter_candidates(status=Status.REJECTED, code=code, limit=limit))

    def count(self, *, rejected: bool = False) -> int:
        """How many candidates (rejected ones with `rejected`) the roots here hold."""
        with self._session() as session:
            return queries.candidate_count(session, self.index_name, self._root_paths(),
                                           status=Status.REJECTED if rejected else None)

    def finding_counts(self, *, rejected: bool = False) -> list[FindingCount]:
        """How many candidates carry each finding code, the most common first; with
        `rejected`, only the errors that rejected candidates (the reasons)."""
        with self._session() as session:
            return queries.finding_counts(session, self.index_name, self._root_paths(),
                                          status=Status.REJECTED if rejected else None)

    def stale_roots(self) -> list[Path]:
        """Roots of this directory whose skills the index may not show: never indexed, or
        changed (a skill folder added or removed) since their last scan. A stat per root."""
        with self._session() as session:
            scans = queries.root_scans(session, self.index_name, self._root_paths())
        return staleness.stale_roots(self.plan.roots, scans)

    def staleness(self) -> str | None:
        """Why the index may show fewer skills than the folders hold, in words; None if no
        reason is known: skills switched off, roots never indexed or changed since."""
        return staleness.note(self.settings, self.stale_roots)

    def iter_candidates(self, *, status: Status | None = None, code: str | None = None,
                        limit: int | None = None, page: int = 2_000) -> Iterator[Candidate]:
        """The candidates of the roots that apply here in precedence order (filtered as
        `candidates`), read a page at a time (root by root, each in path order), so memory
        stays flat."""
        _check_limit(limit)
        left = limit
        roots = sorted(self.plan.roots, key=lambda spec: (-spec.precedence, spec.position))
        with self._session() as session:
            for spec in roots:
                after = ""
                while True:
                    found = queries.candidates_page(session, self.index_name, str(spec.path),
                                                    after, page, status=status, code=code)
                    for candidate in found:
                        if left is not None:
                            if left <= 0:
                                return
                            left -= 1
                        yield resolve.rebase(candidate, spec)
                    if len(found) < page:
                        break
                    after = str(found[-1].path)

    def roots(self) -> list[RootState]:
        with self._session() as session:
            return queries.root_states(session, self.index_name, self.plan.roots)

    def resolution(self, *, all_findings: bool = True) -> Resolution:
        """Every candidate of this directory judged by the filters and the collision policy.

        `all_findings=False` skips loading the warnings of accepted candidates, which no
        outcome depends on.
        """
        with self._session() as session:
            found = queries.candidates(session, self.index_name, self._root_paths(),
                                       all_findings=all_findings)
        return lookup.withheld(self._store, self._here, resolve.resolve(
            found, self.plan.roots, resolve.Rules.from_settings(self.settings)))

    def winners(self) -> list[Winner]:
        """The skills the catalog is built from, in precedence order, under their catalog names."""
        return list(self.iter_winners())

    def winner(self, name: str) -> Winner:
        """The candidate `name` (a catalog name) stands for; SkillNotFoundError when none,
        QuarantinedError when risk_policy = quarantine holds it back."""
        return lookup.winner(self._store, self._here, name)

    def trust(self, name: str, *, note: str | None = None) -> Approval:
        """Approve the skill `name` as its content is now; any later change revokes it."""
        resolution = lookup.resolution_of(self._store, self._here, [name], all_findings=False)
        winner = next((w for w in resolution.winners if w.name == name), None)
        if winner is None:
            raise SkillNotFoundError(name)
        with self._session() as session, session.begin():
            files = queries.manifest_files(session, [winner.candidate.id])
            digest = trust.manifest_digest(files.get(winner.candidate.id, ()))
            findings = queries.risk_findings(session, [winner.candidate.id], risk.CODES)
            added = queries.approve(session, self.index_name, name, digest,
                                    at=datetime.now(UTC), note=note)
        return Approval(name=name, digest=digest, path=winner.candidate.path,
                        findings=tuple(findings.get(winner.candidate.id, ())), new=added)

    def risks(self, *, code: str | None = None) -> list[RiskFinding]:
        """The risk findings of the skills of this directory's roots, by skill and file."""
        if code is not None and code not in risk.CODES:
            raise ConfigError(f"unknown risk code {code!r} (use {', '.join(risk.CODES)})")
        with self._session() as session:
            rows = queries.risk_rows(session, self.index_name, self._root_paths(),
                                     (code,) if code else risk.CODES)
        return [RiskFinding(name=name, skill_path=Path(skill_path), code=found_code,
                            path=path, line=line, message=message)
                for name, skill_path, found_code, path, line, message in rows]

    def manifest(self, name: str) -> SkillManifest:
        """A catalog skill's stored frontmatter and file manifest; no file is read."""
        winner = self.winner(name)
        [found] = self.manifests([winner])
        front = dict(found.frontmatter)
        candidate = winner.candidate
        # A name may be absent (it defaults to the directory's); consumers need one to hand.
        front.setdefault("name", candidate.name or candidate.directory.name)
        if candidate.description is not None:
            front.setdefault("description", candidate.description)
        return replace(found, frontmatter=front)

    def explain(self, name: str) -> Explanation:
        """Every candidate for `name` with its outcome and the reason; NotFound when none."""
        here = self._here
        explanation = resolve.explain(lookup.withheld(
            self._store, here, lookup.resolution_of(self._store, here, [name])), name)
        if explanation is None:
            raise SkillNotFoundError(shown_name(name), hint=self.staleness())
        if explanation.winner is None:
            return explanation
        mode = modes.mode_of(explanation.winner, self.settings.catalog)
        return replace(explanation, catalog_mode=(str(mode.mode), mode.reason))

    def search(self, query: str, *, limit: int = 10) -> list[SearchHit]:
        """The winners of this directory that match `query`, best first (at most `limit`).

        Any text may be given: its words are looked up, never parsed as query syntax; a text
        without a letter or digit raises SearchQueryError.
        """
        if limit < 1:
            raise ConfigError(f"limit must be 1 or more, not {limit}")
        words = search.terms(query)
        rules = resolve.Rules.from_settings(self.settings)
        wanted = limit * 2 + 8  # room for matches that resolution sets aside
        with self._session() as session:
            while True:
                ranked = self._matches(session, words, depth=wanted)
                matches = ranked.matches
                # Only the candidates sharing a matched name can bear on whether it wins.
                found = queries.candidates(session, self.index_name, self._root_paths(),
                                           names=sorted({m.name for m in matches}),
                                           all_findings=False)
                # Held back by risk_policy = quarantine as the catalog and read hold them.
                hits = search.winning_hits(
                    matches, lookup.withheld(self._store, self._here,
                                             resolve.resolve(found, self.plan.roots, rules)))
                if len(hits) >= limit or ranked.complete:
                    return hits[:limit]
                wanted *= 4

    def _matches(self, session: Session, words: Sequence[str], *,
                 depth: int | None) -> Ranked:
        try:
            return store_search.matches(session, self.index_name, self._root_paths(), words,
                                        depth=depth)
        except SQLAlchemyError as exc:
            raise store_error(exc, "search the index", url=self.engine.url) from exc

    def catalog(self, *, max_chars: int | None = None, context_window: int | None = None,
                format: str = "xml", tools: Iterable[str] = ("read",),
                session: str | None = None, query: str | None = None) -> Catalog:
        """The level-1 catalog for the model, within the budget, from the store alone.

        With a `query`, the skills most relevant to it come first and keep their descriptions
        (`ranked_by` "query"); without, the `catalog_order` setting orders them. Pinned skills
        come first, manual-only ones are left out (see `[skills.catalog]`). The result is
        cached in the store per roots, settings and request until the next reindex (or, in
        usage order, the next load), so a host asking again pays one lookup. With a `session`,
        the publication is audited as a `catalog.published` event at level 1 with the size of
        the text in bytes.
        """
        result = self._catalog(max_chars=max_chars, context_window=context_window,
                               format=format, tools=tools, query=query)
        if session is not None:
            text = result.text.encode("utf-8")
            self._append_event(AuditRecord(
                event=CATALOG_PUBLISHED, level=Level.CATALOG,
                outcome="ok", bytes=len(text), digest=hashlib.sha256(text).hexdigest(),
                reason=f"{len(result.entries)} skills, {len(result.omitted)} omitted",
                session=session))
        return result

    def _catalog(self, *, max_chars: int | None, context_window: int | None, format: str,
                 tools: Iterable[str], query: str | None) -> Catalog:
        if format not in FORMATS:
            raise ConfigError(f"unknown catalog format {format!r} (use {', '.join(FORMATS)})")
        try:
            limit = catalog_budget(max_chars, context_window)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        fmt: CatalogFormat = format
        has_read = "read" in set(tools)
        words = None if query is None else search.terms(query)
        since = None
        with self._session() as db:
            usage_mark = None
            if words is None and self.settings.catalog_order == "usage":
                since = usage_since(self.settings.catalog_usage_days, datetime.now(UTC))
                usage_mark = (since.isoformat(), store_usage.last_event(db))
            key = self._catalog_key(db, limit, fmt, has_read, words, usage_mark)
            payload = queries.cached_catalog(db, self.index_name, key)
        if payload is not None:
            return Catalog.from_cache(payload)
        with self._session() as db:
            arranged, texts = self._arranged(db, words, since)
        shown = arranged.listed
        # Descriptions only for what the budget can show them for: a lookup of a few hundred,
        # however many skills there are.
        count = describable(((s.name, s.location) for s in shown), max_chars=limit, fmt=fmt)
        wanted = [s.candidate_id for number, s in enumerate(shown)
                  if number < count or s.mode is modes.Mode.PINNED] if has_read else []
        if texts is None:
            with self._session() as db:
                texts = resolved.descriptions(db, wanted)
        fetched = set(wanted)
        items = [CatalogItem(s.name, texts.get(s.candidate_id, ""), s.location, str(s.mode),
                             None if s.candidate_id in fetched else s.described) for s in shown]
        if not has_read:
            result = empty_catalog(items, max_chars=limit, fmt=fmt, ranked_by=arranged.ranked_by,
                                   reason="the host has no read tool to load skills with")
        elif words is not None:
            result = build_ranked(items, max_chars=limit, fmt=fmt)
        else:
            result = build_catalog(items, max_chars=limit, fmt=fmt, ranked_by=arranged.ranked_by)
        result = with_omitted(result, [name for name, _ in arranged.manual],
                              [reason for _, reason in arranged.manual])
        try:
            with self._session("cache the catalog") as db, db.begin():
                queries.store_catalog(db, self.index_name, key, result.to_cache())
        except StoreError:
            pass  # a read-only database still serves catalogs, just without the cache
        return result

    def _arranged(self, db: Session, words: Sequence[str] | None,
                  since: datetime | None) -> tuple[modes.Arranged, dict[int, str] | None]:
        """The winners in catalog order with their modes, read as they stream from the stored
        resolution; with the descriptions when they had to be resolved here instead."""
        set_id = self._resolution_set(db)  # first: it may end the transaction
        scores = usage = None
        if words is not None:
            scores = {m.candidate_id: m.score
                      for m in self._matches(db, words, depth=None).matches}
        elif since is not None:
            usage = store_usage.load_counts(db, self.index_name, since)
        if set_id is not None:
            listing: Iterable[Listing] = resolved.catalog_listing(db, set_id)
            texts = None
        else:
            winners = self.resolution(all_findings=False).winners
            listing = map(modes.listing_of, winners)
            texts = {w.candidate.id or 0: w.candidate.description or "" for w in winners}
        return modes.arrange(listing, self.settings.catalog, scores=scores, usage=usage), texts

    def _catalog_key(self, db: Session, limit: int, fmt: str, has_read: bool,
                     words: Sequence[str] | None, usage: tuple[str, int] | None) -> str:
        runs = resolved.root_runs(db, self.index_name, self._root_paths())
        return catalog_key(limit=limit, fmt=fmt, has_read=has_read, runs=runs,
                           roots=self.plan.roots, settings=self.settings, words=words,
                           usage=usage)

    def context_files(self) -> list[ContextFile]:
        """The `context_files` found in cwd and its ancestors (looked up now, not indexed)."""
        return find_context_files(context_dirs(self.env), self.settings.context_files)

    def manifests(self, winners: Sequence[Winner]) -> list[SkillManifest]:
        """The stored manifests of these winners, in one pass; no file is read.

        Unlike `manifest`, the frontmatter is exactly what the file declared (empty when it
        could not be parsed): no name or description is filled in.
        """
        ids = [winner.candidate.id for winner in winners]
        with self._session() as session:
            stored = queries.frontmatters(session, ids)
            files = queries.manifest_files(session, ids)
        return [SkillManifest(name=w.name, candidate=w.candidate,
                              frontmatter=_object(stored.get(w.candidate.id)),
                              files=tuple(files.get(w.candidate.id, ()))) for w in winners]

    def iter_stored_skills(self, *, page: int = 500) -> Iterator[StoredSkill]:
        """Every winner's stored frontmatter and files, in catalog order: what a server
        publishes. Read from the stored resolution `page` winners at a time, each page in a
        transaction of its own, so a caller may take the first skills now and the rest later
        (from another thread); no Candidate is built, no file read. The frontmatter is raw, as
        `manifests` gives it. Should a reindex drop the resolution meanwhile, the rest is
        missing: its caller learns of the reindex from `generation`."""
        with self._session() as session:
            set_id = self._resolution_set(session)
            key = None if set_id is None else served.set_key(session, set_id)
        if key is None:
            for found in self.manifests(self.winners()):
                yield StoredSkill(found.name, None, found.frontmatter, found.files)
            return
        after = 0
        while True:
            with self._session() as session:
                rows = served.stored_page(session, self.index_name, key, after, page)
            for _, name, front, files in rows:
                yield StoredSkill(name, key, _object(front), tuple(files))
            if len(rows) < page:
                return
            after = rows[-1][0]

    def generation(self) -> str:
        """A value that changes whenever a reindex commits to one of this directory's roots."""
        with self._session() as session:
            runs = resolved.root_runs(session, self.index_name, self._root_paths())
        return ",".join(f"{run}" for _, run in runs)

    def refuse_unserved(self, uri: str, *, outcome: str, reason: str | None,
                        session: str | None) -> None:
        """Audit a read of `uri` that a server refused before asking the index (it serves no
        such URI, or the path is refused): outcome `not-found` or `refused`, nothing handed
        over. The audit has no other way in from outside: every row is a disclosure attempt
        this library made."""
        if outcome not in ("not-found", "refused"):
            raise ConfigError(f"a refused read is not-found or refused, not {outcome!r}")
        attempt = disclose.Attempt.of_uri(uri)
        self._append_event(attempt.record(outcome=outcome, reason=reason, session=session))

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
                    reason: str | None = None, session: str | None = None) -> Disclosure:
        """`read` of a file of a winner of a stored resolution (what a server published, see
        `iter_stored_skills`): its candidate and the file's manifest row come from one statement,
        and the bytes are verified and the attempt audited exactly as `read` does. When a
        reindex has dropped that resolution since (or there was none), the URI is resolved
        again, as `read` resolves it."""
        return read_flow.read_published(self._store, self._here, uri, ref, resolution,
                                        reason=reason, session=session)

    def skill_command(self, name: str, args: str | Sequence[str] | None = None, *,
                      session: str | None = None, reason: str | None = None) -> SkillCommand:
        """The message `/skill:<name> [args]` sends: the verified body, its path, the arguments."""
        return command_flow.command(self._store, self._here, name, args, session=session,
                                    reason=reason)

    def verify(self) -> VerifyReport:
        """Hash every indexed file of this directory's roots again and report any drift.

        Candidates and their manifests are read a page at a time: memory stays flat however
        many skills the roots hold."""
        skills = files = 0
        drift: list[DriftItem] = []
        page: list[Candidate] = []

        def check() -> None:
            nonlocal skills, files
            with self._session() as session:
                manifests = queries.manifest_files(session, [c.id for c in page])
            part = disclose.verify(page, manifests, self.settings.limits)
            skills, files = skills + part.skills, files + part.files
            drift.extend(part.drift)
            page.clear()

        for candidate in self.iter_candidates():
            page.append(candidate)
            if len(page) >= 1_000:
                check()
        check()
        return VerifyReport(skills=skills, files=files, drift=tuple(drift))

    def lock(self, previous: Mapping[str, LockEntry] | None = None) -> dict[str, LockEntry]:
        """Lock entries (`skills-lock.json`) for the catalog's winners, each folder hashed now.

        A skill already in `previous` keeps its `source` and `sourceType` there.
        """
        return dict(self._lock_entries(previous or {}))

    def _lock_entries(self, previous: Mapping[str, LockEntry]) -> Iterator[tuple[str, LockEntry]]:
        limit = self.settings.max_skill_bytes
        for winner in self.iter_winners(findings=False):
            yield winner.name, lockfile.entry_for(winner.candidate.real_path, cwd=self.env.cwd,
                                                  previous=previous.get(winner.name),
                                                  max_bytes=limit)

    def verify_lock(self, path: str | Path) -> list[LockDrift]:
        """The catalog's winners against a lock file: skills added, removed or changed (each
        folder hashed and compared as it comes, none of the new entries kept)."""
        locked = lockfile.read(Path(path))
        return lockfile.compare(locked, self._lock_entries(locked))

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
        start = since_of(since)
        if outcome is not None and outcome not in AUDIT_OUTCOMES:
            raise ConfigError(f"unknown outcome {outcome!r} (use one of "
                              f"{', '.join(AUDIT_OUTCOMES)})")
        with self._session() as db:
            if levels:
                return queries.session_levels(db, self.index_name, session_id=session,
                                              skill=skill, outcome=outcome, since=start)
            return queries.events(db, self.index_name, session_id=session, skill=skill,
                                  outcome=outcome, since=start)

    def verify_audit(self, *, head: str | None = None) -> ChainReport:
        """Recompute this index's audit chain from its first event.

        `report.head` is the hash of the newest event: publish it elsewhere to pin the history;
        a later call with `head=` that hash reports whether the chain still holds it
        (`report.ok` is False when a row is broken or the pinned hash is gone).
        """
        with self._session("read the audit log") as session:
            return audit.verify(session, self.index_name, head=head)


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ConfigError(f"limit must be 0 or more, not {limit}")


def _environment(env: Environment | None, cwd: str | Path | None) -> Environment:
    if env is None:
        return Environment.from_os(cwd=cwd)
    return env if cwd is None else replace(env, cwd=Path(cwd).absolute())


def _object(text: str | None) -> dict[str, object]:
    value = None if text is None else json.loads(text)
    return value if isinstance(value, dict) else {}


def context_files(config: Settings | str | Path | None = None, *,
                  cwd: str | Path | None = None,
                  env: Environment | None = None) -> tuple[tuple[str, ...], list[ContextFile]]:
    """The names looked for (`context_files`) and the files found in a directory and its
    ancestors: settings only, no database."""
    env = _environment(env, cwd)
    settings = config if isinstance(config, Settings) else load_settings(config, env)
    return settings.context_files, find_context_files(context_dirs(env), settings.context_files)


def migrate_database(action: str, revision: str | None = None, *, db: str | None = None,
                     cwd: str | Path | None = None, env: Environment | None = None,
                     discard_audit: bool = False) -> str | None:
    """`upgrade` (to `revision`, default head), `downgrade` (to `revision`) or `current`.

    A downgrade that would drop audit events (the table, or its chain hashes) raises
    AuditKeptError unless `discard_audit` is set.
    """
    engine = make_engine(database_url(db, _environment(env, cwd)), create=action == "upgrade")
    try:
        if action == "upgrade":
            migrate.upgrade(engine, revision or "head")
        elif action == "downgrade":
            migrate.downgrade(engine, revision or "-1", discard_audit=discard_audit)
        elif action != "current":
            raise ValueError(f"unknown migration action {action!r}")
        return migrate.current(engine)
    finally:
        engine.dispose()


def database_grants(*, db: str | None = None, cwd: str | Path | None = None,
                    env: Environment | None = None, indexer: str = "skillindex_indexer",
                    agent: str = "skillindex_agent", apply: bool = False) -> list[str]:
    """The least-privilege GRANTs of a PostgreSQL index for an indexer and an agent role.

    With `apply`, they are run (as the role that owns the tables, or a superuser) in one
    transaction; otherwise only returned. Neither role owns a table: the agent reads the catalog
    and appends audit events, the indexer also writes the catalog; neither can change or remove
    an audit event, alter the table or disable its triggers.
    """
    url = database_url(db, _environment(env, cwd))
    grants.require_postgresql(url)
    engine = make_engine(url, create=False)
    roles = grants.Roles(indexer=indexer, agent=agent)
    try:
        if apply:
            with engine.begin() as connection:
                return grants.apply(connection, roles)
        with engine.connect() as connection:
            return grants.statements(connection, roles)
    except SQLAlchemyError as exc:
        raise store_error(exc, "grant", url=engine.url) from exc
    finally:
        engine.dispose()
