"""Keeps a URL root's verified copy: fetches the publisher's `.well-known` skills index and
each artifact whose digest changed, checks every byte against its digest before it is kept,
and swaps whole skill folders into the folder the indexer scans; on any failure the last good
copy stays, with the reason recorded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from skillindex import fsio, inputs
from skillindex.config import is_loopback
from skillindex.errors import SkillIndexError
from skillindex.index import archive
from skillindex.model import Limits, RootSpec

if TYPE_CHECKING:
    import httpx

SCHEMA_V02 = "https://schemas.agentskills.io/discovery/0.2.0/schema.json"
INDEX_PATH = "/.well-known/agent-skills/index.json"
LEGACY_INDEX_PATH = "/.well-known/skills/index.json"
MAX_INDEX_BYTES = 8 << 20
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)
STATE_FILE = "state.json"


class FetchError(Exception):
    """One request or artifact that could not be used: the reason, in words."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One skill of a publisher's index, as far as a fetch needs it."""

    name: str
    kind: str  # skill-md or archive
    url: str  # absolute
    digest: str  # sha256 hex of the artifact


@dataclass(slots=True)
class SyncReport:
    """What one sync of a URL root did."""

    url: str
    requests: int = 0
    downloads: int = 0
    bytes: int = 0
    kept: int = 0
    removed: int = 0
    stale: str | None = None  # the whole index could not be used: why
    failed: dict[str, str] = field(default_factory=dict)  # entry name: why its copy is old

    def as_dict(self) -> dict[str, object]:
        return {"url": self.url, "requests": self.requests, "downloads": self.downloads,
                "bytes": self.bytes, "kept": self.kept, "removed": self.removed,
                "stale": self.stale, "failed": dict(sorted(self.failed.items()))}


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    """A URL root's cache as the last sync left it: when it was fresh, and why it is not."""

    url: str
    fetched_at: str | None
    stale_since: str | None
    stale_why: str | None
    entries: dict[str, dict[str, Any]]

    def note(self) -> str | None:
        if self.stale_since is None:
            return None
        return f"stale since {self.stale_since}: {self.stale_why}"

    def entry_note(self, name: str) -> str | None:
        entry = self.entries.get(name) or {}
        stale = entry.get("stale")
        if isinstance(stale, dict):
            return f"stale since {stale.get('since')}: {stale.get('why')}"
        return self.note()

    def provenance(self, name: str) -> dict[str, str] | None:
        entry = self.entries.get(name)
        if not entry or not entry.get("held"):
            return None
        return {"url": str(entry.get("url")), "digest": f"sha256:{entry['held']}"}


def cache_of(spec: RootSpec) -> Path:
    """The folder holding a URL root's state, objects and the scanned `skills/` folder."""
    return spec.path.parent


def status(spec: RootSpec) -> RemoteStatus | None:
    """The recorded state of a URL root; None for a local root or one never synced."""
    if spec.remote is None:
        return None
    state = _load_state(cache_of(spec))
    stale = state.get("stale") or {}
    return RemoteStatus(url=spec.remote.url, fetched_at=state.get("fetched_at"),
                        stale_since=stale.get("since"), stale_why=stale.get("why"),
                        entries=state.get("entries") or {})


def stale_note(spec: RootSpec) -> str | None:
    """Why a URL root's indexed copy may not be its publisher's today, in words; None when
    its last fetch succeeded."""
    state = status(spec)
    if state is None:
        return None
    if state.fetched_at is None and state.stale_since is None:
        return "not fetched yet: `skillindex reindex` fetches it"
    return state.note()


def sync(spec: RootSpec, *, limits: Limits, now: datetime | None = None,
         client: httpx.Client | None = None) -> SyncReport:
    """Bring the URL root `spec`'s cache up to its publisher's index."""
    assert spec.remote is not None
    moment = now or datetime.now(UTC)
    cache = cache_of(spec)
    report = SyncReport(url=spec.remote.url)
    state = _load_state(cache)
    if state.get("url") not in (None, spec.remote.url):
        state = {}
    state["url"] = spec.remote.url
    with contextlib.ExitStack() as stack:
        try:
            http = client or stack.enter_context(_client())
            index = _fetch_index(http, spec, state, moment, report)
        except FetchError as exc:
            report.stale = str(exc)
            old = state.get("stale") or {}
            state["stale"] = {"since": old.get("since") or _stamp(moment), "why": str(exc)}
            _materialize(cache, state)
            _save_state(cache, state)
            return report
        if index is not None:
            _fetch_entries(http, spec, index, state, limits, moment, report)
    state.pop("stale", None)
    state["fetched_at"] = _stamp(moment)
    _materialize(cache, state)
    _save_state(cache, state)
    _collect(cache, state)
    return report


@contextlib.contextmanager
def _client() -> Iterator[httpx.Client]:
    try:
        import httpx  # noqa: PLC0415 (local-only commands never import the HTTP client)
    except ImportError:
        from skillindex.extras import hint  # noqa: PLC0415

        raise FetchError("fetching a URL root needs the `remote` extra (httpx), which is not "
                         f"installed; {hint('remote')}") from None
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    # Certificates are always verified: no setting turns that off.
    with httpx.Client(timeout=timeout, follow_redirects=True, verify=True,
                      headers={"User-Agent": "skillindex"}) as client:
        yield client


def _fetch_index(http: httpx.Client, spec: RootSpec, state: dict[str, Any], now: datetime,
                 report: SyncReport) -> list[Entry] | None:
    """The index's entries, or None when the copy held is still the publisher's (fresh by
    Cache-Control, or a 304)."""
    assert spec.remote is not None
    held = state.get("index") or {}
    fresh_until = held.get("fresh_until")
    if fresh_until and _parse_stamp(fresh_until) > now and state.get("entries") is not None:
        return None
    attempts = [INDEX_PATH, LEGACY_INDEX_PATH]
    if held.get("path") == LEGACY_INDEX_PATH:
        attempts.reverse()
    problem = "no index"
    for path in attempts:
        url = spec.remote.url + path
        headers = {}
        if held.get("path") == path:
            if held.get("etag"):
                headers["If-None-Match"] = held["etag"]
            if held.get("last_modified"):
                headers["If-Modified-Since"] = held["last_modified"]
        response = _get(http, spec, url, headers=headers, limit=MAX_INDEX_BYTES, report=report)
        status_code, body, answer = response
        if status_code == 304 and held.get("path") == path:
            held["fresh_until"] = _fresh_until(answer, now)
            state["index"] = held
            return None
        if status_code == 404:
            problem = f"{url} answered 404"
            continue
        if status_code != 200:
            raise FetchError(f"{url} answered {status_code}")
        entries = _parse_index(body, url)
        state["index"] = {"path": path, "etag": answer.get("etag"),
                          "last_modified": answer.get("last-modified"),
                          "fresh_until": _fresh_until(answer, now)}
        return entries
    raise FetchError(problem)


def _get(http: httpx.Client, spec: RootSpec, url: str, *, headers: dict[str, str], limit: int,
         report: SyncReport) -> tuple[int, bytes, dict[str, str]]:
    """One GET, its body read up to `limit` bytes: (status, body, lower-cased headers)."""
    import httpx  # noqa: PLC0415

    assert spec.remote is not None
    _check_url(url, spec)
    report.requests += 1
    try:
        with http.stream("GET", url, headers=headers) as response:
            _check_url(str(response.url), spec)  # where the redirects ended
            answer = {key.lower(): value for key, value in response.headers.items()}
            declared = answer.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise FetchError(f"{url} is {declared} bytes, over the limit of {limit}")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise FetchError(f"{url} is over the limit of {limit} bytes")
                chunks.append(chunk)
            return response.status_code, b"".join(chunks), answer
    except httpx.HTTPError as exc:
        raise FetchError(f"{url}: {type(exc).__name__}: {exc}") from None


def _check_url(url: str, spec: RootSpec) -> None:
    assert spec.remote is not None
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and (spec.remote.allow_http or is_loopback(parts.hostname or "")):
        return
    raise FetchError(f"{url}: only https:// is fetched (http:// on loopback or with "
                     "allow_http)")


def _parse_index(body: bytes, url: str) -> list[Entry]:
    try:
        document = inputs.load_json(body.decode("utf-8"), what="skills index", source=url)
    except (UnicodeDecodeError, ValueError, SkillIndexError) as exc:
        raise FetchError(f"{url} is not a JSON index: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("skills"), list):
        raise FetchError(f"{url} is not a skills index (no `skills` array)")
    schema = document.get("$schema")
    if schema is None:
        # v0.1.0 names files but no digests: nothing could be verified, so nothing is kept.
        raise FetchError(f"{url} is a v0.1.0 index, which has no digests to verify its "
                         "files against")
    if schema != SCHEMA_V02:
        raise FetchError(f"{url} has an unknown $schema {schema!r}")
    entries: list[Entry] = []
    for raw in document["skills"]:
        if not isinstance(raw, dict):
            raise FetchError(f"{url}: a skills entry is not an object")
        name, kind, link, digest = (raw.get(key) for key in ("name", "type", "url", "digest"))
        if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
            raise FetchError(f"{url}: the entry name {name!r} is not a skill name")
        if kind not in ("skill-md", "archive"):
            continue  # an unknown type is skipped, as the format asks
        matched = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
        if not isinstance(link, str) or not link or matched is None:
            raise FetchError(f"{url}: the entry {name} needs a url and a sha256: digest")
        entries.append(Entry(name=name, kind=kind, url=urljoin(url, link),
                             digest=matched.group(1)))
    names = [entry.name for entry in entries]
    if len(set(names)) != len(names):
        raise FetchError(f"{url} names a skill twice")
    return entries


def _fetch_entries(http: httpx.Client, spec: RootSpec, index: list[Entry],
                   state: dict[str, Any], limits: Limits, now: datetime,
                   report: SyncReport) -> None:
    cache = cache_of(spec)
    held: dict[str, Any] = state.get("entries") or {}
    wanted: dict[str, Any] = {}
    for entry in index:
        record = dict(held.get(entry.name) or {})
        record.update(kind=entry.kind, url=entry.url, digest=entry.digest)
        if record.get("held") == entry.digest and (cache / "objects" / entry.digest).is_dir():
            record.pop("stale", None)
            report.kept += 1
        else:
            try:
                _fetch_entry(http, spec, entry, limits, report)
                record["held"] = entry.digest
                record["fetched_at"] = _stamp(now)
                record.pop("stale", None)
            except (FetchError, archive.UnsafeArchiveError) as exc:
                report.failed[entry.name] = str(exc)
                old = record.get("stale") or {}
                record["stale"] = {"since": old.get("since") or _stamp(now), "why": str(exc)}
        wanted[entry.name] = record
    report.removed = len(set(held) - set(wanted))
    state["entries"] = wanted


def _fetch_entry(http: httpx.Client, spec: RootSpec, entry: Entry, limits: Limits,
                 report: SyncReport) -> None:
    """Download, verify and unpack one artifact into `objects/<digest>`, whole or not at all."""
    assert spec.remote is not None
    cache = cache_of(spec)
    limit = limits.max_file_bytes if entry.kind == "skill-md" else spec.remote.max_archive_bytes
    code, body, answer = _get(http, spec, entry.url, headers={}, limit=limit, report=report)
    if code != 200:
        raise FetchError(f"{entry.url} answered {code}")
    report.downloads += 1
    report.bytes += len(body)
    got = hashlib.sha256(body).hexdigest()
    if got != entry.digest:
        raise FetchError(f"{entry.url}: digest mismatch (the index says sha256:{entry.digest}, "
                         f"the bytes are sha256:{got})")
    work = cache / "tmp" / f"{entry.digest}.{secrets.token_hex(4)}"
    work.mkdir(parents=True)
    try:
        if entry.kind == "skill-md":
            archive.write_file(work / "SKILL.md", body, executable=False, within=work)
        else:
            kind = archive.kind_of(answer.get("content-type"), entry.url, body)
            archive.unpack(body, kind, work, archive.ArchiveLimits(
                spec.remote.max_archive_files, spec.remote.max_archive_bytes))
        target = cache / "objects" / entry.digest
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _materialize(cache: Path, state: dict[str, Any]) -> None:
    """Make `skills/<name>` lead to the verified copy of every entry held: a link to
    `objects/<digest>` put in place by one rename, so the indexer sees the old copy or the new
    one, never half of either."""
    skills = cache / "skills"
    skills.mkdir(parents=True, exist_ok=True)
    entries: dict[str, Any] = state.get("entries") or {}
    shown: set[str] = set()
    for name, record in sorted(entries.items()):
        digest = record.get("held")
        if not digest or not (cache / "objects" / str(digest)).is_dir():
            continue
        shown.add(name)
        link = skills / name
        wanted = os.path.join("..", "objects", str(digest))
        if link.is_symlink() and os.readlink(link) == wanted:
            continue
        (cache / "tmp").mkdir(exist_ok=True)
        fresh = cache / "tmp" / f"{name}.{secrets.token_hex(4)}"
        os.symlink(wanted, fresh, target_is_directory=True)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        os.replace(fresh, link)
    # Anything else in the scanned folder was not put there by a sync: it is not indexed.
    for stray in skills.iterdir():
        if stray.name not in shown:
            if stray.is_dir() and not stray.is_symlink():
                shutil.rmtree(stray, ignore_errors=True)
            else:
                stray.unlink(missing_ok=True)


def _collect(cache: Path, state: dict[str, Any]) -> None:
    """Remove the objects no entry holds any more, and what an interrupted sync left."""
    held = {str(record.get("held")) for record in (state.get("entries") or {}).values()}
    objects = cache / "objects"
    if objects.is_dir():
        for folder in objects.iterdir():
            if folder.name not in held:
                shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(cache / "tmp", ignore_errors=True)


def _load_state(cache: Path) -> dict[str, Any]:
    try:
        data = inputs.read_document(cache / STATE_FILE, "json", max_bytes=MAX_INDEX_BYTES * 4,
                                    what="URL root's state").data
    except (OSError, SkillIndexError):
        return {}  # never fetched, or not ours: the next fetch starts over
    return data if isinstance(data, dict) else {}


def _save_state(cache: Path, state: dict[str, Any]) -> None:
    fsio.write(cache / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n",
               what="the URL root's state", named=False, within=cache, private=False)


def _fresh_until(answer: dict[str, str], now: datetime) -> str | None:
    control = answer.get("cache-control", "").lower()
    if "no-cache" in control or "no-store" in control:
        return None
    matched = _MAX_AGE.search(control)
    if matched is None:
        return None
    return _stamp(now + timedelta(seconds=min(int(matched.group(1)), 7 * 86400)))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
