"""Lists one skill directory and reads what changed, through descriptors beneath it."""

from __future__ import annotations

import errno
import operator
import os
import stat as stat_module
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from skillindex.index.barrier import internal_error
from skillindex.index.dialect import CODEX_SIDECAR
from skillindex.index.hashing import SkillDir, SpecialFileError, file_stat, same_file_version
from skillindex.model import (
    FileStat,
    Finding,
    KnownFile,
    KnownSkill,
    Limits,
    ResourceEntry,
    ResourceKind,
    Severity,
)
from skillindex.text import is_text, shown_name

ENTRY = "SKILL.md"
# SKILL.md is read whole into memory to parse it; anything larger is refused by its size.
MAX_ENTRY_BYTES = 1 << 20
MAX_RESOURCE_DEPTH = 16
_KINDS = {"references": ResourceKind.REFERENCE, "scripts": ResourceKind.SCRIPT,
          "assets": ResourceKind.ASSET}
# The only folder of a skill that is not part of it: a repository's own records (its objects
# change with every fetch, its sample hooks are executables), skipped as the lock file skips it.
# Every other entry, hidden or not, is listed, hashed, judged and bound by an approval.
NOT_OF_THE_SKILL = ".git"
# The walk's findings for what a skill holds but its manifest leaves out (a link out of it, a
# name that is not UTF-8, a FIFO or device, what could not be read, what lies too deep): no
# hash binds them, so an approval is refused while one is there and revoked when one appears.
LEFT_OUT = ("name-not-utf8", "special-file", "symlink-escape", "too-many-files", "unreadable")


# The stored manifest of a changed skill, fetched only for skills that changed.
FileLookup = Callable[[int], Mapping[str, KnownFile]]


@dataclass(slots=True)
class SkillScan:
    """One skill directory as found now; `entry_data` is set only when it had to be read."""

    rel_dir: str
    directory: str
    real_dir: str
    known: KnownSkill | None
    tree_key: str = ""
    unchanged: bool = False
    entry_stat: FileStat | None = None
    entry_data: bytes | None = None
    entry_xxh3: str | None = None
    entry_sha256: str | None = None
    entry_problem: Finding | None = None
    # The Codex sidecar's bytes (read with SKILL.md whenever the skill is judged), if it has one.
    sidecar_data: bytes | None = None
    resources: list[ResourceEntry] = field(default_factory=list)
    walk_findings: list[Finding] = field(default_factory=list)
    files_read: int = 0
    # Judged again although every file is the one stored (the rules changed, or a timestamp).
    same_content: bool = False

    @property
    def dir_name(self) -> str:
        return os.path.basename(self.directory)


def resource_kind(rel_path: str) -> ResourceKind:
    if rel_path == ENTRY:
        return ResourceKind.ENTRY
    return _KINDS.get(rel_path.split("/", 1)[0], ResourceKind.OTHER)


def realpath(path: str) -> str | None:
    """The real path, or None when a link changed while it was being resolved (EINVAL) or the
    chain of links is too long to follow."""
    try:
        return os.path.realpath(path)
    except (OSError, RecursionError):
        return None


by_name = operator.attrgetter("name")


def list_dir(path: str) -> list[os.DirEntry[str]]:
    # Inside a skill the order does not matter (its key sorts what it digests); sorting every
    # directory would cost more than listing it.
    with os.scandir(path) as iterator:
        return list(iterator)


def sorted_entries(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as iterator:
        entries = list(iterator)
    entries.sort(key=by_name)
    return entries


def is_inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


@dataclass(slots=True)
class _Listing:
    # rel (as the manifest names it), where it is opened from (beneath the skill), stat
    files: list[tuple[str, str, os.stat_result]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    entry_stat: os.stat_result | None = None
    entry_problem: Finding | None = None
    too_many: bool = False
    total_bytes: int = 0

    def key(self, rules_key: str) -> str:
        """A digest of everything that decides the stored record: stats, findings, rules."""
        entry = self.entry_stat
        parts = [rules_key, "" if entry is None else _stat_text(ENTRY, entry),
                 "" if self.entry_problem is None else self.entry_problem.message]
        parts.extend(sorted([_stat_text(rel, st) for rel, _path, st in self.files]))
        parts.extend(sorted(finding.message for finding in self.findings))
        return xxhash.xxh3_128_hexdigest("\n".join(parts).encode("utf-8", "surrogateescape"))


def _stat_text(rel: str, st: os.stat_result) -> str:
    # The mode is in the key so that a chmod (which keeps mtime) is noticed too; the ctime so
    # that a rewrite of the same size with its mtime set back is noticed.
    return (f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0"
            f"{st.st_dev}\0{st.st_mode}")


def _warn(code: str, message: str, path: str | None = None) -> Finding:
    return Finding(code, Severity.WARNING, message, path)


def _hard_link(rel_path: str) -> Finding:
    return _warn("hard-link", f"{rel_path} has more than one link (it may be a file outside the "
                 "skill); not disclosed unless the root allows hard links", rel_path)


def _list_skill(top: str, entries: list[os.DirEntry[str]], limits: Limits) -> _Listing:
    # Run for every skill of every reindex, changed or not: the common case (a regular file
    # that is not a link) takes the fewest steps, and files are appended here, not by a call.
    listing = _Listing()
    files = listing.files
    visited = {top}
    # (rel as listed, real path, whether real is top + rel, entries)
    stack: list[tuple[str, str, bool, list[os.DirEntry[str]]]] = [("", top, True, entries)]
    prefix = len(top.rstrip("/")) + 1
    most = limits.max_skill_files - 2  # beside the file at hand and SKILL.md
    largest = limits.max_file_bytes
    regular = stat_module.S_ISREG
    while stack:
        rel, real, aligned, current = stack.pop()
        for entry in current:
            name = entry.name
            if not rel and name == ENTRY:
                _entry_stat(entry, listing)
                continue
            rel_path = f"{rel}{name}"
            if not (name.isascii() or is_text(name)):
                listing.findings.append(_warn(
                    "name-not-utf8", f"{shown_name(rel_path)}: the name is not UTF-8; "
                    "left out of the manifest"))
                continue
            try:
                linked = entry.is_symlink()
                if not linked and entry.is_dir(follow_symlinks=False):
                    # The directory's own type from the listing: no stat, it is not in the key.
                    if name == NOT_OF_THE_SKILL:
                        continue
                    _descend(listing, stack, visited, rel_path, f"{real}/{name}", aligned)
                    continue
                st = entry.stat()
            except OSError as exc:
                listing.findings.append(_warn(
                    "unreadable", f"{rel_path}: {exc.strerror or exc} (left out of the manifest)",
                    rel_path))
                continue
            target = realpath(entry.path) if linked else None
            if linked and (target is None or not is_inside(target, top)):
                listing.findings.append(_warn(
                    "symlink-escape", f"{rel_path} links outside the skill; left out", rel_path))
                continue
            if not regular(st.st_mode):
                if stat_module.S_ISDIR(st.st_mode):  # a link to one (or one since listed)
                    if name == NOT_OF_THE_SKILL:
                        continue
                    _descend(listing, stack, visited, rel_path, target or f"{real}/{name}",
                             aligned and target is None)
                else:
                    listing.findings.append(_warn(
                        "special-file", f"{rel_path} is not a regular file; never opened",
                        rel_path))
                continue
            # Where it is opened from, beneath the skill: its path, unless a link led here.
            beneath = (rel_path if aligned else f"{real}/{name}"[prefix:]) if target is None \
                else target[prefix:]
            if len(files) > most:
                # One file past the limit proves the skill too large: list no further.
                listing.too_many = True
                return listing
            files.append((rel_path, beneath, st))
            listing.total_bytes += st.st_size
            if st.st_nlink > 1:
                listing.findings.append(_hard_link(rel_path))
            if st.st_size > largest:
                listing.findings.append(_too_large_file(rel_path, st.st_size, largest))
    return listing


def _too_large_file(rel_path: str, size: int, largest: int) -> Finding:
    return _warn("file-too-large", f"{rel_path} is {size} bytes; the limit is {largest}: "
                 "recorded by its size and stat, never read or disclosed", rel_path)


def permissions(st: os.stat_result) -> int:
    """The mode bits an approval covers (the file's type aside)."""
    return stat_module.S_IMODE(st.st_mode)


def _descend(listing: _Listing, stack: list[tuple[str, str, bool, list[os.DirEntry[str]]]],
             visited: set[str], rel_path: str, real: str, aligned: bool) -> None:
    if real in visited:
        listing.findings.append(_warn(
            "symlink-loop", f"{rel_path} links to a directory already walked; not followed"))
        return
    if rel_path.count("/") + 1 >= MAX_RESOURCE_DEPTH:
        listing.findings.append(_warn(
            "too-many-files", f"{rel_path}: deeper than {MAX_RESOURCE_DEPTH} levels; left out"))
        return
    visited.add(real)
    try:
        stack.append((f"{rel_path}/", real, aligned, list_dir(real)))
    except OSError as exc:
        listing.findings.append(_warn(
            "unreadable", f"{rel_path}/: cannot list directory: {exc.strerror}"))


def _entry_stat(entry: os.DirEntry[str], listing: _Listing) -> None:
    try:
        if entry.is_symlink():
            listing.entry_problem = Finding("entry-symlink", Severity.ERROR,
                                            "SKILL.md is a symlink; it must be a regular file")
            return
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        listing.entry_problem = Finding("unreadable", Severity.ERROR,
                                        f"cannot stat SKILL.md: {exc.strerror}")
        return
    if not stat_module.S_ISREG(st.st_mode):
        listing.entry_problem = Finding("unreadable", Severity.ERROR,
                                        "SKILL.md is not a regular file; never opened")
        return
    listing.entry_stat = st
    listing.total_bytes += st.st_size
    if st.st_nlink > 1:
        listing.findings.append(_hard_link(ENTRY))
    if st.st_size > MAX_ENTRY_BYTES:  # judged by its size alone: never read
        listing.entry_problem = Finding(
            "file-too-large", Severity.ERROR,
            f"SKILL.md is {st.st_size} bytes; the limit is {MAX_ENTRY_BYTES}")


def _too_large(listing: _Listing, limits: Limits) -> Finding | None:
    if listing.too_many:
        detail = f"more than {limits.max_skill_files} files"
    elif listing.total_bytes > limits.max_skill_bytes:
        detail = f"{listing.total_bytes} bytes in all; the limit is {limits.max_skill_bytes}"
    else:
        return None
    return Finding("skill-too-large", Severity.ERROR,
                   f"the skill holds {detail}: recorded, never read")


def _limits_key(rules_key: str, limits: Limits) -> str:
    return (f"{rules_key}:{limits.max_file_bytes}:{limits.max_skill_files}:"
            f"{limits.max_skill_bytes}")


def scan_skill(rel_dir: str, directory: str, real_dir: str, entries: list[os.DirEntry[str]],
               known: KnownSkill | None, rules_key: str, lookup: FileLookup,
               limits: Limits) -> SkillScan:
    listing = _list_skill(real_dir, entries, limits)
    too_large = _too_large(listing, limits)
    if too_large is not None:
        if listing.entry_problem is None:
            listing.entry_problem = too_large
        else:
            listing.findings.append(too_large)
    tree_key = listing.key(_limits_key(rules_key, limits))
    scan = SkillScan(rel_dir, directory, real_dir, known, tree_key,
                     entry_problem=listing.entry_problem, walk_findings=listing.findings)
    if known is not None and known.tree_key == tree_key:
        scan.unchanged = True
        return scan
    if too_large is not None:
        _record_unread(scan, listing)
        return scan
    previous = lookup(known.candidate_id) if known is not None else {}
    try:
        skill = SkillDir(real_dir)
    except OSError as exc:
        scan.entry_problem = Finding("unreadable", Severity.ERROR,
                                     f"cannot open the skill directory: {exc.strerror or exc}")
        scan.tree_key = unsettled(tree_key)
        return scan
    with skill:
        settled = _read_files(scan, skill, listing, previous, limits)
    if known is not None and len(scan.resources) == len(previous):
        stored = {rel: (old.xxh3, old.sha256) for rel, old in previous.items()}
        scan.same_content = all(stored.get(r.rel_path) == (r.xxh3, r.sha256)
                                for r in scan.resources)
    if not settled:
        # What was read is not what was listed (it changed meanwhile): the next reindex must
        # not take this record for current.
        scan.tree_key = unsettled(tree_key)
    return scan


def unsettled(tree_key: str) -> str:
    """A key no listing computes: the skill is read and judged again at the next reindex."""
    return xxhash.xxh3_128_hexdigest(f"unsettled\0{tree_key}".encode("utf-8", "surrogatepass"))


def failed_scan(rel_dir: str, directory: str, real_dir: str, known: KnownSkill | None,
                exc: Exception) -> SkillScan:
    """A skill whose listing or reading failed in a way no rule foresaw: rejected with the
    failure, and scanned again at the next reindex."""
    return SkillScan(rel_dir, directory, real_dir, known, unsettled(f"failed\0{rel_dir}"),
                     entry_problem=internal_error(exc, "reading the skill"))


def _record_unread(scan: SkillScan, listing: _Listing) -> None:
    """A skill over the limits: its files are recorded by their stats alone, nothing is read."""
    if listing.entry_stat is not None:
        scan.entry_stat = file_stat(listing.entry_stat)
        scan.resources.append(ResourceEntry(ENTRY, ResourceKind.ENTRY, scan.entry_stat, None,
                                            None, mode=permissions(listing.entry_stat)))
    scan.resources.extend(ResourceEntry(rel, resource_kind(rel), file_stat(st), None, None,
                                        mode=permissions(st))
                          for rel, _beneath, st in listing.files)


def _read_files(scan: SkillScan, skill: SkillDir, listing: _Listing,
                previous: Mapping[str, KnownFile], limits: Limits) -> bool:
    """Read what changed, each file through a descriptor beneath the skill, and record what the
    descriptor's fstat says; False when anything differed from the listing."""
    # The risk rules (patterns, a matcher) are imported by what reads files, not by the one-shot
    # commands that import this module for its listing and path helpers.
    from skillindex.index import risk  # noqa: PLC0415

    settled = True
    if listing.entry_stat is not None:
        settled = _read_entry(scan, skill, listing.entry_stat)
    for rel_path, beneath, st in listing.files:
        old = previous.get(rel_path)
        # The sidecar is judged with SKILL.md, so it is read whenever SKILL.md is judged.
        if (old is not None and old.stat == file_stat(st) and risk.current(old.risks)
                and rel_path != CODEX_SIDECAR):
            scan.resources.append(ResourceEntry(rel_path, resource_kind(rel_path), old.stat,
                                                old.xxh3, old.sha256, old.risks,
                                                permissions(st)))
            continue
        if st.st_size > limits.max_file_bytes:
            # Never read: known by its change key (the stat the row keeps), judged by its mode.
            scan.resources.append(ResourceEntry(
                rel_path, resource_kind(rel_path), file_stat(st), None, None,
                risk.record(risk.judge_file(rel_path, None, st.st_mode)), permissions(st)))
            continue
        try:
            read = skill.read(beneath, keep_limit=risk.TEXT_LIMIT)
        except SpecialFileError:
            scan.walk_findings.append(_warn(
                "special-file", f"{rel_path} is not a regular file; never opened", rel_path))
            settled = False
            continue
        except OSError as exc:
            reason = ("it became a symlink during the scan" if exc.errno == errno.ELOOP
                      else exc.strerror or str(exc))
            scan.walk_findings.append(_warn(
                "unreadable", f"{rel_path}: {reason} (left out of the manifest)", rel_path))
            settled = False
            continue
        scan.files_read += 1
        settled = settled and same_file_version(read.raw, st)
        if read.raw.st_size > limits.max_file_bytes:
            scan.resources.append(ResourceEntry(rel_path, resource_kind(rel_path), read.stat,
                                                None, None, mode=permissions(read.raw)))
            continue
        judged = risk.record(risk.judge_file(rel_path, read.data, read.raw.st_mode))
        if rel_path == CODEX_SIDECAR:
            scan.sidecar_data = read.data
        scan.resources.append(ResourceEntry(rel_path, resource_kind(rel_path), read.stat,
                                            read.xxh3, read.sha256, judged,
                                            permissions(read.raw)))
    return settled


def _read_entry(scan: SkillScan, skill: SkillDir, listed: os.stat_result) -> bool:
    from skillindex.index import risk  # noqa: PLC0415 (see _read_files)

    scan.entry_stat = file_stat(listed)
    if scan.entry_problem is not None:  # too large: recorded by its stat
        scan.resources.append(ResourceEntry(ENTRY, ResourceKind.ENTRY, scan.entry_stat, None,
                                            None, mode=permissions(listed)))
        return True
    try:
        read = skill.read(ENTRY, keep_limit=MAX_ENTRY_BYTES)
    except SpecialFileError:
        scan.entry_problem = Finding("unreadable", Severity.ERROR,
                                     "SKILL.md is not a regular file; never opened")
        return False
    except OSError as exc:
        code = "entry-symlink" if exc.errno == errno.ELOOP else "unreadable"
        scan.entry_problem = Finding(code, Severity.ERROR,
                                     f"cannot read SKILL.md: {exc.strerror or exc}")
        return False
    scan.files_read += 1
    scan.entry_stat = read.stat
    scan.entry_xxh3, scan.entry_sha256 = read.xxh3, read.sha256
    scan.resources.append(ResourceEntry(ENTRY, ResourceKind.ENTRY, read.stat, read.xxh3,
                                        read.sha256,
                                        risk.record(risk.judge_file(ENTRY, read.data,
                                                                    read.raw.st_mode)),
                                        permissions(read.raw)))
    if read.data is None:  # it grew after it was listed
        scan.entry_problem = Finding(
            "file-too-large", Severity.ERROR,
            f"SKILL.md is {read.stat.size} bytes; the limit is {MAX_ENTRY_BYTES}")
        return False
    scan.entry_data = read.data
    return same_file_version(read.raw, listed)


def skill_files(real_dir: Path, limits: Limits) -> set[str]:
    """The relative paths a reindex would put in this skill's manifest now (stats, no reads).

    Raises OSError when the directory cannot be listed.
    """
    return skill_listing(real_dir, limits)[0]


def skill_listing(real_dir: Path, limits: Limits) -> tuple[set[str], list[Finding]]:
    """`skill_files`, and the findings of what the listing left out of the manifest now
    (codes in LEFT_OUT): what no manifest digest can bind."""
    listing = _list_skill(str(real_dir), sorted_entries(str(real_dir)), limits)
    files = {rel for rel, _path, _stat in listing.files}
    if listing.entry_stat is not None:
        files.add(ENTRY)
    return files, [f for f in listing.findings if f.code in LEFT_OUT]
