"""Revocation and advisory feeds: the formats read, and which skills their entries name.

Two shapes are read. skillindex's own (docs/trust.md):

    {"format": "skillindex-advisories", "version": 1,
     "advisories": [{"id": "ADV-1", "text": "why", "matches": [{"name": "pdf"},
                     {"name": "pdf", "version": "1.2.0"}, {"sha256": "<64 hex>"}]}]}

and a revocation list, one entry per revoked skill, under `revocations` or `revoked` (or the
list itself): `{"id"?, "name" | "skill" | "slug", "version"?, "sha256"?, "reason" | "text"?}`.
Anything else in a feed is an error: a feed is read whole or not at all (fail closed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillindex import inputs
from skillindex.errors import ConfigError

FORMAT = "skillindex-advisories"
VERSION = 1
MAX_BYTES = inputs.MAX_FEED_BYTES
MAX_TEXT = 500  # characters of an advisory's text that a refusal quotes
_SHA256 = re.compile(r"[0-9a-f]{64}")


class FeedError(ConfigError):
    """A feed that is not one of the formats read; the feed in force stays."""


@dataclass(frozen=True, slots=True)
class Advisory:
    """One advisory: its id and text, and one way it names a skill (a name, a name at a
    version, or a sha256 of SKILL.md or of the whole skill folder)."""

    id: str
    text: str
    name: str | None = None
    version: str | None = None
    sha256: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"id": self.id, "text": self.text, "name": self.name, "version": self.version,
                "sha256": self.sha256}

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> Advisory:
        return cls(str(item["id"]), str(item["text"]), item.get("name"), item.get("version"),
                   item.get("sha256"))


def parse(data: bytes, *, source: str) -> list[Advisory]:
    """The advisories of a feed; FeedError names what is wrong with it."""
    if len(data) > MAX_BYTES:
        raise FeedError(f"feed over {MAX_BYTES} bytes", source=source)
    try:
        document = inputs.load_json(data.decode("utf-8"), what="advisory feed", source=source)
    except UnicodeDecodeError as exc:
        raise FeedError("not a JSON feed: not UTF-8", source=source) from exc
    except inputs.InputError as exc:
        raise FeedError(f"not a JSON feed: {exc.reason}", source=source) from exc
    if isinstance(document, dict) and "advisories" in document:
        if document.get("format", FORMAT) != FORMAT or document.get("version") != VERSION:
            raise FeedError(f'an advisory feed needs "format": "{FORMAT}" and "version": '
                            f"{VERSION}", source=source)
        return _advisories(document["advisories"], source)
    listed = document
    if isinstance(document, dict):
        keys = [key for key in ("revocations", "revoked") if key in document]
        if len(keys) != 1:
            raise FeedError('a feed holds "advisories", "revocations" or "revoked"',
                            source=source)
        listed = document[keys[0]]
    return _revocations(listed, source)


def _advisories(items: object, source: str) -> list[Advisory]:
    if not isinstance(items, list):
        raise FeedError('"advisories" must be a list', source=source)
    found = []
    for number, item in enumerate(items, 1):
        where = f"advisory {number}"
        if not isinstance(item, dict):
            raise FeedError(f"{where} is not an object", source=source)
        ident = _text(item.get("id"), f"{where}: id", source, required=True) or ""
        text = _text(item.get("text", item.get("summary")), f"{where}: text", source) or ident
        matches = item.get("matches")
        if not isinstance(matches, list) or not matches:
            raise FeedError(f"{where} ({ident}) needs a non-empty matches list", source=source)
        for match in matches:
            if not isinstance(match, dict):
                raise FeedError(f"{where} ({ident}): a match is not an object", source=source)
            found.append(_matcher(ident, text, match, match, where, source))
    return found


def _revocations(items: object, source: str) -> list[Advisory]:
    if not isinstance(items, list):
        raise FeedError("the revocations must be a list", source=source)
    found = []
    for number, item in enumerate(items, 1):
        where = f"revocation {number}"
        if not isinstance(item, dict):
            raise FeedError(f"{where} is not an object", source=source)
        names = [key for key in ("name", "skill", "slug") if key in item]
        if len(names) > 1:
            raise FeedError(f"{where} names its skill twice ({', '.join(names)})", source=source)
        fields = {"name": item.get(names[0]) if names else None,
                  "version": item.get("version"), "sha256": item.get("sha256")}
        text = _text(item.get("reason", item.get("text")), f"{where}: reason", source)
        ident = _text(item.get("id"), f"{where}: id", source)
        label = ident or f"revoked:{fields['name'] or fields['sha256']}"
        found.append(_matcher(label, text or "revoked", fields, item, where, source))
    return found


def _matcher(ident: str, text: str, match: Mapping[str, Any], whole: Mapping[str, Any],
             where: str, source: str) -> Advisory:
    name = _text(match.get("name"), f"{where}: name", source)
    version = _text(match.get("version"), f"{where}: version", source)
    digest = _text(match.get("sha256"), f"{where}: sha256", source)
    if digest is not None:
        digest = digest.lower().removeprefix("sha256:")
        if not _SHA256.fullmatch(digest):
            raise FeedError(f"{where}: sha256 is not 64 hex digits", source=source)
    if name is None and digest is None:
        raise FeedError(f"{where} names no skill (name or sha256)", source=source)
    if version is not None and name is None:
        raise FeedError(f"{where}: a version needs a name", source=source)
    return Advisory(ident, text, name, version, digest)


def _text(value: object, what: str, source: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise FeedError(f"{what} must be a non-empty string", source=source)
    return value.strip()


def dumps(found: Sequence[Advisory]) -> str:
    """The advisories as the store keeps them (one JSON list)."""
    return json.dumps([advisory.as_dict() for advisory in found], ensure_ascii=False)


def loads(text: str) -> list[Advisory]:
    return [Advisory.of(item) for item in json.loads(text)]


@dataclass(frozen=True, slots=True)
class Feed:
    """The advisories in force, indexed by what they match on."""

    by_name: dict[str, Advisory] = field(default_factory=dict)
    by_version: dict[tuple[str, str], Advisory] = field(default_factory=dict)
    by_digest: dict[str, Advisory] = field(default_factory=dict)

    @classmethod
    def of(cls, found: Iterable[Advisory]) -> Feed:
        feed = cls()
        for advisory in found:
            if advisory.sha256 is not None:
                feed.by_digest.setdefault(advisory.sha256, advisory)
            elif advisory.version is not None and advisory.name is not None:
                feed.by_version.setdefault((advisory.name, advisory.version), advisory)
            elif advisory.name is not None:
                feed.by_name.setdefault(advisory.name, advisory)
        return feed

    def __bool__(self) -> bool:
        return bool(self.by_name or self.by_version or self.by_digest)

    @property
    def versioned(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.by_version)

    def match(self, names: Iterable[str], *, version: str | None, skill_md: str | None,
              whole: Callable[[], str | None]) -> Advisory | None:
        """The advisory naming a skill known by `names`, at `version`, whose SKILL.md has the
        sha256 `skill_md`; `whole` computes the sha256 of its folder (the lock file's
        `computedHash`), asked only when a digest is left to compare."""
        for name in names:
            found = self.by_name.get(name) or (
                self.by_version.get((name, version)) if version is not None else None)
            if found is not None:
                return found
        if not self.by_digest:
            return None
        if skill_md is not None and skill_md in self.by_digest:
            return self.by_digest[skill_md]
        digest = whole()
        return None if digest is None else self.by_digest.get(digest)


def version_of(frontmatter: Mapping[str, Any]) -> str | None:
    """A skill's version: `version` in its frontmatter, else `metadata.version`."""
    value = frontmatter.get("version")
    metadata = frontmatter.get("metadata")
    if value is None and isinstance(metadata, Mapping):
        value = metadata.get("version")
    return None if value is None else str(value)


def reason(advisory: Advisory) -> str:
    text = advisory.text if len(advisory.text) <= MAX_TEXT else advisory.text[:MAX_TEXT] + "…"
    return f"revoked by advisory {advisory.id}: {text}"
