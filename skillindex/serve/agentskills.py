"""Serves an index's catalog skills to agentskills-core hosts through its SkillProvider API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

try:
    from agentskills_core import (
        RESOURCE_KINDS,
        AgentSkillsError,
        ResourceNotFoundError,
        SkillNotFoundError,
        SkillProvider,
    )
except ImportError as exc:  # pragma: no cover - depends on what is installed
    from skillindex.extras import hint

    raise ImportError("skillindex.agentskills needs agentskills-core, on Python 3.12 or "
                      f"newer: {hint('agentskills')}") from exc

from skillindex import errors
from skillindex.index.scanner import ENTRY
from skillindex.model import Disclosure, SkillManifest
from skillindex.query.disclose import SCHEME, path_problem
from skillindex.query.modes import manual_only

if TYPE_CHECKING:
    from skillindex.api import SkillIndex

__all__ = ["ContentTooLargeError", "IndexProvider", "IntegrityRefusedError"]

class IntegrityRefusedError(AgentSkillsError):
    """The file differs from what the index recorded (changed, added or deleted since)."""


class ContentTooLargeError(AgentSkillsError):
    """The file is larger than this provider's `max_bytes`, or than the index will read."""


class IndexProvider(SkillProvider):
    """The catalog skills of a `SkillIndex`, each read verified against it and audited.

    Skill IDs are the names the catalog gives (as `skillindex list` shows them). Metadata
    comes from the index without reading a file; bodies, resources and `read_file` go
    through `SkillIndex.read`, so each is read once, checked against the stored hashes and
    written to the audit log with `session` and `reason`.
    """

    supports_resource_listing = True
    supports_discovery = True
    supports_file_access = True

    def __init__(self, index: SkillIndex, *, session: str | None = None,
                 reason: str = "agentskills provider", max_bytes: int | None = None) -> None:
        self.index = index
        self.session = session
        self.reason = reason
        self.max_bytes = max_bytes
        # One index holds one database connection pool; its calls are short and
        # synchronous, so overlapping coroutines (or threads) take turns.
        self._lock = threading.Lock()

    @classmethod
    def open(cls, config: str | Path | None = None, *, db: str | None = None,
             cwd: str | Path | None = None, index: str | None = None,
             session: str | None = None, reason: str = "agentskills provider",
             max_bytes: int | None = None) -> IndexProvider:
        """Open the index the settings name (as `SkillIndex.open`) and serve its catalog."""
        from skillindex.api import SkillIndex  # noqa: PLC0415 - keeps this module light

        return cls(SkillIndex.open(config, db=db, cwd=cwd, index=index), session=session,
                   reason=reason, max_bytes=max_bytes)

    def close(self) -> None:
        self.index.close()

    # -- Discovery and metadata (level 1: from the index, no file read) --------------------

    async def discover(self) -> list[str]:
        with self._lock, _translated(None):
            return sorted(winner.name for winner in self.index.winners())

    async def get_metadata(self, skill_id: str) -> dict[str, Any]:
        manifest = self._manifest(skill_id)
        entry = next((f for f in manifest.files if f.rel_path == ENTRY), None)
        if entry is not None:
            self._check_size(skill_id, ENTRY, entry.size)
        # A fresh copy every call: callers may mutate what they get.
        metadata: dict[str, Any] = _copy(manifest.frontmatter)
        return metadata

    async def list_resources(self, skill_id: str) -> dict[str, list[str]]:
        listing: dict[str, list[str]] = {kind: [] for kind in RESOURCE_KINDS}
        for item in self._manifest(skill_id).files:
            kind, slash, rest = item.rel_path.partition("/")
            if slash and kind in listing and path_problem(item.rel_path) is None:
                listing[kind].append(rest)
        return {kind: sorted(names) for kind, names in listing.items()}

    async def list_files(self, skill_id: str) -> list[str]:
        # Only what a URI can name, as every surface lists it (no backslash, for one).
        return sorted(item.rel_path for item in self._manifest(skill_id).files
                      if path_problem(item.rel_path) is None)

    async def search(self, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        """The catalog skills that best match `query`, best first: `{skill_id, description,
        score}` each, as `skillindex search` ranks them, without the manual-only skills the
        catalog keeps from the model. Not part of `SkillProvider`, which has no search: a
        host that can offer the model a tool calls it directly."""
        with self._lock, _translated(None):
            hits = self.index.search(query, limit=limit * 2 + 8)
            modes = self.index.settings.catalog
            return [{"skill_id": hit.name, "description": hit.description,
                     "score": round(hit.score, 6)}
                    for hit in hits if not manual_only(hit.winner, modes)][:limit]

    # -- Disclosure (levels 2 and 3: verified and audited) ---------------------------------

    async def get_body(self, skill_id: str) -> str:
        disclosure = self._read(skill_id, None)
        return disclosure.text or ""

    async def get_reference(self, skill_id: str, name: str) -> bytes:
        return self._resource(skill_id, "references", name)

    async def get_script(self, skill_id: str, name: str) -> bytes:
        return self._resource(skill_id, "scripts", name)

    async def get_asset(self, skill_id: str, name: str) -> bytes:
        return self._resource(skill_id, "assets", name)

    async def read_file(self, skill_id: str, path: str) -> bytes:
        return self._read(skill_id, path).data

    # -- Internals -------------------------------------------------------------------------

    def _manifest(self, skill_id: str) -> SkillManifest:
        _check_id(skill_id)
        with self._lock, _translated(skill_id):
            return self.index.manifest(skill_id)

    def _resource(self, skill_id: str, kind: str, name: str) -> bytes:
        if not isinstance(name, str) or not name:
            raise ResourceNotFoundError(f"no resource {name!r} in skill {skill_id!r}")
        return self._read(skill_id, f"{kind}/{name}").data

    def _read(self, skill_id: str, path: str | None) -> Disclosure:
        _check_id(skill_id)
        # The path is quoted, so the index decodes it back to exactly this text: a name
        # such as `%2e%2e` stays literal and is looked up (and not found) as such.
        uri = SCHEME + skill_id + ("" if path is None else "/" + quote(path, safe="/"))
        with self._lock, _translated(skill_id):
            return self.index.read(uri, reason=self.reason, session=self.session,
                                   max_bytes=self.max_bytes)

    def _check_size(self, skill_id: str, path: str, size: int) -> None:
        if self.max_bytes is not None and size > self.max_bytes:
            raise ContentTooLargeError(f"{path} of skill {skill_id!r} is {size} bytes, over "
                                       f"this provider's limit of {self.max_bytes}")


def _check_id(skill_id: str) -> None:
    # Catalog names never hold these; refusing them here keeps them away from the database.
    if (not isinstance(skill_id, str) or not skill_id or "/" in skill_id or "\\" in skill_id
            or not skill_id.isprintable()):
        raise SkillNotFoundError(f"no skill {skill_id!r}")


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


@contextmanager
def _translated(skill_id: str | None) -> Iterator[None]:
    """The index's errors as the SDK's: callers of a SkillProvider catch those."""
    try:
        yield
    except errors.SkillNotFoundError as exc:
        raise SkillNotFoundError(exc.message) from exc
    except (errors.ResourceNotFoundError, errors.PathRefusedError) as exc:
        raise ResourceNotFoundError(exc.message) from exc
    except errors.TooLargeError as exc:
        raise ContentTooLargeError(exc.message) from exc
    except errors.IntegrityError as exc:
        raise IntegrityRefusedError(exc.message) from exc
    except errors.SkillIndexError as exc:
        raise AgentSkillsError(exc.message) from exc
