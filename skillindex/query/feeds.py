"""Bringing advisory feeds into the store: files read, URLs fetched with their ETag; a feed that
cannot be read or parsed leaves the one in force as it was, and says why."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skillindex import inputs
from skillindex.errors import ConfigError
from skillindex.query import advisories
from skillindex.query.reader import Here
from skillindex.store import feeds

if TYPE_CHECKING:
    from skillindex.query.library import Library

FETCH_TIMEOUT_S = 30.0
UPDATED, UNCHANGED, FAILED, SKIPPED = "updated", "unchanged", "error", "skipped"
FEED_PROBLEM = "advisory-feed"  # the code of a feed a reindex could not read


@dataclass(frozen=True, slots=True)
class FeedUpdate:
    """What one feed's update did: its status, the advisories in force after it, the error."""

    source: str
    status: str
    advisories: int
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "status": self.status, "advisories": self.advisories,
                "error": self.error}


@dataclass(frozen=True, slots=True)
class Fetched:
    body: bytes | None  # None: not modified since the ETag given
    etag: str | None


Fetcher = Callable[[str, str | None], Fetched]


def is_url(source: str) -> bool:
    return source.startswith(("https://", "http://"))


def update(store: Library, here: Here, *, fetch: Fetcher | None,
           now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> list[FeedUpdate]:
    """Reads every feed the settings name (URLs only with a `fetch`) into the store, each in
    a transaction of its own."""
    sources = here.settings.advisories
    with store.session() as session:
        stored = {feed.source: feed for feed in feeds.stored(session, here.index_name, sources)}
    results = []
    for source in sources:
        previous = stored.get(source)
        count = len(advisories.loads(previous.advisories)) if previous else 0
        if is_url(source) and fetch is None:
            results.append(FeedUpdate(source, SKIPPED, count, previous.error if previous else None))
            continue
        try:
            if fetch is not None and is_url(source):
                fetched = fetch(source, previous.etag if previous and previous.digest else None)
            else:
                fetched = Fetched(read_file(Path(source)), None)
            if fetched.body is None:
                result = FeedUpdate(source, UNCHANGED, count)
            else:
                digest = hashlib.sha256(fetched.body).hexdigest()
                if previous is not None and previous.digest == digest:
                    result = FeedUpdate(source, UNCHANGED, count)
                else:
                    found = advisories.parse(fetched.body, source=source)
                    with store.transaction("update an advisory feed") as session:
                        feeds.put(session, here.index_name, source,
                                  advisories=advisories.dumps(found), digest=digest,
                                  etag=fetched.etag, now=now())
                    results.append(FeedUpdate(source, UPDATED, len(found)))
                    continue
        except ConfigError as exc:
            result = FeedUpdate(source, FAILED, count, exc.message)
        with store.transaction("record an advisory feed's check") as session:
            feeds.checked(session, here.index_name, source, now=now(), error=result.error)
        results.append(result)
    return results


def read_file(path: Path) -> bytes:
    """A feed file, read by the one bounded reader."""
    try:
        return inputs.read_bytes(path, max_bytes=inputs.MAX_FEED_BYTES, what="advisory feed")
    except FileNotFoundError as exc:
        raise ConfigError("cannot read the advisory feed: no such file",
                          source=str(path)) from exc


def http_fetch(url: str, etag: str | None) -> Fetched:
    """GET `url` with If-None-Match; the body read up to the feed bound. httpx is imported
    here only: no other command loads it."""
    try:
        import httpx  # noqa: PLC0415 - only `advisories update` may load it
    except ImportError as exc:
        raise ConfigError("fetching a feed needs httpx: pip install 'skillindex[advisories]'",
                          source=url) from exc
    headers = {"Accept": "application/json"}
    if etag:
        headers["If-None-Match"] = etag
    try:
        with httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=True) as client, \
                client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304:
                return Fetched(None, etag)
            if response.status_code != 200:
                raise ConfigError(f"the feed answered HTTP {response.status_code}", source=url)
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > advisories.MAX_BYTES:
                    raise ConfigError(f"feed over {advisories.MAX_BYTES} bytes", source=url)
            return Fetched(bytes(body), response.headers.get("ETag"))
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot fetch the feed: {exc}", source=url) from exc
