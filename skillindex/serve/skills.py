"""What the MCP skills extension publishes, built from the index: entries, files, directories."""

from __future__ import annotations

import mimetypes
import string
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from skillindex.errors import describe
from skillindex.model import SkillManifest, StoredSkill
from skillindex.query.disclose import SCHEME, path_problem, skill_path
from skillindex.query.resolve import Names

EXTENSION = "io.modelcontextprotocol/skills"
# The extension's per-skill limits: a host is only bound to accept skills within them.
MAX_FILES = 512
MAX_BYTES = 16 * 1024 * 1024
SKILL_MD = "SKILL.md"
DIRECTORY = "inode/directory"
MARKDOWN = "text/markdown"
# The `_meta` key of a skill's entry and resource naming who signed it (verified at index time).
SIGNER_META = "skillindex/signer"
CHUNK = 250  # skills built at a time


@dataclass(frozen=True, slots=True)
class ServedFile:
    """One file a `resources/read` may ask for, and the catalog name of its skill."""

    uri: str
    skill: str
    rel_path: str
    resolution: str | None  # the key of the stored resolution a read looks the skill up in

    @property
    def mime_type(self) -> str:
        return mime_type(self.rel_path)


@dataclass(frozen=True, slots=True)
class Withheld:
    """A winner the server does not publish, and why in words."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Published:
    """One skill as the server publishes it."""

    name: str  # the catalog name
    uri: str  # of its SKILL.md
    description: str
    entry: dict[str, Any]
    files: tuple[str, ...]  # relative paths, as in the manifest
    resolution: str | None
    signer: str | None = None  # its verified signer: `_meta` names it

    @property
    def meta(self) -> dict[str, str] | None:
        return None if self.signer is None else {SIGNER_META: self.signer}


class Publication:
    """Everything the server answers from, for one state of the index (one generation).

    Built as it is asked for: the first `skills/list` page needs only the first skills of the
    catalog, so a server answers it without first building the rest. `extend` builds more
    (from any thread; a chunk at a time under a lock, so a page can be answered between two
    chunks); whatever needs every skill (a read, a lookup by URI) calls `complete` first.
    """

    def __init__(self, generation: str, manifests: Iterable[SkillManifest | StoredSkill]) -> None:
        self.generation = generation
        self._source = iter(manifests)
        self._lock = threading.Lock()
        self._done = False
        self._quoted: dict[str, str] = {}  # most skills share most relative paths
        self.skills: list[Published] = []
        # Kept once: every skills/list page is a slice of it.
        self.entries: list[dict[str, Any]] = []
        self.by_uri: dict[str, Published] = {}
        self.by_name: dict[str, Published] = {}
        self.by_base: dict[str, Published] = {}
        self.files: dict[str, ServedFile] = {}
        self.withheld: list[Withheld] = []
        self._seen_withheld: set[str] = set()
        # Every name added, served or withheld: a skill whose skill path meets one of them
        # (one name twice, or `kit` beside `kit:pdf`) would make its URIs name two files.
        self._names = Names()
        self._directories: dict[str, list[dict[str, str]] | None] = {}

    @property
    def done(self) -> bool:
        return self._done

    def has(self, count: int) -> bool:
        """Whether `count` skills are built (or every skill there is)."""
        return self._done or len(self.skills) >= count

    def extend(self, count: int | None = None) -> None:
        """Build until `count` skills are published (every one with None)."""
        while not (self._done or (count is not None and len(self.skills) >= count)):
            with self._lock:
                for _ in range(CHUNK):
                    manifest = next(self._source, None)
                    if manifest is None:
                        self._done = True
                        break
                    self._add(manifest)

    def complete(self) -> Publication:
        self.extend()
        return self

    def served(self, name: str) -> Published | None:
        """The published skill of this catalog name, building only as far as it."""
        while not (name in self.by_name or name in self._seen_withheld or self._done):
            self.extend(len(self.skills) + CHUNK)
        return self.by_name.get(name)

    def _add(self, manifest: SkillManifest | StoredSkill) -> None:
        try:
            reason = withheld_reason(manifest)
            if self._names.meets(manifest.name):
                reason = self._collide(manifest.name)
            self._names.update([manifest.name])
            if reason is None:
                self._publish(manifest)
                return
        except Exception as exc:  # the barrier: this skill is withheld, the others served
            reason = f"it cannot be published: {describe(exc)}"
        self._withhold(manifest.name, reason)

    def _publish(self, manifest: SkillManifest | StoredSkill) -> None:
        # Nothing is kept until every part of the skill is built: a failure leaves no trace.
        files: dict[str, ServedFile] = {}
        resolution = manifest.resolution if isinstance(manifest, StoredSkill) else None
        base = base_uri(manifest.name)
        resources = []
        for entry in manifest.files:
            if entry.sha256 is None:  # over max_file_bytes: never read, so never served
                continue
            rel = entry.rel_path
            if not isinstance(rel, str):  # no reindex writes such a row: the skill is withheld
                raise TypeError(f"a stored file row without a path ({rel!r})")
            if path_problem(rel) is not None:  # no URI names it (a backslash): not listed
                continue
            path = self._quoted.get(rel)
            if path is None:
                path = self._quoted[rel] = _quoted(rel)
            uri = f"{base}/{path}"
            files[uri] = ServedFile(uri, manifest.name, rel, resolution)
            resources.append({"uri": uri, "digest": f"sha256:{entry.sha256}",
                              "size": entry.size})
        skill_uri = f"{base}/{SKILL_MD}"
        entry_of = {"uri": skill_uri, "frontmatter": manifest.frontmatter, "resources": resources}
        signer = manifest.signer if isinstance(manifest, StoredSkill) else None
        skill = Published(manifest.name, skill_uri, str(manifest.frontmatter["description"]),
                          entry_of, tuple(entry.rel_path for entry in manifest.files),
                          resolution, signer)
        if skill.meta is not None:
            entry_of["_meta"] = skill.meta
        self.files.update(files)
        self.by_uri[skill_uri] = skill
        self.by_name[skill.name] = skill
        self.by_base[base] = skill
        self.skills.append(skill)
        self.entries.append(entry_of)  # last: a page never shows a skill half added

    def _withhold(self, name: str, reason: str) -> None:
        self.withheld.append(Withheld(name, reason))
        self._seen_withheld.add(name)

    def _collide(self, name: str) -> str:
        """Say why `name` is withheld: its skill path meets that of a skill published before
        it, which ranks above it (skills come in resolution order), so the URIs they share
        are that skill's (`lookup.locate` reads them so) and the lower side is the one
        withheld. Several winners of one name (keep-all) are all withdrawn: no URI of theirs
        names one file."""
        path = skill_path(name)
        if name not in self.by_name:
            above = [skill.name for skill in self.skills
                     if f"{skill_path(skill.name)}/".startswith(f"{path}/")
                     or f"{path}/".startswith(f"{skill_path(skill.name)}/")]
            others = ", ".join(repr(other) for other in above) or "a skill withheld before it"
            return (f"its skill:// URIs would also name files of {others}, which takes "
                    "precedence (uri-collision)")
        met = [skill for skill in self.skills if skill.name == name]
        for skill in met:
            self.skills.remove(skill)
            self.entries.remove(skill.entry)
            del self.by_uri[skill.uri], self.by_name[skill.name]
            del self.by_base[base_uri(skill.name)]
            for rel in skill.files:
                self.files.pop(f"{base_uri(skill.name)}/{_quoted(rel)}", None)
            self._withhold(skill.name, f"its skill:// URIs would also name files of {name!r} "
                           "(uri-collision)")
        others = ", ".join(repr(skill.name) for skill in met) or "another withheld skill"
        return f"its skill:// URIs would also name files of {others} (uri-collision)"

    def directory(self, uri: str) -> list[dict[str, str]] | None:
        """The direct children of a skill's folder or subfolder; None for anything else.

        Worked out on first asking (most folders are never listed) and kept."""
        self.complete()
        if uri not in self._directories:
            self._directories[uri] = self._children(uri)
        return self._directories[uri]

    def _children(self, uri: str) -> list[dict[str, str]] | None:
        # The longest skill path the URI starts with owns it, as it does for reads; a path
        # that `read` refuses (`skill://pdf/`, an empty segment) is no folder either.
        if uri.endswith("/"):
            return None
        parts = uri.split("/")
        for cut in range(len(parts), 2, -1):
            skill = self.by_base.get("/".join(parts[:cut]))
            if skill is not None:
                inside = "/".join(parts[cut:])
                break
        else:
            return None
        if inside and path_problem(unquote(inside)) is not None:
            return None
        prefix = f"{unquote(inside)}/" if inside else ""
        children: dict[str, dict[str, str]] = {}
        for rel in skill.files:
            if not rel.startswith(prefix) or path_problem(rel) is not None:
                continue
            head, slash, _ = rel[len(prefix):].partition("/")
            child = f"{uri}/{_quoted(head)}"
            children.setdefault(child, {"uri": child, "name": head, "mimeType": (
                DIRECTORY if slash else mime_type(rel))})
        if not children and inside:
            return None  # not a folder of the skill (a file, or nothing)
        return sorted(children.values(), key=lambda child: child["uri"])


def mime_type(rel_path: str) -> str:
    if rel_path.lower().endswith(".md"):
        return MARKDOWN
    return mimetypes.guess_type(rel_path, strict=False)[0] or "application/octet-stream"


def base_uri(name: str) -> str:
    """`skill://<skill-path>`: one segment per part of the catalog name, the last its name."""
    return SCHEME + skill_path(name)


def withheld_reason(manifest: SkillManifest | StoredSkill) -> str | None:
    """Why this catalog skill is not served over MCP, or None when it is."""
    segments = skill_path(manifest.name).split("/")
    for segment in segments:
        if segment in ("", ".", "..") or "/" in segment or _quoted(segment) != segment:
            return (f"the name {manifest.name!r} does not make a skill:// path "
                    f"(segment {segment!r} would need escaping)")
    frontmatter = manifest.frontmatter
    if frontmatter.get("name") != segments[-1]:
        return f"its frontmatter does not declare the name {segments[-1]!r}"
    if not isinstance(frontmatter.get("description"), str):
        return "its frontmatter has no description"
    if not any(entry.rel_path == SKILL_MD for entry in manifest.files):
        return "SKILL.md is not in its indexed files"
    if len(manifest.files) > MAX_FILES:
        return (f"{len(manifest.files)} files; the MCP skills extension serves at most "
                f"{MAX_FILES}")
    if manifest.size > MAX_BYTES:
        return (f"{manifest.size:,} bytes; the MCP skills extension serves at most "
                f"{MAX_BYTES:,} (16 MiB)")
    return None


# What `quote(path, safe="/")` leaves as it is.
_PLAIN = string.ascii_letters + string.digits + "._~/-"


def _quoted(path: str) -> str:
    """`path` as URI path text (`/` kept); most paths need no escaping, so skip the work."""
    # Stripping every plain character from both ends leaves nothing only if all are plain.
    return path if not path.strip(_PLAIN) else quote(path, safe="/")
