"""The key of a catalog request and its cached copy: the first step of every catalog
(query/publish.py), and all the sqlite3 fast path does (the host's start-up), without
importing SQLAlchemy."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from skillindex.config import Environment, Settings, database_url, load_settings
from skillindex.errors import ConfigError, SkillIndexError
from skillindex.index.dialect import files_in_play
from skillindex.model import RootSpec
from skillindex.providers import plan_roots, project_top
from skillindex.query.catalog import FORMATS, SEARCH_COMMAND, Catalog, Format, budget
from skillindex.query.reader import Here, RootRuns, Unanswered
from skillindex.query.resolve import Rules
from skillindex.query.search import terms
from skillindex.store.fastpath import cached_payload, sqlite_file

# Part of every cached catalog's key: bump it when rendering or resolution changes.
CATALOG_VERSION = 3


def catalog_key(*, limit: int, fmt: str, has_read: bool, runs: Sequence[tuple[str, int]],
                roots: Sequence[RootSpec], settings: Settings, words: Sequence[str] | None,
                usage: tuple[str, int] | None, hint: str | None,
                files: Sequence[str] | None = None) -> str:
    """What a cached catalog depends on: request (budget, format, read tool, the search's
    words, the search hint, the files in play), roots and their last runs, the policy, the
    catalog modes and order, the host dialects, and for a usage order the window's start and
    the newest audit row."""
    dialects = (settings.catalog_entry_chars,) if settings.dialects else None
    text = repr((CATALOG_VERSION, limit, fmt, has_read, list(runs), tuple(roots),
                 Rules.from_settings(settings), settings.catalog, settings.catalog_order,
                 None if words is None else tuple(words), usage, hint,
                 *(() if files is None and dialects is None else (files, dialects))))
    return hashlib.sha256(text.encode()).hexdigest()


def usage_since(days: int, now: datetime) -> datetime:
    """The start of a usage window: midnight UTC `days` days back, so that a cached
    usage-ordered catalog stays valid for the rest of the day."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=days)


@dataclass(frozen=True, slots=True)
class Request:
    """A catalog request, checked: the budget in characters, the format, whether the host has
    a read tool, the search's words (None: no query) and what the model can search with, which
    a catalog that leaves skills out names in its last line (None: no such line)."""

    limit: int
    fmt: Format
    has_read: bool
    words: tuple[str, ...] | None
    search_hint: str | None = SEARCH_COMMAND
    # The files in play, relative to the project's top (None: none given, every conditional
    # skill is listed).
    files: tuple[str, ...] | None = None

    def hint(self, settings: Settings) -> str | None:
        """The search hint, unless the `catalog_search_hint` setting turns it off."""
        return self.search_hint if settings.catalog_search_hint else None


def request(*, max_chars: int | None, context_window: int | None, format: str,
            tools: Iterable[str], query: str | None,
            search_hint: str | None = SEARCH_COMMAND,
            files: tuple[str, ...] | None = None) -> Request:
    """The request, or ConfigError (format, budget) or SearchQueryError (a query without words)."""
    if format not in FORMATS:
        raise ConfigError(f"unknown catalog format {format!r} (use {', '.join(FORMATS)})")
    try:
        limit = budget(max_chars, context_window)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    fmt: Format = format
    return Request(limit, fmt, "read" in set(tools), None if query is None else terms(query),
                   search_hint, files)


class Cache(Protocol):
    def cached_catalog(self, here: Here, key_of: Callable[[RootRuns, int], str], *,
                       usage: bool) -> tuple[str, str | None]:
        """In one read: the key `key_of` makes of the roots' last runs (and, with `usage`, of
        the newest audit row's id; else 0), and the catalog cached under it, if any."""
        ...


def cached(store: Cache, here: Here, request: Request, *,
           now: datetime) -> tuple[str, datetime | None, Catalog | None]:
    """The key of the catalog this request gets here, the start of its usage window (when it is
    ordered by usage) and the catalog cached under that key, if any."""
    since = None
    if request.words is None and here.settings.catalog_order == "usage":
        since = usage_since(here.settings.catalog_usage_days, now)

    def key_of(runs: RootRuns, last_event: int) -> str:
        usage = None if since is None else (since.isoformat(), last_event)
        return catalog_key(limit=request.limit, fmt=request.fmt, has_read=request.has_read,
                           runs=runs, roots=here.roots, settings=here.settings,
                           words=request.words, usage=usage,
                           hint=request.hint(here.settings), files=request.files)

    key, payload = store.cached_catalog(here, key_of, usage=since is not None)
    return key, since, None if payload is None else Catalog.from_cache(payload)


class _Cache:
    """The catalog cache of a SQLite index, read through sqlite3; a usage-ordered catalog
    depends on the audit table and is left to the library."""

    def __init__(self, path: str, index_name: str) -> None:
        self.path = path
        self.index_name = index_name

    def cached_catalog(self, here: Here, key_of: Callable[[RootRuns, int], str], *,
                       usage: bool) -> tuple[str, str | None]:
        if usage:
            raise Unanswered
        keys: list[str] = []

        def keyed(runs: RootRuns) -> str:
            keys.append(key_of(runs, 0))
            return keys[-1]

        payload = cached_payload(self.path, self.index_name, here.paths, keyed)
        if payload is None:
            raise Unanswered
        return keys[-1], payload


def cached_catalog(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                   index: str | None, max_chars: int | None, context_window: int | None,
                   format: str, tools: Iterable[str], query: str | None = None,
                   search_hint: str | None = SEARCH_COMMAND,
                   files: Sequence[str] | None = None) -> Catalog | None:
    """The catalog `SkillIndex.catalog` would return, when a SQLite index has it cached (a
    usage-ordered catalog depends on the audit table and always takes the full path)."""
    env = Environment.from_os(cwd=cwd)
    path = sqlite_file(database_url(db, env))
    if path is None:
        return None
    try:
        asked = request(max_chars=max_chars, context_window=context_window, format=format,
                        tools=tools, query=query, search_hint=search_hint,
                        files=None if files is None else files_in_play(
                            files, env.cwd, project_top(env)))
    except SkillIndexError:
        return None  # the full path reports it
    settings = load_settings(config, env)
    if index is not None:
        settings = replace(settings, index_name=index)
    here = Here.of(settings, plan_roots(settings, env).roots)
    try:
        _, _, found = cached(_Cache(path, settings.index_name), here, asked, now=datetime.now(UTC))
    except Unanswered:
        return None
    return found
