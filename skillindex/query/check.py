"""An author's check: skill folders walked, read and judged as a reindex judges them, no store.

The flow: the paths name skill folders (a folder holding SKILL.md, or the skill holding a given
file) and folders of skills (walked as a root is); each is walked by the indexer's own
`scanner.scan_root`, which reads every file of a skill once and judges its risks, and each skill
is judged by the indexer's `judge.verdict_of` inside a barrier of its own. Names and skill:// URIs
are then compared across the whole set. Nothing is written anywhere.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillindex.errors import ConfigError
from skillindex.index import parallel, policy, skillmd
from skillindex.index.barrier import INTERNAL_ERROR, internal_error
from skillindex.index.judge import risks_of, verdict_of
from skillindex.index.scanner import ENTRY, RootScan, SkillScan, scan_root
from skillindex.model import (
    DEFAULT_LIMITS,
    FileFinding,
    Finding,
    Gravity,
    Limits,
    RootSpec,
    ScanProblem,
    Scope,
    Severity,
    Status,
    Validation,
)
from skillindex.query import overlimit
from skillindex.query.overlap import overlaps

# A folder of skills is walked this deep: `skills/<group>/<skill>` in a repository, as the
# codex preset walks its roots.
DEFAULT_DEPTH = 3
PROVIDER = "check"


@dataclass(frozen=True, slots=True)
class CheckedSkill:
    """One skill as a strict (or lenient) host would judge it, with every finding located."""

    name: str | None
    directory: Path
    status: Status
    findings: tuple[FileFinding, ...]
    files: tuple[str, ...] = ()  # its files relative to the folder, SKILL.md included
    real_dir: str = ""
    name_line: int | None = None  # the line of SKILL.md its `name` field is on
    description: str | None = None
    description_line: int | None = None

    @property
    def entry(self) -> Path:
        return self.directory / ENTRY


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What `check` found: the skills, and problems beside them (folders that could not be
    walked). File paths are absolute; `base` is the folder they are shown relative to."""

    base: Path
    validation: Validation
    skills: tuple[CheckedSkill, ...]
    problems: tuple[FileFinding, ...] = ()
    empty: tuple[Path, ...] = ()  # folders given that hold no skill

    def findings(self) -> list[FileFinding]:
        """Every finding, skill by skill in path order, then the problems."""
        return [*(found for skill in self.skills for found in skill.findings), *self.problems]

    def counts(self) -> dict[Gravity, int]:
        counts = dict.fromkeys(Gravity, 0)
        for found in self.findings():
            counts[found.gravity] += 1
        return counts

    def fails(self, fail_on: Gravity) -> bool:
        """Whether a finding weighs as much as `fail_on` or more."""
        return any(found.gravity.weight >= fail_on.weight for found in self.findings())

    def as_dict(self, fail_on: Gravity = Gravity.ERROR) -> dict[str, object]:
        counts = self.counts()
        return {
            "ok": not self.fails(fail_on), "fail_on": str(fail_on),
            "validation": str(self.validation),
            "counts": {"skills": len(self.skills),
                       "rejected": sum(s.status is Status.REJECTED for s in self.skills),
                       **{str(gravity): number for gravity, number in counts.items()}},
            "skills": [{"name": skill.name, "path": shown(skill.entry, self.base),
                        "status": str(skill.status),
                        "findings": [finding_dict(f, self.base) for f in skill.findings]}
                       for skill in self.skills],
            "problems": [finding_dict(f, self.base) for f in self.problems],
        }


def shown(file: Path, base: Path) -> str:
    """A path as a report names it: relative to `base` with `/` when inside it, else whole."""
    try:
        return file.relative_to(base).as_posix()
    except ValueError:
        return str(file)


def finding_dict(found: FileFinding, base: Path) -> dict[str, object]:
    return {"code": found.code, "level": str(found.gravity), "severity": str(found.severity),
            "message": found.message, "path": shown(found.file, base), "line": found.line,
            "skill": found.skill}


def check(paths: Sequence[str | os.PathLike[str]], *, base: Path,
          validation: Validation = Validation.STRICT, max_depth: int = DEFAULT_DEPTH,
          limits: Limits = DEFAULT_LIMITS, jobs: int = 1) -> CheckReport:
    """Judge the skills the paths name (relative paths are taken from `base`) as a reindex
    with these rules would, and compare their names and URIs; nothing is written.

    Raises ConfigError for a path that does not exist.
    """
    base = Path(os.path.abspath(base))
    walks = _plan([os.path.normpath(os.path.join(base, p)) for p in paths or ["."]], max_depth)
    skills: list[CheckedSkill] = []
    problems: list[FileFinding] = []
    empty: list[Path] = []
    workers = parallel.Workers(jobs, start=_start()) if jobs > 1 else None
    try:
        for walk in walks:
            spec = RootSpec(Path(walk.folder), Scope.PROJECT, PROVIDER, 0, max_depth=walk.depth,
                            require_description=True, validation=validation)
            before = len(skills)
            for found in _walk(spec, walk.only, limits, workers):
                if isinstance(found, CheckedSkill):
                    skills.append(found)
                else:
                    problems.append(found)
            if walk.only is None and len(skills) == before:
                empty.append(spec.path)
    finally:
        if workers is not None:
            workers.shutdown()
    unique = _one_per_folder(skills)
    collided = _collisions(unique, base, strict=validation is Validation.STRICT)
    for index, more in _overlaps(unique, base).items():
        collided.setdefault(index, []).extend(more)
    checked = tuple(skill if not collided.get(index) else _with(skill, collided[index])
                    for index, skill in enumerate(unique))
    return CheckReport(base, validation, checked, tuple(problems), tuple(empty))


# -- Which folders to walk ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Walk:
    folder: str  # walked as a root
    only: frozenset[str] | None  # the entries under it that are skills given, or None: all
    depth: int


def _plan(paths: Iterable[str], depth: int) -> list[_Walk]:
    """The walks that find the skills the paths name, in the order given: a skill folder (or
    the skill holding a file) is an entry of its parent, walked one level deep; any other
    folder is walked as a root."""
    order: list[tuple[str, bool]] = []  # (folder, whether it is walked as a root)
    parents: dict[str, set[str]] = {}
    holders: dict[str, str | None] = {}
    for path in paths:
        if not os.path.lexists(path):
            raise ConfigError(f"no such file or folder: {path}")
        if os.path.isdir(path) and not _holds_skill(path):
            if (path, True) not in order:
                order.append((path, True))
            continue
        skill = path if os.path.isdir(path) else _holder(os.path.dirname(path), holders)
        if skill is None:
            continue  # a file in no skill (a hook passes every changed file)
        parent, name = os.path.split(skill)
        if parent not in parents:
            parents[parent] = set()
            order.append((parent, False))
        parents[parent].add(name)
    return [_Walk(folder, None, depth) if as_root else _Walk(folder, frozenset(parents[folder]), 1)
            for folder, as_root in order]


def _holds_skill(folder: str) -> bool:
    return os.path.lexists(os.path.join(folder, ENTRY))


def _holder(folder: str, known: dict[str, str | None]) -> str | None:
    """The nearest folder at or above `folder` holding SKILL.md, not above a repository's top
    (a folder holding `.git`); None when there is none."""
    seen: list[str] = []
    found: str | None = None
    while True:
        if folder in known:
            found = known[folder]
            break
        seen.append(folder)
        if _holds_skill(folder):
            found = folder
            break
        parent = os.path.dirname(folder)
        if parent == folder or os.path.lexists(os.path.join(folder, ".git")):
            break
        folder = parent
    for folder in seen:
        known[folder] = found
    return found


# -- Walking and judging ------------------------------------------------------------------------

def _start() -> str:
    """How workers start: forked (they inherit the parent's imports) where a fork is safe, on
    Linux in a process with no other thread (check itself holds no connection and starts no
    thread; a library caller may have); spawned otherwise."""
    return "fork" if sys.platform == "linux" and threading.active_count() == 1 else "spawn"


def _walk(spec: RootSpec, only: frozenset[str] | None, limits: Limits,
          workers: parallel.Workers | None) -> Iterator[CheckedSkill | FileFinding]:
    rules_key = policy.rules_key(spec)
    if workers is not None and only is None:
        _names, entries = parallel.split_entries(str(spec.path), set(), None)
        if len(entries) >= parallel.PARALLEL_MIN:
            # Each shard lists the root again: a few shards a worker keep them busy alike
            # without listing a large root hundreds of times.
            size = max(parallel.SHARD, len(entries) // (4 * workers.jobs))
            done = 0
            try:
                for shard in parallel.map_shards(workers.executor(), _check_shard, spec,
                                                 rules_key, entries, limits, size):
                    yield from shard
                    done += size
            except Exception:  # the pool broke (a worker died): the rest is checked here
                only = frozenset(entries[done:])
            else:
                return
    yield from _check_entries(spec, rules_key, only, limits)


def _check_shard(spec: RootSpec, rules_key: str, names: list[str],
                 limits: Limits) -> list[CheckedSkill | FileFinding]:
    return list(_check_entries(spec, rules_key, frozenset(names), limits))


def _check_entries(spec: RootSpec, rules_key: str, only: frozenset[str] | None,
                   limits: Limits) -> Iterator[CheckedSkill | FileFinding]:
    result = RootScan(spec)
    walked = scan_root(spec, result, {}, rules_key, lambda _candidate: {}, only, limits=limits)
    try:
        for scan in walked:
            yield _guarded(scan, spec, limits)
    except Exception as exc:  # the walk's barrier: the other folders go on
        failure = internal_error(exc, "walking the root")
        result.problems.append(ScanProblem(spec.path, spec.path, failure.code, failure.message))
    for problem in result.problems:
        gravity = Gravity.ERROR if problem.code == INTERNAL_ERROR else Gravity.WARNING
        yield FileFinding(problem.code, gravity, problem.message, problem.path)


def _guarded(scan: SkillScan, spec: RootSpec, limits: Limits) -> CheckedSkill:
    """One skill judged inside its barrier: whatever fails is a finding of that skill."""
    try:
        return _judged(scan, spec, limits)
    except Exception as exc:  # one skill's failure never ends the check
        directory = Path(scan.directory)
        failure = internal_error(exc, "judging the skill")
        finding = FileFinding(failure.code, Gravity.ERROR, failure.message, directory / ENTRY)
        return CheckedSkill(None, directory, Status.REJECTED, (finding,), real_dir=scan.real_dir)


def _judged(scan: SkillScan, spec: RootSpec, limits: Limits) -> CheckedSkill:
    verdict, _parsed = verdict_of(scan, spec)
    directory = Path(scan.directory)
    entry = directory / ENTRY
    name = verdict.name
    lines = _FieldLines(scan.entry_data)
    findings = [FileFinding(f.code, gravity_of(f), f.message, entry, lines.of(f), name)
                for f in verdict.findings]
    findings += [FileFinding(f.code, gravity_of(f), f.message,
                             entry if f.path is None else directory / f.path, None, name)
                 for f in scan.walk_findings]
    risks = risks_of(scan)
    if overlimit.over_limits(scan):  # nothing was read: judge what fits within the limits
        partial = overlimit.judge_within_limits(scan, limits)
        risks = list(partial.risks)
        findings.append(FileFinding(overlimit.TOO_LARGE, Gravity.WARNING, partial.message,
                                    entry, None, name))
    findings += [FileFinding(r.code, Gravity.RISK, r.message, directory / r.path,
                             r.line or None, name) for r in risks]
    findings.sort(key=lambda f: (f.file != entry, str(f.file), f.line or 0))
    return CheckedSkill(name, directory, verdict.status, tuple(findings),
                        tuple(r.rel_path for r in scan.resources), scan.real_dir,
                        _name_line(scan.entry_data), verdict.description,
                        lines.lines().get("description"))


def gravity_of(finding: Finding) -> Gravity:
    return Gravity.ERROR if finding.severity is Severity.ERROR else Gravity.WARNING


# The frontmatter field a finding is about, for the codes whose message does not quote it.
_FIELD_OF = {"name-invalid": "name", "name-reserved": "name", "name-too-long": "name",
             "name-dir-mismatch": "name",
             "description-missing": "description", "description-too-long": "description",
             "compatibility-too-long": "compatibility"}
_AT_TOP = frozenset({"frontmatter-missing", "frontmatter-unclosed"})
# PyYAML names where it failed: "line 3, column 7" of the frontmatter (the last mark is the
# problem's own).
_YAML_MARK = re.compile(r"line (\d+), column \d+")


def _name_line(data: bytes | None) -> int | None:
    """The line of the `name:` field, for a finding about the name that no rule made (one
    search in C, not the frontmatter's lines)."""
    if data is None:
        return None
    at, end = data.find(b"\nname:"), data.find(b"\n---", 3)  # inside the frontmatter
    return None if at < 0 or at > end else data.count(b"\n", 0, at) + 2


def field_line(data: bytes | None, key: str) -> int | None:
    """The line of SKILL.md (its bytes) the top-level frontmatter field `key` starts on."""
    return _FieldLines(data).lines().get(key)


class _FieldLines:
    """The line of SKILL.md each top-level frontmatter field starts on, found when first asked."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data
        self._lines: dict[str, int] | None = None

    def of(self, finding: Finding) -> int | None:
        if finding.code in _AT_TOP:
            return 1
        if finding.code in ("yaml-invalid", "yaml-repaired"):
            marks = _YAML_MARK.findall(finding.message)
            return int(marks[-1]) + 1 if marks else None  # the frontmatter starts on line 2
        lines = self.lines()
        key = _FIELD_OF.get(finding.code)
        if key is None and finding.code == "field-type":
            key = finding.message.split(" ", 1)[0]
        if key is None:
            key = next((k for k in lines if repr(k) in finding.message), None)
        return None if key is None else lines.get(key)

    def lines(self) -> dict[str, int]:
        if self._lines is None:
            self._lines = {}
            text = skillmd.decode(self.data or b"")
            parts = None if isinstance(text, Finding) else skillmd.split(text)
            head = "" if parts is None or isinstance(parts, Finding) else parts[0]
            for number, line in enumerate(head.split("\n"), start=2):
                key, colon, _rest = line.partition(":")
                if colon and line[:1] not in " \t#-" and key.strip():
                    self._lines.setdefault(key.strip().strip("'\""), number)
        return self._lines


# -- The set ------------------------------------------------------------------------------------

def _one_per_folder(skills: list[CheckedSkill]) -> list[CheckedSkill]:
    """The skills in path order, each real folder once (given twice, or reached by a link),
    under the path it was first reached by."""
    seen: set[str] = set()
    unique = []
    for skill in skills:
        if skill.real_dir and skill.real_dir in seen:
            continue
        seen.add(skill.real_dir)
        unique.append(skill)
    return sorted(unique, key=lambda s: str(s.directory))


def _with(skill: CheckedSkill, more: list[FileFinding]) -> CheckedSkill:
    return replace(skill, findings=(*skill.findings, *more))


def _collisions(skills: Sequence[CheckedSkill], base: Path, *,
                strict: bool) -> dict[int, list[FileFinding]]:
    """The findings of skills whose names are another's of the set."""
    found: dict[int, list[FileFinding]] = defaultdict(list)
    by_name: dict[str, list[int]] = defaultdict(list)
    for index, skill in enumerate(skills):
        if skill.name is not None:
            by_name[skill.name].append(index)
    gravity = Gravity.ERROR if strict else Gravity.WARNING
    for name, holders in by_name.items():
        for index in holders if len(holders) > 1 else ():
            others = ", ".join(shown(skills[other].directory, base)
                               for other in holders if other != index)
            found[index].append(FileFinding(
                "name-collision", gravity,
                f"the name {name!r} is also the name of {others}: hosts load one of them",
                skills[index].entry, skills[index].name_line, name))
    # Names cannot hold `:` or `/` (name-reserved), so two names' skill:// URIs never meet;
    # the set has no plugins and no keep-all, the reindex's sources of uri-collision.
    return found


def _overlaps(skills: Sequence[CheckedSkill], base: Path) -> dict[int, list[FileFinding]]:
    """A warning on both skills of each pair whose descriptions would answer the same requests,
    at the description, naming the other skill."""
    found: dict[int, list[FileFinding]] = defaultdict(list)
    described = [i for i, skill in enumerate(skills)
                 if skill.status is Status.ACCEPTED and skill.description]
    pairs = overlaps([(skills[i].name, skills[i].description) for i in described])
    for pair in pairs:
        first, second = described[pair.first], described[pair.second]
        for one, other in ((first, second), (second, first)):
            skill, neighbour = skills[one], skills[other]
            found[one].append(FileFinding(
                "description-overlap", Gravity.WARNING,
                f"the description shares {pair.score:.0%} of its words with that of "
                f"{neighbour.name!r} ({shown(neighbour.entry, base)}): a request meant for one "
                f"would pick the other as readily ({', '.join(pair.shared[:8])})",
                skill.entry, skill.description_line, skill.name))
    return found
