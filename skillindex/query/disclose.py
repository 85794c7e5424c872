"""Resolves skill:// URIs inside a skill and discloses only bytes that match the index."""

from __future__ import annotations

import errno
import functools
import hashlib
import mimetypes
import os
import stat as stat_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import RawIOBase
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from skillindex.errors import (
    DeletedFileError,
    FileReadError,
    ModifiedFileError,
    NotUserInvocableError,
    PathRefusedError,
    ResourceNotFoundError,
    TooLargeError,
    UnindexedFileError,
    describe,
)
from skillindex.index import hashing, skillmd
from skillindex.index.skilldir import ENTRY, realpath, skill_listing
from skillindex.model import (
    AuditRecord,
    Candidate,
    Disclosure,
    Drift,
    DriftItem,
    Finding,
    Level,
    Limits,
    ManifestFile,
    RootSpec,
    SkillCommand,
    VerifyReport,
)
from skillindex.text import is_text, shown_name

SCHEME = "skill://"
# The longest relative path a URI may name: the system's PATH_MAX, past which no path to a
# file can be given to it whole.
MAX_PATH_CHARS = 4096
# The most `:`-separated parts a catalog name has (a qualifier, a plugin, its skill, and room
# to spare).
MAX_NAME_PARTS = 16
OK = "ok"
MARKDOWN = "text/markdown"
PLAIN = "text/plain"
READ_BODY, READ_RESOURCE, COMMAND = "skill.read", "resource.read", "skill.command"
# A refused file is hashed for its audit row only up to this size.
AUDIT_DIGEST_LIMIT = 16 * 1024 * 1024


# Pure checks on the URI and the relative path: no filesystem access until the I/O part below.

@dataclass(frozen=True, slots=True)
class SkillRef:
    """A parsed skill:// URI: the exact skill name and, for level 3, a checked relative path."""

    name: str
    resource: str | None

    @property
    def file(self) -> str:
        """The manifest path to read: the resource, or SKILL.md for the body."""
        return self.resource if self.resource is not None else ENTRY

    @property
    def level(self) -> Level:
        return Level.BODY if self.resource is None else Level.RESOURCE


def parse_uri(uri: str) -> SkillRef:
    """Split `skill://<name>[/<path>]`; the name is taken literally, the path decoded once."""
    return parse_uri_options(uri)[-1]


def parse_uri_options(uri: str) -> list[SkillRef]:
    """Every reading of `skill://<skill-path>[/<path>]`, the longest skill path first.

    A qualified name `kit:pdf` is written as the skill path `kit/pdf` (its last segment the
    declared name), so `skill://kit/pdf/SKILL.md` is either the file `SKILL.md` of `kit:pdf` or
    the file `pdf/SKILL.md` of `kit`; the caller takes the first reading that names a skill.
    The path after the first segment is checked whole, before any reading is chosen.
    """
    if uri[:len(SCHEME)].lower() != SCHEME:
        hint = "" if "://" in uri else f" (a skill is read as skill://{uri})"
        raise PathRefusedError(f"not a skill:// URI: {uri!r}{hint}")
    name, slash, raw = uri[len(SCHEME):].partition("/")
    if not name:
        raise PathRefusedError(f"no skill name in {uri!r}")
    if not slash:
        return [SkillRef(name, None)]
    # Exactly one decoding: `%252e` stays the literal text `%2e`, never becomes a dot.
    check_relative(unquote(raw), skill=name)
    segments = raw.split("/")
    # No catalog name has more parts than this: a URI of a thousand segments is read in a
    # few ways, not a thousand (each a lookup).
    longest = min(len(segments), MAX_NAME_PARTS - 1)
    options = [SkillRef(":".join([name, *segments]), None)] if len(segments) == longest else []
    options.extend(SkillRef(":".join([name, *segments[:cut]]), unquote("/".join(segments[cut:])))
                   for cut in range(min(longest, len(segments) - 1), -1, -1))
    return options


def skill_path(name: str) -> str:
    """The `<skill-path>` of a catalog name in a URI: `kit:pdf` is `kit/pdf`."""
    return name.replace(":", "/")


def check_relative(path: str, *, skill: str) -> str:
    """Accept only a plain relative path of named segments; anything else is refused."""
    problem = path_problem(path)
    if problem is not None:
        quoted = repr(path) if is_text(path) else f"'{shown_name(path)}'"
        raise PathRefusedError(f"refused path {quoted} in skill {shown_name(skill)}: {problem}",
                               skill=skill, path=path)
    return path


def path_problem(path: str) -> str | None:
    """Why a URI cannot name this relative path (None: it can): the one rule by which every
    surface reads, lists and publishes a skill's files."""
    if not path:
        return "the path is empty"
    if len(path) > MAX_PATH_CHARS:  # checked first: every rule below is linear in its length
        return f"it is longer than {MAX_PATH_CHARS:,} characters"
    if not is_text(path):
        return "it is not UTF-8 (no indexed file has such a name)"
    if "\x00" in path:
        return "NUL characters are not allowed"
    if "\\" in path:
        return "backslashes are not allowed"
    if path.startswith("/"):
        return "absolute paths are not allowed"
    for segment in path.split("/"):
        if not segment:
            return "empty path segments are not allowed"
        if segment in (".", ".."):
            return f"'{segment}' segments are not allowed"
    return None


@functools.cache
def _types() -> mimetypes.MimeTypes:
    """Python's own table (never the machine's /etc/mime.types, so every host answers alike),
    built at the first use: a process that reads a body never needs it."""
    return mimetypes.MimeTypes(filenames=())


# The types skills ship most that older Pythons lack or name differently.
_EXTRA = {".md": MARKDOWN, ".markdown": MARKDOWN, ".woff": "font/woff", ".woff2": "font/woff2",
          ".ttf": "font/ttf", ".otf": "font/otf", ".js": "text/javascript",
          ".mjs": "text/javascript", ".ts": "text/x-typescript", ".yaml": "application/yaml",
          ".yml": "application/yaml", ".toml": "application/toml"}
# Leading bytes of the binary formats found in skills, for files whose name does not tell.
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"),
          (b"PK\x03\x04", "application/zip"), (b"\x1f\x8b", "application/gzip"),
          (b"wOFF", "font/woff"), (b"wOF2", "font/woff2"), (b"OTTO", "font/otf"),
          (b"\x00\x01\x00\x00", "font/ttf"), (b"\x00asm", "application/wasm"),
          (b"\x7fELF", "application/x-executable"))
BINARY = "application/octet-stream"


def content_type(rel_path: str, data: bytes = b"") -> str:
    """The media type of a skill's file, from its name, and from its bytes when the name says
    text (or nothing) but the bytes are not text."""
    suffix = PurePosixPath(rel_path).suffix.lower()
    guessed = _EXTRA.get(suffix) or _types().guess_type(f"x{suffix}", strict=False)[0]
    if guessed is not None and not guessed.startswith("text/"):
        return guessed
    magic = next((kind for magic, kind in _MAGIC if data.startswith(magic)), None)
    if magic is not None and (b"\x00" in data or not _is_utf8(data)):
        return magic  # a PNG named notes.txt, or with no extension at all
    if guessed is not None:
        return guessed  # text in another encoding is still text
    return PLAIN if b"\x00" not in data and _is_utf8(data) else BINARY


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def storable(text: str | None) -> str | None:
    """Caller text as every database can store it (PostgreSQL refuses NUL; no lone surrogates:
    bytes of an argument that were not UTF-8 are kept as `\\xNN`)."""
    if text is None:
        return None
    return shown_name(text.replace("\x00", "\\x00"))


def command_args(args: str | Sequence[str] | None) -> str | None:
    """The arguments of `/skill:<name> args...` as one trimmed text; None when blank."""
    return (args if isinstance(args, str) else " ".join(args or ())).strip() or None


def command_message(body: str, path: Path, args: str | None) -> str:
    """The seed system's `/skill:` message; body and arguments trimmed as the seed trims them."""
    message = f"{body.strip()}\n\n---\n\nSkill: {path}"
    args = (args or "").strip()
    return f"{message}\nUser: {args}" if args else message


# The audit record of one attempt.

@dataclass(slots=True)
class Attempt:
    """What one disclosure attempt reached before it ended; it becomes exactly one audit row."""

    event: str
    level: Level
    skill: str | None = None
    resource: str | None = None
    path: str | None = None
    digest: str | None = None
    bytes: int = 0  # bytes handed over; stays 0 unless the attempt succeeds

    @classmethod
    def of_uri(cls, uri: str) -> Attempt:
        """The record of a read, filled from the URI as given, before anything is checked."""
        rest = uri[len(SCHEME):] if uri[:len(SCHEME)].lower() == SCHEME else uri
        name, slash, raw = rest.partition("/")
        if slash:
            return cls(READ_RESOURCE, Level.RESOURCE, name or None, unquote(raw))
        return cls(READ_BODY, Level.BODY, name or None)

    def aim(self, ref: SkillRef) -> None:
        """Record the skill and file the URI was found to mean (a skill path may hold `/`)."""
        self.skill, self.resource, self.level = ref.name, ref.resource, ref.level
        self.event = READ_BODY if ref.resource is None else READ_RESOURCE

    def record(self, *, outcome: str, reason: str | None, session: str | None,
               principal: str | None = None) -> AuditRecord:
        return AuditRecord(event=self.event, level=int(self.level), outcome=outcome,
                           skill=storable(self.skill), resource=storable(self.resource),
                           bytes=self.bytes if outcome == OK else 0, digest=self.digest,
                           reason=storable(reason), session=storable(session),
                           path=storable(self.path), principal=storable(principal))


# I/O: containment on real paths, one read through a descriptor, comparison with the manifest.

def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def contain(real_dir: Path, rel_path: str, *, skill: str) -> str:
    """The real path of `rel_path`, refused unless it stays inside the indexed skill directory."""
    indexed = os.path.normpath(real_dir)
    anchor = realpath(indexed)
    if anchor != indexed:
        raise PathRefusedError(
            f"skill {skill}: its directory {indexed} now resolves to {anchor}; reindex",
            skill=skill, path=rel_path)
    target = realpath(os.path.join(anchor, rel_path))
    if target is None:
        raise PathRefusedError(f"refused path {rel_path!r} in skill {skill}: it changed while "
                               "it was resolved", skill=skill, path=rel_path)
    if not _inside(target, anchor) or target == anchor:
        raise PathRefusedError(f"refused path {rel_path!r} in skill {skill}: it resolves outside "
                               "the skill directory", skill=skill, path=rel_path)
    return target


def _opened_path(fd: int) -> str | None:
    """Where an open descriptor really points (Linux /proc); None where that cannot be asked."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class ReadRules:
    """What a root allows to be disclosed beyond the hash check (no defaults: callers decide)."""

    allow_hardlinks: bool
    max_file_bytes: int

    @classmethod
    def of_root(cls, root: Path, roots: Sequence[RootSpec], *, allow_hardlinks: bool,
                max_file_bytes: int) -> ReadRules:
        """The rules of the planned root `root` (its settings as they are now); the general
        `allow_hardlinks` for a root no longer planned."""
        allow = next((spec.allow_hardlinks for spec in roots if spec.path == root),
                     allow_hardlinks)
        return cls(allow_hardlinks=allow, max_file_bytes=max_file_bytes)


def _gone(expected: ManifestFile | None, skill: str, rel_path: str) -> Exception:
    if expected is not None:
        return DeletedFileError(f"{rel_path!r} of skill {skill} was indexed but is gone; "
                                "reindex", skill=skill, path=rel_path)
    return ResourceNotFoundError(skill, rel_path)


def _refused(skill: str, rel_path: str, why: str) -> PathRefusedError:
    return PathRefusedError(f"refused {rel_path!r} in skill {skill}: {why}", skill=skill,
                            path=rel_path)


def open_contained(within: str, path: str, expected: ManifestFile | None, *, skill: str,
                   rel_path: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `path` (a real path inside `within`), opened one segment
    at a time beneath the skill directory's own descriptor without following any symlink, so
    that what is read lies inside the skill even if the tree is changed meanwhile."""
    try:
        skill_dir = hashing.SkillDir(within)
    except (FileNotFoundError, NotADirectoryError):
        raise _gone(expected, skill, rel_path) from None
    except OSError as exc:
        raise FileReadError(f"cannot open skill {skill}: {exc.strerror or exc}", skill=skill,
                            path=rel_path) from exc
    if not _inside(path, within) or path == within:
        skill_dir.close()
        raise _refused(skill, rel_path, "the file lies outside the skill")
    with skill_dir:
        opened = _opened_path(skill_dir.fd)
        if opened is not None and opened != within:
            raise _refused(skill, rel_path, f"the skill directory moved to {opened}")
        beneath = path[len(within.rstrip(os.sep)) + 1:]
        try:
            # Judged before it is opened: a device or socket is never opened at all.
            kind = skill_dir.lstat(beneath).st_mode
            if stat_module.S_ISLNK(kind):
                raise _refused(skill, rel_path, "it became a symlink")
            if not stat_module.S_ISREG(kind):
                raise _refused(skill, rel_path, "not a regular file")
            return skill_dir.open(beneath)
        except hashing.SpecialFileError:
            raise _refused(skill, rel_path, "not a regular file") from None
        except (FileNotFoundError, NotADirectoryError):
            raise _gone(expected, skill, rel_path) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refused(skill, rel_path, "it became a symlink") from None
            raise FileReadError(f"cannot read {rel_path!r} of skill {skill}: "
                                f"{exc.strerror or exc}", skill=skill, path=rel_path) from exc


def read_verified(path: str, expected: ManifestFile | None, *, skill: str, rel_path: str,
                  max_bytes: int | None, attempt: Attempt, within: str,
                  rules: ReadRules) -> bytes:
    """Read the file once and return its bytes only if they are the bytes that were indexed.

    `within` is the skill's real directory: the file is opened beneath a descriptor of it,
    and judged by the fstat of its own descriptor (links, size), not by its path."""
    attempt.path = path
    fd, st = open_contained(within, path, expected, skill=skill, rel_path=rel_path)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        if expected is None:
            # Not disclosed, but the audit row says what was found there.
            attempt.digest = _sha256_of_rest(handle, b"")
            raise UnindexedFileError(f"{rel_path!r} of skill {skill} is not in the index (added "
                                     "after the last reindex?)", skill=skill, path=rel_path)
        if st.st_nlink > 1 and not rules.allow_hardlinks:
            raise _refused(skill, rel_path, "it is hard-linked (it may be a file outside the "
                           "skill); allow_hardlinks is off for its root")
        if expected.sha256 is None or st.st_size > rules.max_file_bytes:
            raise _too_large(st.st_size, rules.max_file_bytes, skill, rel_path)
        if max_bytes is not None and st.st_size > max_bytes:
            raise _too_large(st.st_size, max_bytes, skill, rel_path)
        # Never read past what the manifest (or the caller) allows: one byte more proves a change.
        bound = expected.size if max_bytes is None else min(expected.size, max_bytes)
        try:
            data = _read_at_most(handle, bound + 1)
            whole = len(data) <= bound
            if not whole and (max_bytes is None or len(data) <= max_bytes):
                # The file grew: a mismatch, whose audit row keeps the digest of the whole file.
                attempt.digest = _sha256_of_rest(handle, data)
        except OSError as exc:
            raise FileReadError(f"cannot read {rel_path!r} of skill {skill}: "
                                f"{exc.strerror or exc}", skill=skill, path=rel_path) from exc
    xxh3, sha256 = hashing.digest(data)
    if whole:
        attempt.digest = sha256
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(len(data), max_bytes, skill, rel_path)
    if not whole or (len(data), xxh3, sha256) != (expected.size, expected.xxh3,
                                                    expected.sha256):
        raise ModifiedFileError(f"{rel_path!r} of skill {skill} changed since it was indexed; "
                                "reindex", skill=skill, path=rel_path)
    return data


def _too_large(size: int, limit: int, skill: str, rel_path: str) -> TooLargeError:
    return TooLargeError(f"{rel_path!r} of skill {skill} is {size} bytes; the limit is {limit}",
                         size=size, limit=limit, skill=skill, path=rel_path)


def _sha256_of_rest(handle: RawIOBase, head: bytes) -> str | None:
    """sha256 of `head` and the rest of the file, never holding more than a chunk; None past
    AUDIT_DIGEST_LIMIT bytes (the work a refused read may cost stays bounded)."""
    digest = hashlib.sha256(head)
    total = len(head)
    while total <= AUDIT_DIGEST_LIMIT:
        chunk = handle.read(hashing.CHUNK)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        total += len(chunk)
    return None


def _read_at_most(handle: RawIOBase, count: int) -> bytes:
    parts: list[bytes] = []
    left = count
    while left > 0:
        chunk = handle.read(min(left, hashing.CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _body(data: bytes, *, skill: str) -> str:
    body = skillmd.body_of(data)
    if body is None:
        # Only an accepted SKILL.md is indexed for reading, and these are its indexed bytes.
        raise ModifiedFileError(f"SKILL.md of skill {skill} has no frontmatter", skill=skill,
                                path=ENTRY)
    return body


def disclose(uri: str, ref: SkillRef, candidate: Candidate, expected: ManifestFile | None, *,
             max_bytes: int | None, attempt: Attempt, rules: ReadRules) -> Disclosure:
    """Level 2 (the body of SKILL.md) or level 3 (one file), verified against the manifest."""
    path = contain(candidate.real_path, ref.file, skill=ref.name)
    data = read_verified(path, expected, skill=ref.name, rel_path=ref.file, max_bytes=max_bytes,
                         attempt=attempt, within=os.path.normpath(candidate.real_path),
                         rules=rules)
    digest = attempt.digest or ""
    if ref.resource is None:
        text: str | None = _body(data, skill=ref.name)
        handed = (text or "").encode("utf-8")
        kind = MARKDOWN
    else:
        handed = data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        kind = content_type(ref.resource, data)
    attempt.bytes = len(handed)
    return Disclosure(uri=uri, skill=ref.name, resource=ref.resource, data=handed, text=text,
                      content_type=kind, path=Path(path), digest=digest, level=ref.level)


def skill_command(candidate: Candidate, expected: ManifestFile | None, args: str | None, *,
                  attempt: Attempt, rules: ReadRules, words: Sequence[str] | None = None,
                  dialects: bool = False) -> SkillCommand:
    """The `/skill:` message for a skill, its body read and verified exactly as `disclose`.
    With `dialects`, the verified frontmatter's `user-invocable: false` refuses it and the
    body's argument placeholders take the arguments (`words`: as the caller's shell split
    them, else split here as a shell would)."""
    name = candidate.name or candidate.directory.name
    path = contain(candidate.real_path, ENTRY, skill=name)
    data = read_verified(path, expected, skill=name, rel_path=ENTRY, max_bytes=None,
                         within=os.path.normpath(candidate.real_path),
                         attempt=attempt, rules=rules)
    body = _body(data, skill=name).strip()
    if dialects:
        message = _dialect_message(data, body, candidate, args, words, skill=name)
    else:
        message = command_message(body, candidate.path, args)
    attempt.bytes = len(body.encode("utf-8"))
    return SkillCommand(name=name, path=candidate.path, args=args, message=message,
                        digest=attempt.digest or "")


def _dialect_message(data: bytes, body: str, candidate: Candidate, args: str | None,
                     words: Sequence[str] | None, *, skill: str) -> str:
    # PyYAML only where a host's fields are read: the seed's message needs none of it.
    from skillindex.index import dialect, frontmatter  # noqa: PLC0415

    host, _ = dialect.host_fields(frontmatter.parse(data, lenient=True).fields)
    if not host.user_invocable:
        raise NotUserInvocableError(
            f"skill {skill} is not a command: its frontmatter says user-invocable: false "
            "(the model may still load it)", skill=skill, path=ENTRY)
    if words is None:
        words = dialect.split_arguments(args or "")
    body, taken = dialect.substitute(body, args, words, names=host.arguments,
                                     skill_dir=str(candidate.directory))
    return command_message(body, candidate.path, None if taken else args)


# Drift: every indexed file hashed again, the skill directories listed again.

def verify(candidates: Sequence[Candidate],
           manifests: Mapping[int, Sequence[ManifestFile]], limits: Limits) -> VerifyReport:
    """Hash every indexed file again and list what changed, vanished or appeared."""
    drift: list[DriftItem] = []
    files = 0
    for candidate in candidates:
        name = candidate.name or candidate.directory.name
        manifest = manifests.get(candidate.id, ())
        files += len(manifest)
        try:
            drift.extend(_skill_drift(candidate, name, manifest, limits))
        except Exception as exc:  # the barrier: this skill is reported, the others verified
            drift.append(DriftItem(name, "", Drift.CHANGED, candidate.directory,
                                   f"could not be verified: {describe(exc)}"))
    return VerifyReport(skills=len(candidates), files=files, drift=tuple(drift))


def _skill_drift(candidate: Candidate, name: str, manifest: Sequence[ManifestFile],
                 limits: Limits) -> list[DriftItem]:
    return on_disk(candidate, name, manifest, limits)[0]


def on_disk(candidate: Candidate, name: str, manifest: Sequence[ManifestFile],
            limits: Limits) -> tuple[list[DriftItem], list[Finding]]:
    """One skill's drift from its manifest, every file hashed again, and what its directory
    now holds that a manifest leaves out (skilldir.LEFT_OUT)."""
    drift = []
    for entry in manifest:
        problem = _drift(candidate.real_path, entry, skill=name)
        if problem is not None:
            drift.append(DriftItem(name, entry.rel_path, problem,
                                   candidate.directory / entry.rel_path))
    try:
        present, left_out = skill_listing(candidate.real_path, limits)
    except OSError:
        # The directory is gone or unreadable: its files are already missing.
        return drift, []
    known = {entry.rel_path for entry in manifest}
    drift.extend(DriftItem(name, rel, Drift.UNEXPECTED, candidate.directory / rel)
                 for rel in sorted(present - known))
    return drift, left_out


def _drift(real_dir: Path, entry: ManifestFile, *, skill: str) -> Drift | None:
    try:
        path = contain(real_dir, entry.rel_path, skill=skill)
        fd, st = open_contained(os.path.normpath(real_dir), path, entry, skill=skill,
                                rel_path=entry.rel_path)
    except DeletedFileError:
        return Drift.MISSING
    except (PathRefusedError, FileReadError):  # now a symlink, special, or unreadable
        return Drift.CHANGED
    known = entry.stat
    moved = st.st_size != entry.size or (
        entry.mode is not None and hashing.executable(st.st_mode) != hashing.executable(entry.mode))
    if moved or entry.sha256 is None:
        # A file recorded by its stat alone (over the limit) is compared by its change key.
        os.close(fd)
        rewritten = known is not None and hashing.file_stat(st).unread_key() != known.unread_key()
        return Drift.CHANGED if moved or rewritten else None
    try:
        read = hashing.read_open(fd, st, keep_limit=-1)
    except OSError:
        return Drift.CHANGED
    if (read.stat.size, read.xxh3, read.sha256) != (entry.size, entry.xxh3, entry.sha256):
        return Drift.CHANGED
    return None
