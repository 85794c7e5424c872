"""Walks roots: finds the skill directories under each one and scans each of them."""

from __future__ import annotations

import errno
import os
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skillindex.index.barrier import INTERNAL_ERROR, internal_error
from skillindex.index.skilldir import (
    ENTRY,
    MAX_ENTRY_BYTES,
    FileLookup,
    SkillScan,
    by_name,
    failed_scan,
    is_inside,
    list_dir,
    realpath,
    scan_skill,
    skill_files,
    sorted_entries,
)
from skillindex.model import KnownFile, KnownSkill, Limits, RootSpec, ScanProblem
from skillindex.text import is_text, shown_name

__all__ = ["ENTRY", "MAX_ENTRY_BYTES", "KnownFile", "KnownSkill", "RootScan", "SkillScan",
           "estimate_skills", "scan_root", "skill_files"]


@dataclass(slots=True)
class RootScan:
    spec: RootSpec
    present: bool = True
    problems: list[ScanProblem] = field(default_factory=list)


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
              rules_key: str, lookup: FileLookup, only: Container[str] | None = None, *,
              limits: Limits) -> Iterator[SkillScan]:
    """Yield every skill directory under the root (only under the entries named in `only`,
    when given); problems and presence land in `result`."""
    root = str(spec.path)
    try:
        entries = sorted_entries(root)
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
    real_root = realpath(root) or os.path.abspath(root)
    walk = _RootWalk(spec, result, known, rules_key, lookup, limits)
    yield from walk.run(entries, real_root)


@dataclass(slots=True)
class _Frame:
    """One directory of the walk above the skills (a root, or a group under it)."""

    entries: Iterator[os.DirEntry[str]]
    rel: str
    real: str
    depth: int
    ancestors: tuple[str, ...]


@dataclass(slots=True)
class _RootWalk:
    spec: RootSpec
    result: RootScan
    known: Mapping[str, KnownSkill]
    rules_key: str
    lookup: FileLookup
    limits: Limits

    def run(self, entries: list[os.DirEntry[str]], real_root: str) -> Iterator[SkillScan]:
        # A stack, not recursion: a chain of thousands of folders is walked in constant depth.
        stack = [_Frame(iter(entries), "", real_root, 1, (real_root,))]
        while stack:
            frame = stack[-1]
            entry = next(frame.entries, None)
            if entry is None:
                stack.pop()
                continue
            try:
                found = self.visit(entry, frame)
            except Exception as exc:  # the barrier: the entry is a problem, the walk goes on
                self.problem(entry.path, INTERNAL_ERROR,
                             internal_error(exc, "walking the folder").message)
                continue
            if isinstance(found, SkillScan):
                yield found
            elif found is not None:
                stack.append(found)

    def visit(self, entry: os.DirEntry[str], frame: _Frame) -> SkillScan | _Frame | None:
        name = entry.name
        if name.startswith("."):
            return None
        try:
            if not entry.is_dir():
                return None
            linked = entry.is_symlink()
        except OSError:
            return None
        if not is_text(name):
            self.problem(entry.path, "name-not-utf8",
                         "the folder name is not UTF-8; not indexed (rename it)")
            return None
        if linked:
            child_real = realpath(entry.path)
            if child_real is None:
                self.problem(entry.path, "unreadable",
                             "symlink changed while it was resolved; not followed")
                return None
            if any(is_inside(ancestor, child_real) for ancestor in frame.ancestors):
                self.problem(entry.path, "symlink-loop",
                             f"symlink to {shown_name(child_real)} leads back into its own "
                             "parent; not followed")
                return None
        else:
            child_real = f"{frame.real.rstrip('/')}/{name}"
        try:
            children = list_dir(entry.path)
        except OSError as exc:
            code = "symlink-loop" if exc.errno == errno.ELOOP else "unreadable"
            self.problem(entry.path, code, f"cannot list directory: {exc.strerror}")
            return None
        child_rel = f"{frame.rel}{name}"
        if ENTRY in map(by_name, children):
            known = self.known.get(child_rel)
            try:
                return scan_skill(child_rel, entry.path, child_real, children, known,
                                  self.rules_key, self.lookup, self.limits)
            except Exception as exc:  # the barrier: this skill is rejected, the walk goes on
                return failed_scan(child_rel, entry.path, child_real, known, exc)
        if frame.depth >= self.spec.max_depth:
            return None
        children.sort(key=by_name)  # groups are walked in a deterministic order
        return _Frame(iter(children), f"{child_rel}/", child_real, frame.depth + 1,
                      (*frame.ancestors, child_real))

    def problem(self, path: str, code: str, message: str) -> None:
        self.result.problems.append(ScanProblem(self.spec.path, Path(shown_name(path)), code,
                                                message))


