"""Runs trigger evals: the skills under test indexed beside their neighbours in a temporary copy of
an index, and each query ranked by the search and the query-ranked catalog the host sees."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillindex import inputs
from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.errors import ConfigError, IndexMissingError, SkillIndexError
from skillindex.index import frontmatter
from skillindex.index.indexer import Progress
from skillindex.model import Scope, Validation
from skillindex.query import evals
from skillindex.query.catalog import DEFAULT_MAX_CHARS
from skillindex.query.check import DEFAULT_DEPTH, field_line
from skillindex.query.evals import EvalQuery, EvalReport, QueryResult, SkillEval
from skillindex.query.modes import manual_only
from skillindex.store import sqlitefile
from skillindex.store.engine import sqlite_path

ENTRY = "SKILL.md"
# Above every preset and any root a user would number: the copy under test wins its name, so
# an installed older version of it is shadowed rather than competing with it.
EVAL_PRECEDENCE = 1_000_000
COPY_TIMEOUT_S = 30.0

# (queries ranked, queries in all)
Ranked = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Against:
    """What the skills are ranked among: an index (a database URL) or a folder of skills."""

    url: str | None = None
    folder: Path | None = None

    def described(self) -> str:
        if self.folder is not None:
            return f"the skills under {self.folder}"
        return f"the index {sqlite_path(self.url or '') or self.url}"


@dataclass(frozen=True, slots=True)
class _Target:
    entry: Path  # the SKILL.md as the author has it
    queries_file: Path
    queries: tuple[EvalQuery, ...]


def run(settings: Settings, env: Environment, against: Against, paths: Sequence[Path], *,
        queries_file: Path | None = None, ranking: str = "search", k: int = evals.SEARCH_K,
        progress: Progress | None = None, ranked: Ranked | None = None) -> EvalReport:
    """Evaluate the skills at `paths` (skill folders, files in one, or folders of skills; none:
    every winner of the index whose folder holds an eval file) against `against`.

    The skills are taken as they are on disk and indexed into a temporary copy of the index
    (or a temporary index of the folder); the index itself is never opened for writing.
    Raises ConfigError for a path that is no skill or a skill without evals, and for an
    index that is not a SQLite file; IndexMissingError when the index does not exist.
    """
    if ranking not in evals.RANKINGS:
        raise ConfigError(f"ranking must be one of {', '.join(evals.RANKINGS)}, not {ranking}")
    targets = _targets(paths, queries_file) if paths else None
    started = time.perf_counter()
    if targets == []:
        return EvalReport((), against.described(), 0, ranking, k, DEFAULT_MAX_CHARS, 0.0, 0)
    with tempfile.TemporaryDirectory(prefix="skillindex-eval-") as work:
        folder = Path(work)
        copies = [] if targets is None else _copy_skills(targets, folder)
        tested = replace(settings, roots=(*settings.roots, *(
            RootConfig(str(copy.parent.parent), scope=Scope.PROJECT, precedence=EVAL_PRECEDENCE,
                       max_depth=1) for copy in copies)))
        database = folder / "index.sqlite"
        if against.folder is not None:
            tested = replace(tested, presets=False, custom_directories=(), roots=(
                RootConfig(str(against.folder), scope=Scope.USER, max_depth=DEFAULT_DEPTH,
                           require_description=False), *tested.roots[len(settings.roots):]))
            if tested.validation is None:
                tested = replace(tested, validation=Validation.LENIENT)
        else:
            _copy_index(against.url or "", database)
        with SkillIndex.open(tested, db=str(database), env=env) as index:
            if against.folder is not None:
                index.reindex(progress=progress)
            elif copies:
                index.reindex(paths=[copy.parent.parent for copy in copies], progress=progress)
            if targets is None:
                targets, copies = _with_evals(index)
            skills = _evaluate(index, targets, copies, ranking=ranking, k=k, ranked=ranked)
            neighbours = index.count() - len(copies if paths else [])
    return EvalReport(tuple(skills), against.described(), max(neighbours, 0), ranking, k,
                      DEFAULT_MAX_CHARS, time.perf_counter() - started,
                      sum(len(target.queries) for target in targets))


# -- The skills under test -----------------------------------------------------------------------

def _targets(paths: Sequence[Path], queries_file: Path | None) -> list[_Target]:
    """The skills the paths name, with their evals. A file names the skill holding it, and is
    passed over when there is none or it has no evals (a hook hands over every changed file);
    a folder without a skill, or a skill folder without evals, is an error."""
    entries: dict[Path, bool] = {}  # each SKILL.md, and whether a folder named it
    for given in paths:
        path = Path(os.path.abspath(given))
        for entry in _skills_at(path):
            entries[entry] = entries.get(entry, False) or path.is_dir()
    if queries_file is not None and len(entries) != 1:
        raise ConfigError(f"--queries is for one skill; the paths name {len(entries)}")
    targets = []
    for entry, named in sorted(entries.items()):
        found = queries_file or evals.eval_file(entry.parent)
        if found is None:
            if not named:
                continue
            raise ConfigError(f"{entry.parent} has no trigger evals: write "
                              f"{' or '.join(evals.EVAL_FILES)} there, or give --queries FILE")
        targets.append(_Target(entry, found, evals.read_queries(found)))
    return targets


def _skills_at(path: Path) -> list[Path]:
    """The SKILL.md files a path names: its skill (a skill folder, or a file in one), else the
    skill folders right under it; none for a file in no skill."""
    if not path.exists():
        raise ConfigError(f"no such file or folder: {path}")
    holder = path if path.is_dir() else path.parent
    for folder in (holder, *holder.parents):
        if (folder / ENTRY).is_file():
            return [folder / ENTRY]
        if (folder / ".git").exists():
            break
    if not path.is_dir():
        return []
    found = sorted(child / ENTRY for child in path.iterdir()
                   if child.is_dir() and (child / ENTRY).is_file())
    if not found:
        raise ConfigError(f"no skill at {path}: a skill folder holds {ENTRY}")
    return found


def _copy_skills(targets: Sequence[_Target], work: Path) -> list[Path]:
    """Each skill folder copied under a root of its own (its folder's name kept, as a name
    check wants), so the index reads what the author has now; the copies' SKILL.md files."""
    copies = []
    for number, target in enumerate(targets):
        folder = target.entry.parent
        copy = work / f"skills-{number}" / folder.name
        shutil.copytree(folder, copy, symlinks=True)
        copies.append(copy / ENTRY)
    return copies


def _with_evals(index: SkillIndex) -> tuple[list[_Target], list[Path]]:
    """The winners of the index whose folders hold trigger evals, as they are indexed."""
    targets = []
    for winner in index.iter_winners(findings=False):
        entry = winner.candidate.path
        found = evals.eval_file(entry.parent)
        if found is not None:
            targets.append(_Target(entry, found, evals.read_queries(found)))
    if not targets:
        raise ConfigError("no skill of the index has trigger evals "
                          f"({' or '.join(evals.EVAL_FILES)} in its folder); name skill folders")
    return targets, [target.entry for target in targets]


def _copy_index(url: str, target: Path) -> None:
    source = sqlite_path(url)
    if source is None:
        raise ConfigError("eval ranks skills in a copy of a SQLite index; for a PostgreSQL one, "
                          "pass --against FOLDER (a folder of skills to rank among)")
    if not source.is_file():
        raise IndexMissingError(str(source))
    sqlitefile.copy(str(source), str(target), timeout=COPY_TIMEOUT_S)


# -- Ranking ---------------------------------------------------------------------------------------

def _evaluate(index: SkillIndex, targets: Sequence[_Target], copies: Sequence[Path], *,
              ranking: str, k: int, ranked: Ranked | None) -> list[SkillEval]:
    where = {str(copy): target for copy, target in zip(copies, targets, strict=True)}
    names: dict[str, str] = {}
    for winner in _winners_at(index, where):
        names[str(winner[1])] = winner[0]
    total = sum(len(target.queries) for target in targets)
    done = 0
    skills = []
    for location, target in where.items():
        data = _head(target.entry)
        line = field_line(data, "description")
        name = names.get(location)
        if name is None:
            skills.append(SkillEval(target.entry.parent.name, target.entry, line,
                                    target.queries_file, (), problem=(
                                        "not in the catalog (rejected or withheld): "
                                        "`skillindex check` on its folder says why")))
            done += len(target.queries)
            continue
        results = []
        for query in target.queries:
            results.append(_rank(index, query, location, ranking=ranking, k=k))
            done += 1
            if ranked is not None:
                ranked(done, total)
        skills.append(SkillEval(name, target.entry, line, target.queries_file, tuple(results)))
    return skills


def _winners_at(index: SkillIndex, locations: dict[str, _Target]) -> Iterator[tuple[str, Path]]:
    """The catalog names of the skills under test: each looked up by the name its SKILL.md
    declares, and only when one is not found that way (a collision policy renamed it), found
    among every winner."""
    missing = set(locations)
    for location in locations:
        declared = _declared_name(Path(location))
        if declared is None:
            continue
        try:
            winner = index.winner(declared)
        except SkillIndexError:
            continue
        if str(winner.candidate.path) == location:
            missing.discard(location)
            yield winner.name, winner.candidate.path
    if missing:
        for winner in index.iter_winners(findings=False):
            if str(winner.candidate.path) in missing:
                yield winner.name, winner.candidate.path


def _declared_name(entry: Path) -> str | None:
    parsed = frontmatter.parse(_head(entry) or b"", lenient=True)
    name = (parsed.fields or {}).get("name")
    return name if isinstance(name, str) else entry.parent.name


def _rank(index: SkillIndex, query: EvalQuery, location: str, *, ranking: str,
          k: int) -> QueryResult:
    modes = index.settings.catalog
    # As the search_skills tool ranks: the skills the catalog keeps from the model never show.
    hits = [hit for hit in index.search(query.query, limit=evals.RANK_DEPTH)
            if not manual_only(hit.winner, modes)]
    rank = next((n for n, hit in enumerate(hits, start=1) if hit.location == location), None)
    ahead = tuple(hit.name for hit in hits[:min(k, (rank or k + 1) - 1)])
    state = None
    if ranking == "catalog":
        # Only when it decides: at a registry's size each query-ranked catalog reads the order
        # of every winner, some hundred times the cost of the search.
        catalog = index.catalog(query=query.query)
        entry = next((e for e in catalog.entries if e.location == location), None)
        state = evals.catalog_state(None if entry is None else entry.truncated,
                                    bool(entry and entry.description))
    chosen = {"search": rank is not None and rank <= k, "catalog": state == evals.WHOLE}
    triggered = chosen[ranking]
    return QueryResult(query.query, query.should_trigger, rank, state, triggered, ahead)


def _head(entry: Path) -> bytes | None:
    try:  # the frontmatter's bound; a FIFO named SKILL.md is refused, not waited on
        return inputs.read_bytes(entry, max_bytes=64 << 10, what="SKILL.md", head=True)
    except (OSError, inputs.InputError):
        return None

