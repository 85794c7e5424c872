"""Lock files in the `skills` CLI's version-1 format: the folder hash, writing and comparing."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillindex import inputs
from skillindex.errors import ConfigError, FileReadError
from skillindex.text import is_text, shown_name

VERSION = 1
FILE_NAME = "skills-lock.json"
# A lock entry's signer when the skill holds no signature, or one that did not verify.
UNSIGNED, UNVERIFIED = "unsigned", "unverified"
# Folders the `skills` CLI leaves out of a skill's hash, at any depth.
SKIPPED_DIRS = frozenset({".git", "node_modules"})

# Without ICU, an approximation of `localeCompare` in ICU's root collation: the printable
# ASCII characters order so: punctuation and symbols, digits, then letters with case set
# aside. Read off node's own sort of the 95 characters; tests/test_lockfile.py checks it.
_ASCII_PRIMARY = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY = {char: weight for weight, char in enumerate(_ASCII_PRIMARY)}
_LETTERS_END = len(_PRIMARY)
# The order of accents at the second level (a letter without one comes first), also read
# off node: combining marks by code point, and "stroke" for the letters drawn with one.
_MARK_ORDER = (  # noqa: SIM905 - 119 quoted codes read worse
    "34f 332 313 343 314 301 341 300 340 306 302 30c 30a 342 308 344 30b 303 307 338 "
    "stroke 327 328 304 30d 30e 312 315 31a 33d 33e 33f 346 34a 34b 34c 350 351 352 357 "
    "35b 35d 35e 316 317 318 319 31c 31d 31e 31f 320 329 32a 32b 32c 32f 333 33a 33b 33c "
    "347 348 349 34d 34e 353 354 355 356 359 35a 35c 35f 362 336 337 335 305 309 30f 310 "
    "311 31b 321 322 323 324 325 326 32d 32e 330 331 334 339 345 358 360 361 363 368 369 "
    "364 36a 365 36b 366 36c 36d 367 36e 36f"
).split()
_MARK = {(chr(int(code, 16)) if code != "stroke" else code): rank + 1
         for rank, code in enumerate(_MARK_ORDER)}
# Letters the collation spells as others (with a mark, or at the third level only).
_MARK["ligature"] = len(_MARK) + 1
_SPELLED = {"ß": ("ss", "ligature"), "æ": ("ae", "ligature"), "œ": ("oe", "ligature"),
            "ø": ("o", "stroke"),
            "đ": ("d", "stroke"), "ł": ("l", "stroke"), "ħ": ("h", "stroke")}

Key = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _primary(char: str) -> int:
    weight = _PRIMARY.get(char)
    if weight is not None:
        return weight
    # Other scripts follow Latin in the root collation; code point order among them is the
    # approximation (exact for the Latin letters and accents that real skill paths use).
    return _LETTERS_END + ord(char)


def fallback_key(text: str) -> Key:
    """A sort key close to JavaScript's `localeCompare` in ICU's root collation, for when ICU
    is not installed: exact for ASCII and the accented Latin letters of real skill paths.

    Base letters first (case and accents aside), then accents, then case (lower before upper),
    as the Unicode collation algorithm compares them.
    """
    primary: list[int] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    for char in unicodedata.normalize("NFD", text):
        mark = _MARK.get(char) if unicodedata.combining(char) else None
        if mark is not None and primary:
            secondary[-1] = secondary[-1] * 256 + mark
            continue
        lower = char.lower()
        case = 0 if char == lower else 1
        spelled, stroke = _SPELLED.get(lower, (lower, None))
        for index, letter in enumerate(spelled):
            primary.append(_primary(letter))
            secondary.append(_MARK[stroke] if stroke and index == 0 else 0)
            tertiary.append(case)
    return tuple(primary), tuple(secondary), tuple(tertiary)


# ICU's default locale when the environment names none that collates (LANG=C): V8 makes it
# en-US for `localeCompare`, where ICU's own en_US_POSIX would order by code point.
_POSIX_LOCALES = frozenset({"en_us_posix", "c", "posix"})


@functools.cache
def collation_key() -> Callable[[str], Any]:
    """The sort key of `localeCompare` as node computes it: ICU's collator for ICU's default
    locale (from LC_ALL, LC_MESSAGES or LANG, as node reads it) when PyICU is installed (the
    `icu` extra), else `fallback_key`."""
    try:
        import icu  # noqa: PLC0415 - optional, and large: loaded on the first lock only
    except ImportError:
        return fallback_key
    locale = icu.Locale.getDefault()
    if locale.getName().lower() in _POSIX_LOCALES:
        locale = icu.Locale("en_US")
    collator = icu.Collator.createInstance(locale)
    # As V8 sets it: canonically equivalent text compares equal whatever the order of its
    # combining marks.
    collator.setAttribute(icu.UCollAttribute.NORMALIZATION_MODE, icu.UCollAttributeValue.ON)
    key: Callable[[str], bytes] = collator.getSortKey
    return key


def _js_key_order(key: str) -> bytes:
    # JavaScript's default `sort()` compares UTF-16 code units.
    return key.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Unhashed:
    """A skill whose folder cannot be hashed as the `skills` CLI hashes it, and why."""

    skill: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"skill": self.skill, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One skill of a lock file: where it came from and the hash of its folder."""

    source: str
    source_type: str
    computed_hash: str
    # Who signed it (index/signing.py's signer), `unsigned`, or `unverified`; None in a lock
    # written before signers were pinned (then nothing is compared).
    signer: str | None = None

    def as_json(self) -> dict[str, str]:
        found = {"source": self.source, "sourceType": self.source_type,
                 "computedHash": self.computed_hash}
        return found if self.signer is None else found | {"signer": self.signer}


def folder_files(skill_dir: Path, *, max_bytes: int) -> list[tuple[str, bytes]]:
    """Every regular file of a skill folder as the `skills` CLI hashes it, in its order.

    Walked as the CLI walks it, so that paths `localeCompare` finds equal keep its order too:
    depth first, each folder's entries in byte order (node's `readdir` sorts them so), a
    folder's files listed where the folder is met. Symbolic links are neither followed nor
    hashed (the CLI's `readdir` reports them as neither file nor folder), `.git` and
    `node_modules` folders are skipped, hidden files are kept.
    """
    found: list[tuple[str, bytes]] = []
    total = 0
    pending = [_listing(skill_dir, "")]
    while pending:
        entry, rel = next(pending[-1], (None, ""))
        if entry is None:
            pending.pop()
        elif entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIPPED_DIRS:
                pending.append(_listing(Path(entry.path), rel + "/"))
        elif entry.is_file(follow_symlinks=False):
            if not is_text(rel):
                raise FileReadError(f"{shown_name(entry.path)}: a file name that is not UTF-8 "
                                    "cannot be hashed as the skills CLI hashes it",
                                    path=shown_name(entry.path))
            data = _read_regular(Path(entry.path), max_bytes=max_bytes - total)
            total += len(data)
            found.append((rel, data))
    found.sort(key=lambda item: collation_key()(item[0]))
    return found


def _listing(folder: Path, prefix: str) -> Iterator[tuple[os.DirEntry[str], str]]:
    with os.scandir(folder) as entries:
        ordered = sorted(entries, key=lambda entry: os.fsencode(entry.name))
    return ((entry, prefix + entry.name) for entry in ordered)


def _read_regular(path: Path, *, max_bytes: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise FileReadError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FileReadError(f"{path} is not a regular file", path=str(path))
        if info.st_size > max_bytes:
            raise FileReadError(f"{path}: the skill is larger than the lock file's limit",
                                path=str(path))
        return handle.read(max_bytes + 1)


def computed_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """The `skills` CLI's `computedHash`: sha256 over each relative path, then its bytes."""
    digest = hashlib.sha256()
    for rel, data in files:
        digest.update(rel.encode("utf-8"))
        digest.update(data)
    return digest.hexdigest()


def render(entries: Mapping[str, LockEntry]) -> str:
    """The lock file's text, byte for byte as the CLI writes it (sorted keys, two spaces)."""
    return "".join(chunks(entries))


def chunks(entries: Mapping[str, LockEntry], *, per_chunk: int = 1_000) -> Iterator[str]:
    """`render`'s text a thousand entries at a time, so a lock of 100,000 skills is written
    without its whole text in memory: what `json.dumps(..., indent=2, ensure_ascii=False)`
    prints, written an entry at a time."""
    quoted = functools.partial(json.dumps, ensure_ascii=False)
    names = sorted(entries, key=_js_key_order)
    if not names:
        yield f'{{\n  "version": {VERSION},\n  "skills": {{}}\n}}\n'
        return
    yield f'{{\n  "version": {VERSION},\n  "skills": {{\n'
    for start in range(0, len(names), per_chunk):
        parts = []
        for name in names[start:start + per_chunk]:
            entry = entries[name]
            parts.append(f"    {quoted(name)}: {{\n"
                         f"      \"source\": {quoted(entry.source)},\n"
                         f"      \"sourceType\": {quoted(entry.source_type)},\n"
                         f"      \"computedHash\": {quoted(entry.computed_hash)}"
                         + ("" if entry.signer is None
                            else f",\n      \"signer\": {quoted(entry.signer)}")
                         + "\n    }")
        yield (",\n" if start else "") + ",\n".join(parts)
    yield "\n  }\n}\n"


def parse(text: str, *, source: str) -> dict[str, LockEntry]:
    """The entries of a lock file; a file that is not one is a ConfigError naming it."""
    try:
        # Entries become LockEntry values as they are decoded, not dictionaries first: a lock
        # of 100,000 skills is held once.
        document = inputs.load_json(text, what="lock file", source=source,
                                    object_hook=_entry_of)
    except inputs.InputError as exc:
        raise ConfigError(f"not a lock file: {exc.reason}", source=source) from exc
    if not isinstance(document, dict) or not isinstance(document.get("skills"), dict):
        raise ConfigError('not a lock file: no "skills" object', source=source)
    version = document.get("version")
    if version != VERSION:
        raise ConfigError(f"lock file version {version!r}; this reads version {VERSION}",
                          source=source)
    entries: dict[str, LockEntry] = document["skills"]
    for name, entry in entries.items():
        if not isinstance(entry, LockEntry):
            raise ConfigError(f"skill {name!r} has no computedHash", source=source)
    return entries


def _entry_of(decoded: dict[str, Any]) -> Any:
    """A decoded JSON object with a `computedHash` string as the entry it is, else as is."""
    digest = decoded.get("computedHash")
    if not isinstance(digest, str):
        return decoded
    signer = decoded.get("signer")
    return LockEntry(str(decoded.get("source", "")), str(decoded.get("sourceType", "")), digest,
                     signer if isinstance(signer, str) else None)


@dataclass(frozen=True, slots=True)
class LockDrift:
    """One difference between a lock file and the skills the index serves."""

    skill: str
    problem: str  # added | removed | changed | unhashed | signer
    locked: str | None
    current: str | None

    reason: str | None = None  # why an `unhashed` skill could not be hashed; a signer change

    def as_dict(self) -> dict[str, object]:
        return {"skill": self.skill, "problem": self.problem, "locked": self.locked,
                "current": self.current, "reason": self.reason}


def compare(locked: Mapping[str, LockEntry],
            current: Iterable[tuple[str, LockEntry | Unhashed]]) -> list[LockDrift]:
    """Skills added since the lock was written, removed from it, whose folder changed, or
    whose folder could not be hashed (`unhashed`, with the reason: the others are still
    compared).

    `current` is (name, entry) pairs as they are hashed: only the drift and the names seen
    are kept."""
    drift: list[LockDrift] = []
    seen: set[str] = set()
    for name, entry in current:
        seen.add(name)
        old = locked.get(name)
        if isinstance(entry, Unhashed):
            drift.append(LockDrift(name, "unhashed", None if old is None else old.computed_hash,
                                   None, entry.reason))
        elif old is None:
            drift.append(LockDrift(name, "added", None, entry.computed_hash))
        else:
            if old.computed_hash != entry.computed_hash:
                drift.append(LockDrift(name, "changed", old.computed_hash, entry.computed_hash))
            if old.signer is not None and entry.signer != old.signer:
                drift.append(LockDrift(name, "signer", old.signer, entry.signer,
                                       _signer_change(old.signer, entry.signer)))
    drift += [LockDrift(name, "removed", locked[name].computed_hash, None)
              for name in locked if name not in seen]
    return sorted(drift, key=lambda item: (item.skill, item.problem))


def _signer_change(locked: str, current: str | None) -> str:
    if current in (UNSIGNED, None):
        return f"signed by {locked} when locked, unsigned now"
    if current == UNVERIFIED:
        return f"signed by {locked} when locked; its signature does not verify now"
    return f"signer changed from {locked} to {current}"


def entry_for(skill_dir: Path, *, cwd: Path, previous: LockEntry | None,
              max_bytes: int, signer: str | None = None) -> LockEntry:
    """A skill's lock entry now: its folder hashed, its signer; where it came from kept from
    the old lock."""
    digest = computed_hash(folder_files(skill_dir, max_bytes=max_bytes))
    if previous is not None:
        return LockEntry(previous.source, previous.source_type, digest, signer)
    try:
        source = skill_dir.relative_to(cwd).as_posix()
    except ValueError:
        source = str(skill_dir)
    return LockEntry(source, "local", digest, signer)


def read(path: Path) -> dict[str, LockEntry]:
    """The entries of the lock file at `path`; a missing or broken file is a ConfigError."""
    try:
        text, _ = inputs.read_text(path, max_bytes=inputs.MAX_LOCK_BYTES, what="lock file")
    except FileNotFoundError as exc:
        raise ConfigError(f"cannot read the lock file: {exc.strerror}",
                          source=str(path)) from exc
    return parse(text, source=str(path))
