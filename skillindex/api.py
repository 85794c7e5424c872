"""SkillIndex, the library entry point: opens the store for a configuration, owns sessions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Self

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from skillindex import indexer
from skillindex.config import (
    Environment,
    Settings,
    check_index_name,
    database_url,
    load_settings,
)
from skillindex.errors import StoreError
from skillindex.indexer import Progress
from skillindex.model import Candidate, IndexReport, RootState, Status
from skillindex.providers import RootPlan, plan_roots
from skillindex.store import migrate, queries
from skillindex.store.engine import make_engine
from skillindex.store.lock import OnWait, reindex_lock


class SkillIndex:
    """A catalog of skills for one configuration and working directory."""

    def __init__(self, settings: Settings, env: Environment, engine: Engine, url: str) -> None:
        self.settings = settings
        self.env = env
        self.engine = engine
        self.url = url
        self._plan: RootPlan | None = None

    @classmethod
    def open(cls, config: Settings | str | Path | None = None, *, db: str | None = None,
             cwd: str | Path | None = None, env: Environment | None = None,
             index: str | None = None) -> SkillIndex:
        """Load settings, open (creating and migrating if needed) the database."""
        env = _environment(env, cwd)
        settings = config if isinstance(config, Settings) else load_settings(config, env)
        if index is not None:
            settings = replace(settings, index_name=check_index_name(index))
        url = database_url(db, env)
        engine = make_engine(url)
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

    def _root_paths(self) -> list[str]:
        return [str(spec.path) for spec in self.plan.roots]

    def _session(self) -> Session:
        return Session(self.engine)

    def reindex(self, *, all_roots: bool = False, progress: Progress | None = None,
                wait: bool = True, timeout: float | None = None,
                on_wait: OnWait | None = None) -> IndexReport:
        """Rescan the roots of this working directory (every known root with `all_roots`).

        One reindex of an index runs at a time, across every host sharing the database: while
        another holds the index's lock this one waits (`on_wait(holder)` is told once) up to
        `timeout` seconds (default: the `reindex_timeout` setting); with `wait=False`, or when
        the time is up, ReindexBusyError names the holder.
        """
        limit = self.settings.reindex_timeout if timeout is None else timeout
        try:
            with reindex_lock(self.engine, self.index_name, wait=wait, timeout=limit,
                              on_wait=on_wait) as lock:
                roots = list(self.plan.roots)
                if all_roots:
                    planned = {spec.path for spec in roots}
                    with self._session() as session:
                        stored = queries.stored_roots(session, self.index_name)
                    roots.extend(spec for spec in stored if spec.path not in planned)
                return indexer.reindex(self.engine, roots, index_name=self.index_name,
                                       cwd=self.env.cwd, all_roots=all_roots,
                                       extra_problems=self.plan.problems, progress=progress,
                                       lock=lock)
        except OperationalError as exc:
            raise StoreError(f"cannot write the index: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write the index: {exc}") from exc

    def candidates(self) -> list[Candidate]:
        """Every candidate of the roots that apply here, valid or not, in precedence order."""
        with self._session() as session:
            return queries.candidates(session, self.index_name, self._root_paths())

    def rejections(self) -> list[Candidate]:
        with self._session() as session:
            return queries.candidates(session, self.index_name, self._root_paths(),
                                      status=Status.REJECTED)

    def roots(self) -> list[RootState]:
        with self._session() as session:
            return queries.root_states(session, self.index_name, self.plan.roots)


def _environment(env: Environment | None, cwd: str | Path | None) -> Environment:
    if env is None:
        return Environment.from_os(cwd=cwd)
    return env if cwd is None else replace(env, cwd=Path(cwd).absolute())


def migrate_database(action: str, revision: str | None = None, *, db: str | None = None,
                     cwd: str | Path | None = None, env: Environment | None = None) -> str | None:
    """`upgrade` (to `revision`, default head), `downgrade` (to `revision`) or `current`."""
    engine = make_engine(database_url(db, _environment(env, cwd)))
    try:
        if action == "upgrade":
            migrate.upgrade(engine, revision or "head")
        elif action == "downgrade":
            migrate.downgrade(engine, revision or "-1")
        elif action != "current":
            raise ValueError(f"unknown migration action {action!r}")
        return migrate.current(engine)
    finally:
        engine.dispose()
