"""Serves a catalog that is already cached without importing SQLAlchemy (the host's start-up)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from skillindex.config import Environment, Settings, database_url, load_settings
from skillindex.errors import SearchQueryError
from skillindex.model import RootSpec
from skillindex.providers import plan_roots
from skillindex.query.catalog import FORMATS, Catalog, budget
from skillindex.query.resolve import Rules
from skillindex.query.search import terms
from skillindex.store.fastpath import cached_payload, sqlite_file

# Part of every cached catalog's key: bump it when rendering or resolution changes.
CATALOG_VERSION = 2


def catalog_key(*, limit: int, fmt: str, has_read: bool, runs: Sequence[tuple[str, int]],
                roots: Sequence[RootSpec], settings: Settings, words: Sequence[str] | None,
                usage: tuple[str, int] | None) -> str:
    """What a cached catalog depends on: request (budget, format, read tool, the search's
    words), roots and their last runs, the policy, the catalog modes and order, and for a
    usage order the window's start and the newest audit row."""
    text = repr((CATALOG_VERSION, limit, fmt, has_read, list(runs), tuple(roots),
                 Rules.from_settings(settings), settings.catalog, settings.catalog_order,
                 None if words is None else tuple(words), usage))
    return hashlib.sha256(text.encode()).hexdigest()


def usage_since(days: int, now: datetime) -> datetime:
    """The start of a usage window: midnight UTC `days` days back, so that a cached
    usage-ordered catalog stays valid for the rest of the day."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=days)


def cached_catalog(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                   index: str | None, max_chars: int | None, context_window: int | None,
                   format: str, tools: Iterable[str], query: str | None = None) -> Catalog | None:
    """The catalog `SkillIndex.catalog` would return, when a SQLite index has it cached (a
    usage-ordered catalog depends on the audit table and always takes the full path)."""
    env = Environment.from_os(cwd=cwd)
    path = sqlite_file(database_url(db, env))
    if path is None or format not in FORMATS:
        return None
    try:
        limit = budget(max_chars, context_window)
    except ValueError:
        return None  # the full path reports it
    try:
        words = None if query is None else terms(query)
    except SearchQueryError:
        return None  # the full path reports it
    settings = load_settings(config, env)
    if index is not None:
        settings = replace(settings, index_name=index)
    if words is None and settings.catalog_order != "precedence":
        return None
    roots = plan_roots(settings, env).roots
    has_read = "read" in set(tools)

    def key_of(runs: list[tuple[str, int]]) -> str:
        return catalog_key(limit=limit, fmt=format, has_read=has_read, runs=runs, roots=roots,
                           settings=settings, words=words, usage=None)

    payload = cached_payload(path, settings.index_name, [str(r.path) for r in roots], key_of)
    return None if payload is None else Catalog.from_cache(payload)
