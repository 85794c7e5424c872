"""Walks roots and skill directories: stats every file, reads and hashes only what changed."""

from __future__ import annotations

import errno
import operator
import os
import stat as stat_module
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from skillindex.index import risk
from skillindex.index.hashing import SpecialFileError, file_stat, read_file
from skillindex.model import (
    FileStat,
    Finding,
    ResourceEntry,
    ResourceKind,
    RootSpec,
    ScanProblem,
    Severity,
)

ENTRY = "SKILL.md"
# SKILL.md is read whole into memory to parse it; anything larger is refused, not read.
MAX_ENTRY_BYTES = 1 << 20
MAX_FILES_PER_SKILL = 10_000
MAX_RESOURCE_DEPTH = 16
_KINDS = {"references": ResourceKind.REFERENCE, "scripts": ResourceKind.SCRIPT,
          "assets": ResourceKind.ASSET}


@dataclass(frozen=True, slots=True)
class KnownFile:
    stat: FileStat
    xxh3: str
    sha256: str
    risks: str | None = None


@dataclass(frozen=True, slots=True)
class KnownSkill:
    """A skill as the last reindex stored it; `tree_key` tells whether anything changed."""

    candidate_id: int
    tree_key: str
    rejected: bool = False


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
    resources: list[ResourceEntry] = field(default_factory=list)
    walk_findings: list[Finding] = field(default_factory=list)
    files_read: int = 0
    # Judged again although every file is the one stored (the rules changed, or a timestamp).
    same_content: bool = False

    @property
    def dir_name(self) -> str:
        return os.path.basename(self.directory)


@dataclass(slots=True)
class RootScan:
    spec: RootSpec
    present: bool = True
    problems: list[ScanProblem] = field(default_factory=list)


def resource_kind(rel_path: str) -> ResourceKind:
    if rel_path == ENTRY:
        return ResourceKind.ENTRY
    return _KINDS.get(rel_path.split("/", 1)[0], ResourceKind.OTHER)


_by_name = operator.attrgetter("name")


def _entries(path: str) -> list[os.DirEntry[str]]:
    # Inside a skill the order does not matter (its key sorts what it digests); sorting every
    # directory would cost more than listing it.
    with os.scandir(path) as iterator:
        return list(iterator)


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as iterator:
        entries = list(iterator)
    entries.sort(key=_by_name)
    return entries


def _is_inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def estimate_skills(root: Path) -> int:
    """The folders one level under a root that a walk would look into: a progress total for a
    root never indexed (one listing, no stat of what is inside)."""
    try:
        with os.scandir(root) as entries:
            return sum(1 for e in entries if not e.name.startswith(".") and _is_dir(e))
    except OSError:
        return 0


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def scan_root(spec: RootSpec, result: RootScan, known: Mapping[str, KnownSkill],
              rules_key: str, lookup: FileLookup,
              only: Collection[str] | None = None) -> Iterator[SkillScan]:
    """Yield every skill directory under the root (only under the entries named in `only`,
    when given); problems and presence land in `result`."""
    root = str(spec.path)
    try:
        entries = _sorted_entries(root)
    except FileNotFoundError:
        result.present = False
        return
    except NotADirectoryError:
        result.present = False
        result.problems.append(ScanProblem(spec.path, spec.path, "not-a-directory",
                                           "root is not a directory"))
        return
    except OSError as exc:
        result.problems.append(ScanProblem(spec.path, spec.path, "unreadable",
                                           f"cannot list the root: {exc.strerror}"))
        return
    if only is not None:
        entries = [entry for entry in entries if entry.name in only]
    real_root = os.path.realpath(root)
    walk = _RootWalk(spec, result, known, rules_key, lookup)
    yield from walk.directory(entries, "", real_root, 1, [real_root])


@dataclass(slots=True)
class _RootWalk:
    spec: RootSpec
    result: RootScan
    known: Mapping[str, KnownSkill]
    rules_key: str
    lookup: FileLookup

    def directory(self, entries: list[os.DirEntry[str]], rel: str, real_dir: str, depth: int,
                  ancestors: list[str]) -> Iterator[SkillScan]:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if not entry.is_dir():
                    continue
                linked = entry.is_symlink()
            except OSError:
                continue
            child_real = (os.path.realpath(entry.path) if linked
                          else f"{real_dir.rstrip('/')}/{entry.name}")
            if linked and any(_is_inside(ancestor, child_real) for ancestor in ancestors):
                self.problem(entry.path, "symlink-loop",
                             f"symlink to {child_real} leads back into its own parent; "
                             "not followed")
                continue
            try:
                children = _entries(entry.path)
            except OSError as exc:
                code = "symlink-loop" if exc.errno == errno.ELOOP else "unreadable"
                self.problem(entry.path, code, f"cannot list directory: {exc.strerror}")
                continue
            child_rel = f"{rel}{entry.name}"
            if any(child.name == ENTRY for child in children):
                yield scan_skill(child_rel, entry.path, child_real, children,
                                 self.known.get(child_rel), self.rules_key, self.lookup)
            elif depth < self.spec.max_depth:
                children.sort(key=_by_name)  # groups are walked in a deterministic order
                yield from self.directory(children, f"{child_rel}/", child_real, depth + 1,
                                          [*ancestors, child_real])

    def problem(self, path: str, code: str, message: str) -> None:
        self.result.problems.append(ScanProblem(self.spec.path, Path(path), code, message))


@dataclass(slots=True)
class _Listing:
    files: list[tuple[str, str, os.stat_result]] = field(default_factory=list)  # rel, path, stat
    findings: list[Finding] = field(default_factory=list)
    entry_stat: os.stat_result | None = None
    entry_problem: Finding | None = None

    def key(self, rules_key: str) -> str:
        """A digest of everything that decides the stored record: stats, findings, rules."""
        entry = self.entry_stat
        parts = [rules_key, "" if entry is None else _stat_text(ENTRY, entry),
                 "" if self.entry_problem is None else self.entry_problem.message]
        parts.extend(sorted(_stat_text(rel, st) for rel, _path, st in self.files))
        parts.extend(sorted(finding.message for finding in self.findings))
        return xxhash.xxh3_128_hexdigest("\n".join(parts).encode("utf-8", "surrogateescape"))


def _stat_text(rel: str, st: os.stat_result) -> str:
    # The mode is in the key so that a chmod (which keeps mtime) is noticed too.
    return f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_dev}\0{st.st_mode}"


def _warn(code: str, message: str) -> Finding:
    return Finding(code, Severity.WARNING, message)


def _list_skill(top: str, entries: list[os.DirEntry[str]]) -> _Listing:
    listing = _Listing()
    visited = {top}
    stack: list[tuple[str, str, list[os.DirEntry[str]]]] = [("", top, entries)]
    while stack:
        rel, real, current = stack.pop()
        for entry in current:
            name = entry.name
            rel_path = f"{rel}{name}"
            if not rel and name == ENTRY:
                _entry_stat(entry, listing)
                continue
            if name.startswith("."):
                continue
            try:
                linked = entry.is_symlink()
                st = entry.stat()
            except OSError as exc:
                listing.findings.append(_warn(
                    "unreadable", f"{rel_path}: {exc.strerror or exc} (left out of the manifest)"))
                continue
            target = os.path.realpath(entry.path) if linked else f"{real}/{name}"
            if linked and not _is_inside(target, top):
                listing.findings.append(_warn(
                    "symlink-escape", f"{rel_path} links outside the skill; left out"))
                continue
            if stat_module.S_ISDIR(st.st_mode):
                _descend(listing, stack, visited, rel_path, target)
                continue
            if not stat_module.S_ISREG(st.st_mode):
                listing.findings.append(_warn(
                    "special-file", f"{rel_path} is not a regular file; never opened"))
                continue
            if len(listing.files) >= MAX_FILES_PER_SKILL:
                listing.findings.append(_warn(
                    "too-many-files",
                    f"more than {MAX_FILES_PER_SKILL} files; the rest is left out"))
                return listing
            listing.files.append((rel_path, entry.path, st))
    return listing


def _descend(listing: _Listing, stack: list[tuple[str, str, list[os.DirEntry[str]]]],
             visited: set[str], rel_path: str, real: str) -> None:
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
        stack.append((f"{rel_path}/", real, _entries(real)))
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


def scan_skill(rel_dir: str, directory: str, real_dir: str, entries: list[os.DirEntry[str]],
               known: KnownSkill | None, rules_key: str, lookup: FileLookup) -> SkillScan:
    listing = _list_skill(real_dir, entries)
    tree_key = listing.key(rules_key)
    scan = SkillScan(rel_dir, directory, real_dir, known, tree_key,
                     entry_problem=listing.entry_problem, walk_findings=listing.findings)
    if known is not None and known.tree_key == tree_key:
        scan.unchanged = True
        return scan
    previous = lookup(known.candidate_id) if known is not None else {}
    if listing.entry_stat is not None:
        scan.entry_stat = file_stat(listing.entry_stat)
        _read_entry(scan, os.path.join(directory, ENTRY), listing.entry_stat.st_mode)
    for rel_path, path, st in listing.files:
        old = previous.get(rel_path)
        if old is not None and old.stat == file_stat(st) and risk.current(old.risks):
            scan.resources.append(ResourceEntry(rel_path, resource_kind(rel_path), old.stat,
                                                old.xxh3, old.sha256, old.risks))
            continue
        try:
            read = read_file(path, keep_limit=risk.TEXT_LIMIT, follow_symlinks=True)
        except SpecialFileError:
            scan.walk_findings.append(_warn(
                "special-file", f"{rel_path} is not a regular file; never opened"))
            continue
        except OSError as exc:
            scan.walk_findings.append(_warn(
                "unreadable", f"{rel_path}: {exc.strerror or exc} (left out of the manifest)"))
            continue
        scan.files_read += 1
        judged = risk.record(risk.judge_file(rel_path, read.data, st.st_mode))
        scan.resources.append(ResourceEntry(rel_path, resource_kind(rel_path), read.stat,
                                            read.xxh3, read.sha256, judged))
    if known is not None and len(scan.resources) == len(previous):
        stored = {rel: (old.xxh3, old.sha256) for rel, old in previous.items()}
        scan.same_content = all(stored.get(r.rel_path) == (r.xxh3, r.sha256)
                                for r in scan.resources)
    return scan


def _read_entry(scan: SkillScan, path: str, mode: int) -> None:
    try:
        read = read_file(path, keep_limit=MAX_ENTRY_BYTES, follow_symlinks=False)
    except SpecialFileError:
        scan.entry_problem = Finding("unreadable", Severity.ERROR,
                                     "SKILL.md is not a regular file; never opened")
        return
    except OSError as exc:
        code = "entry-symlink" if exc.errno == errno.ELOOP else "unreadable"
        scan.entry_problem = Finding(code, Severity.ERROR,
                                     f"cannot read SKILL.md: {exc.strerror or exc}")
        return
    scan.files_read += 1
    scan.entry_stat = read.stat
    scan.entry_xxh3, scan.entry_sha256 = read.xxh3, read.sha256
    scan.resources.append(ResourceEntry(ENTRY, ResourceKind.ENTRY, read.stat, read.xxh3,
                                        read.sha256,
                                        risk.record(risk.judge_file(ENTRY, read.data, mode))))
    if read.data is None:
        scan.entry_problem = Finding(
            "file-too-large", Severity.ERROR,
            f"SKILL.md is {read.stat.size} bytes; the limit is {MAX_ENTRY_BYTES}")
        return
    scan.entry_data = read.data


def skill_files(real_dir: Path) -> set[str]:
    """The relative paths a reindex would put in this skill's manifest now (stats only, no reads).

    Raises OSError when the directory cannot be listed.
    """
    listing = _list_skill(str(real_dir), _sorted_entries(str(real_dir)))
    files = {rel for rel, _path, _stat in listing.files}
    if listing.entry_stat is not None:
        files.add(ENTRY)
    return files
