"""Decides which candidates make the catalog and says why, as pure functions over Candidates."""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillindex.config import COLLISION_POLICIES, Settings
from skillindex.inputs import first_match
from skillindex.model import Candidate, RootSpec, Severity
from skillindex.providers import ORDERED_PROVIDERS

PRECEDENCE, REJECT_AMBIGUOUS, QUALIFY, KEEP_ALL = COLLISION_POLICIES


class Outcome(enum.StrEnum):
    WINNER = "winner"
    SHADOWED = "shadowed"
    FILTERED = "filtered"
    DISABLED = "disabled"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    QUARANTINED = "quarantined"  # would win, but withheld for its risk findings


@dataclass(frozen=True, slots=True)
class Rules:
    """The settings resolution obeys; no defaults, so every caller states each of them."""

    enabled: bool
    ignored: tuple[str, ...]
    included: tuple[str, ...]
    policy: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Rules:
        return cls(enabled=settings.enabled, ignored=settings.ignored_skills,
                   included=settings.include_skills, policy=settings.collision_policy)


@dataclass(frozen=True, slots=True)
class Collision:
    """Different SKILL.md files that declare one name, and which of them the policy kept."""

    name: str
    policy: str
    paths: tuple[Path, ...]  # every file declaring the name, in precedence order
    kept: tuple[Path, ...]  # empty when reject-ambiguous refused a tie

    @property
    def message(self) -> str:
        return _message(self.name, self.policy, [str(path) for path in self.paths],
                        [str(path) for path in self.kept])

    def as_dict(self) -> dict[str, object]:
        return _collision_dict(self.name, self.policy, [str(path) for path in self.paths],
                               [str(path) for path in self.kept])


def _message(name: str, policy: str, paths: Sequence[str], kept: Sequence[str]) -> str:
    files = ", ".join(paths)
    chosen = ", ".join(kept) if kept else "none of them"
    return (f"name collision: {name!r} is declared by {len(paths)} files ({files}); "
            f"collision_policy {policy} kept {chosen}")


def _collision_dict(name: str, policy: str, paths: list[str], kept: list[str],
                    ) -> dict[str, object]:
    return {"name": name, "policy": policy, "paths": paths, "kept": kept,
            "message": _message(name, policy, paths, kept)}


@dataclass(frozen=True, slots=True)
class Winner:
    """A candidate of the resolved set, under the name the catalog shows (qualified or not)."""

    name: str
    candidate: Candidate
    collision: Collision | None = None

    def as_dict(self) -> dict[str, object]:
        return {**self.candidate.as_dict(), "name": self.name,
                "declared_name": self.candidate.name,
                "collision": None if self.collision is None else self.collision.as_dict()}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What resolution made of one candidate, with the reason in words."""

    candidate: Candidate
    outcome: Outcome
    reason: str
    name: str | None = None  # the catalog name, for winners

    def as_dict(self) -> dict[str, object]:
        return {**self.candidate.as_dict(), "outcome": str(self.outcome), "reason": self.reason,
                "catalog_name": self.name}


@dataclass(frozen=True, slots=True)
class Resolution:
    """Every candidate judged, in precedence order, the winners and the name collisions."""

    verdicts: tuple[Verdict, ...]
    winners: tuple[Winner, ...]
    collisions: tuple[Collision, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """Every candidate for one name with its outcome: the answer to "why is my skill not used?"."""

    name: str
    verdicts: tuple[Verdict, ...]
    winners: tuple[Winner, ...]
    collision: Collision | None
    # How the catalog shows the winner (mode, reason); set by the caller that knows the settings.
    catalog_mode: tuple[str, str] | None = None

    @property
    def winner(self) -> Winner | None:
        return self.winners[0] if self.winners else None

    def as_dict(self) -> dict[str, object]:
        winner = self.winner
        mode = self.catalog_mode
        return {"name": self.name, "winner": None if winner is None else winner.as_dict(),
                "catalog_mode": None if mode is None else {"mode": mode[0], "reason": mode[1]},
                "winners": [w.as_dict() for w in self.winners],
                "collision": None if self.collision is None else self.collision.as_dict(),
                "candidates": [v.as_dict() for v in self.verdicts]}


def resolve(candidates: Iterable[Candidate], roots: Sequence[RootSpec], rules: Rules) -> Resolution:
    """Filters (source, ignored, included, enabled), then one candidate per real directory,
    then the collision policy per name; filters come first so that switching a source off
    lets the next candidate of that name win."""
    if rules.policy not in COLLISION_POLICIES:
        raise ValueError(f"unknown collision policy {rules.policy!r}")
    specs = {spec.path: spec for spec in roots}
    ranked = sorted((rebase(c, specs.get(c.root)) for c in candidates), key=rank)
    verdicts: dict[int, Verdict] = {}
    first_copy: dict[Path, Candidate] = {}
    groups: dict[str, list[int]] = {}
    for number, candidate in enumerate(ranked):
        screened = _screen(candidate, specs.get(candidate.root), rules)
        if screened is not None:
            verdicts[number] = screened
            continue
        original = first_copy.setdefault(candidate.real_path, candidate)
        if original is not candidate:
            verdicts[number] = Verdict(candidate, Outcome.DUPLICATE, (
                f"same skill directory as {original.path} (both resolve to "
                f"{candidate.real_path}); counted once"))
            continue
        groups.setdefault(str(candidate.name), []).append(number)
    # A qualified name must not take a name, nor a skill:// path, some other skill has.
    taken = Names()
    for name, members in groups.items():
        taken.add(name, ranked[members[0]].precedence)
    collisions: list[Collision] = []
    winners: dict[int, Winner] = {}
    for name, members in groups.items():
        group = [ranked[number] for number in members]
        judged = apply_policy(name, group, rules.policy, taken)
        collision = collision_of(name, rules.policy, judged)
        if collision is not None:
            collisions.append(collision)
        for number, verdict in zip(members, judged, strict=True):
            verdicts[number] = verdict
            if verdict.outcome is Outcome.WINNER:
                winners[number] = Winner(verdict.name or name, verdict.candidate, collision)
    return Resolution(
        verdicts=tuple(verdicts[number] for number in range(len(ranked))),
        winners=tuple(winners[number] for number in sorted(winners)),
        collisions=tuple(collisions))


def explain(resolution: Resolution, name: str) -> Explanation | None:
    """Every candidate that declares `name` (or, rejected before it had a name, lives in a
    directory of that name); a qualified catalog name stands for its declared name."""
    declared = next((w.candidate.name for w in resolution.winners
                     if w.name == name and w.candidate.name is not None), name)
    verdicts = tuple(v for v in resolution.verdicts if _answers_to(v.candidate, declared))
    if not verdicts:
        return None
    return Explanation(
        name=declared, verdicts=verdicts,
        winners=tuple(w for w in resolution.winners if w.candidate.name == declared),
        collision=next((c for c in resolution.collisions if c.name == declared), None))


def _answers_to(candidate: Candidate, name: str) -> bool:
    if candidate.name is not None:
        return candidate.name == name
    return candidate.directory.name == name


def rank(candidate: Candidate) -> tuple[int, int, str]:
    return -candidate.precedence, candidate.position, str(candidate.path)


# Part of every stored resolution's key: bump it when the policy's results change.
RESOLUTION_VERSION = 3


def set_key(runs: Sequence[tuple[str, int]], roots: Sequence[RootSpec], rules: Rules) -> str:
    """What a stored resolution depends on: the planned roots, the runs that last changed them,
    the rules."""
    text = repr((RESOLUTION_VERSION, list(runs), tuple(roots), rules))
    return hashlib.sha256(text.encode()).hexdigest()


def stored_collision(text: str | None) -> Collision | None:
    """A collision as a stored resolution keeps it (`Collision.as_dict` in JSON)."""
    if text is None:
        return None
    data = json.loads(text)
    return Collision(name=data["name"], policy=data["policy"],
                     paths=tuple(Path(p) for p in data["paths"]),
                     kept=tuple(Path(p) for p in data["kept"]))


def stored_collision_dict(text: str) -> dict[str, object]:
    """`stored_collision(text).as_dict()` without a Path for each path: a stored path is
    as `str(Path)` wrote it (`Collision.as_dict`), which a Path gives back unchanged; only
    one that a Path would change (an empty or `.` part) is made one."""
    data = json.loads(text)
    return _collision_dict(data["name"], data["policy"], [_path_text(p) for p in data["paths"]],
                           [_path_text(p) for p in data["kept"]])


def _path_text(text: str) -> str:
    """`str(Path(text))`, without making the Path when it would change nothing."""
    if (text and "//" not in text and "/./" not in text and not text.startswith("./")
            and not text.endswith(("/", "/.")) and text != "."):
        return text
    return str(Path(text))


def rebase(candidate: Candidate, spec: RootSpec | None) -> Candidate:
    # The settings may have changed since the last reindex: the plan's precedence counts.
    if spec is None or (spec.precedence, spec.position, spec.scope, spec.provider) == (
            candidate.precedence, candidate.position, candidate.scope, candidate.provider):
        return candidate
    return replace(candidate, scope=spec.scope, provider=spec.provider,
                   precedence=spec.precedence, position=spec.position)


def _screen(candidate: Candidate, spec: RootSpec | None, rules: Rules) -> Verdict | None:
    """The verdict of a candidate that cannot compete for its name, None for one that can."""
    if not candidate.accepted or candidate.name is None:
        errors = [f"{f.code}: {f.message}" for f in candidate.findings
                  if f.severity is Severity.ERROR]
        return Verdict(candidate, Outcome.REJECTED,
                       "invalid: " + ("; ".join(errors) or "rejected at index time"))
    screened = screen(candidate.name, candidate.enabled, spec, rules)
    return None if screened is None else Verdict(candidate, *screened)


def screen(name: str, enabled: bool, spec: RootSpec | None,
           rules: Rules) -> tuple[Outcome, str] | None:
    """Why an accepted candidate may not compete for its name (filters, then `enabled`)."""
    if not rules.enabled:
        return Outcome.FILTERED, "skills are switched off ([skills] enabled = false)"
    if spec is not None and spec.disabled_by is not None:
        return Outcome.FILTERED, f"source switched off ({spec.disabled_by})"
    ignored = first_match(rules.ignored, (name,))
    if ignored is not None:
        return Outcome.FILTERED, f"name matches ignored_skills pattern {ignored!r}"
    if rules.included and first_match(rules.included, (name,)) is None:
        patterns = ", ".join(repr(p) for p in rules.included)
        return Outcome.FILTERED, f"name matches no include_skills pattern ({patterns})"
    if not enabled:
        return Outcome.DISABLED, "its frontmatter says enabled: false"
    return None


def _source(candidate: Candidate) -> str:
    return f"{candidate.scope} {candidate.provider} root, precedence {candidate.precedence}"


def _beats(winner: Candidate, loser: Candidate) -> str:
    """What really put `winner` first: precedence, then registration order, then the path."""
    if winner.precedence > loser.precedence:
        return f"precedence {winner.precedence} > {loser.precedence}"
    if winner.position != loser.position:
        return (f"same precedence {winner.precedence}; its root {winner.root} is registered "
                f"before {loser.root}")
    return (f"same root {winner.root}; of files in one root the first in path order wins "
            f"({_within(winner)} before {_within(loser)})")


def _within(candidate: Candidate) -> str:
    try:
        return str(candidate.path.relative_to(candidate.root))
    except ValueError:
        return str(candidate.path)


class Names:
    """The names in use, and what a qualified name must avoid with them: a skill:// path meets
    another when one is the other or begins it (`kit` owns `skill://kit/pdf/SKILL.md` as its
    file `pdf/SKILL.md`, so `kit:pdf` would name that file too). Each name keeps the highest
    precedence of a skill holding it: a name held only below a skill's precedence is no reason
    for that skill to give way, since the lower side of a collision is the one that loses."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: dict[str, float] = {}
        self._heads: dict[str, float] = {}  # every proper `:`-prefix of a name in use
        self.update(names)

    def update(self, names: Iterable[str], precedence: float = math.inf) -> None:
        for name in names:
            self.add(name, precedence)

    def add(self, name: str, precedence: float) -> None:
        if self._names.get(name, -math.inf) < precedence:
            self._names[name] = precedence
        parts = name.split(":")
        for cut in range(1, len(parts)):
            head = ":".join(parts[:cut])
            if self._heads.get(head, -math.inf) < precedence:
                self._heads[head] = precedence

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def meets(self, name: str, precedence: float = -math.inf) -> bool:
        """Whether `name`'s skill path is, begins or is begun by the path of a name in use by
        a skill of at least this precedence."""
        parts = name.split(":")
        held = [self._names.get(name), self._heads.get(name),
                *(self._names.get(":".join(parts[:cut])) for cut in range(1, len(parts)))]
        return any(at is not None and at >= precedence for at in held)


def apply_policy(name: str, group: list[Candidate], policy: str,
                  taken: Names) -> list[Verdict]:
    top = group[0]
    if len(group) == 1:
        return [Verdict(top, Outcome.WINNER, f"the only usable candidate ({_source(top)})", name)]
    if policy == KEEP_ALL:
        return [Verdict(c, Outcome.WINNER, (
            f"kept with {len(group) - 1} other file(s) of the same name "
            f"(collision_policy keep-all; {_source(c)})"), name) for c in group]
    if policy == QUALIFY:
        names = _qualified(name, group, taken)
        return [Verdict(c, Outcome.WINNER, (
            f"kept as {qualified!r}: {len(group)} files declare {name!r} "
            f"(collision_policy qualify; {_source(c)})"), qualified)
            for c, qualified in zip(group, names, strict=True)]
    tied = _tied(group)
    if policy == REJECT_AMBIGUOUS and len(tied) > 1:
        tie = ", ".join(str(c.path) for c in tied)
        verdicts = []
        for candidate in group:
            if any(candidate is c for c in tied):
                others = ", ".join(str(c.path) for c in tied if c is not candidate)
                verdicts.append(Verdict(candidate, Outcome.REJECTED, (
                    f"ambiguous: {others} declares the same name at the same precedence "
                    f"{top.precedence} (collision_policy reject-ambiguous keeps neither)")))
            else:
                verdicts.append(Verdict(candidate, Outcome.SHADOWED, (
                    f"shadowed by the ambiguous tie at precedence {top.precedence} ({tie}); "
                    "reject-ambiguous lets no lower candidate take the name")))
        return verdicts
    if top.precedence > group[1].precedence:
        why = f"the highest precedence of the {len(group)} files declaring this name"
    elif top.position != group[1].position:
        why = (f"{len(group)} files declare this name; at precedence {top.precedence} the root "
               "registered first wins")
    else:
        why = (f"{len(group)} files declare this name; at precedence {top.precedence} they are "
               f"in the same root, where the first in path order wins")
    verdicts = [Verdict(top, Outcome.WINNER, f"{why} ({_source(top)})", name)]
    verdicts.extend(Verdict(c, Outcome.SHADOWED, f"shadowed by {top.path} ({_beats(top, c)})")
                    for c in group[1:])
    return verdicts


def _tied(group: list[Candidate]) -> list[Candidate]:
    """The candidates at the top precedence that only registration order tells apart: inside
    one preset provider the order is declared (project before user, nearest directory first),
    so only its first candidate counts; every other root stands on its own."""
    top = group[0].precedence
    tied: list[Candidate] = []
    for candidate in group:
        if candidate.precedence != top:
            break
        if candidate.provider in ORDERED_PROVIDERS and any(
                c.provider == candidate.provider for c in tied):
            continue
        tied.append(candidate)
    return tied


def _qualified(name: str, group: list[Candidate], taken: Names) -> list[str]:
    """`<scope>:<name>`; where that is not unique, `<provider>.<scope>:<name>`; then
    `<provider>.<scope>.<n>:<name>`, n counting that provider's roots of that scope from 1 in
    precedence order (1 = the nearest project directory). A form whose skill path meets a name
    in use at the candidate's precedence or above (`Names.meets`) is passed over; the last form
    takes a further `.<k>` until it meets none, so a qualification is never the file of a skill
    that ranks with it or above; a lower skill it meets is the lower side of a `uri-collision`."""
    counts: dict[tuple[str, str], int] = {}
    labels: list[tuple[str, str, str]] = []
    for candidate in group:
        key = (candidate.provider, str(candidate.scope))
        counts[key] = counts.get(key, 0) + 1
        scope = f"{candidate.provider}.{candidate.scope}"
        labels.append((str(candidate.scope), scope, f"{scope}.{counts[key]}"))
    names = []
    for own, candidate in zip(labels, group, strict=True):
        # Only a name held at this skill's precedence or above makes it give way: one held
        # below is the lower side of the collision, which loses it (`uri_collisions`).
        above = candidate.precedence
        level = next((level for level in range(2)
                      if sum(other[level] == own[level] for other in labels) == 1
                      and not taken.meets(f"{own[level]}:{name}", above)), 2)
        label, more = own[level], 1
        while level == 2 and taken.meets(f"{label}:{name}", above):
            more += 1
            label = f"{own[2]}.{more}"
        names.append(f"{label}:{name}")
    for qualified, candidate in zip(names, group, strict=True):
        taken.add(qualified, candidate.precedence)
    return names


def collision_of(name: str, policy: str, judged: list[Verdict]) -> Collision | None:
    if len(judged) < 2:
        return None
    return Collision(name=name, policy=policy,
                     paths=tuple(v.candidate.path for v in judged),
                     kept=tuple(v.candidate.path for v in judged
                                if v.outcome is Outcome.WINNER))


# The finding a reindex records on each skill whose skill:// URIs another winner's would share.
URI_COLLISION = "uri-collision"


def uri_collisions(winners: Iterable[tuple[str, int]]) -> dict[int, list[str]]:
    """The `uri-collision` messages of the winners (catalog name, candidate id, in resolution
    order: the higher precedence first) whose URIs would name another's files: each winner
    of a name with several (keep-all: each of its URIs names a file of each), and, of a name
    that begins another's skill path (the skill `kit` and the plugin skill `kit:pdf` both
    name `skill://kit/pdf/SKILL.md`), the one of lower precedence only: the URIs they share
    are the higher one's, and every surface withholds the lower. Only the winners
    that can meet need be given: names holding `:`, the names they begin, repeated names."""
    by_name: dict[str, list[int]] = {}
    for name, cid in winners:
        by_name.setdefault(name, []).append(cid)
    order = {name: number for number, name in enumerate(by_name)}
    found: dict[int, list[str]] = {}

    def note(ids: Iterable[int], message: str) -> None:
        for cid in ids:
            messages = found.setdefault(cid, [])
            if message not in messages:
                messages.append(message)

    for name, ids in by_name.items():
        path = name.replace(":", "/")
        if len(set(ids)) > 1:
            note(ids, f"{len(set(ids))} skills win the name {name!r} (collision_policy "
                      f"keep-all): every URI under skill://{path}/ would name a file of each, "
                      "so no surface serves them, and MCP serves none of the skills")
        parts = name.split(":")
        for cut in range(1, len(parts)):
            head = ":".join(parts[:cut])
            if head in by_name:
                higher, lower = (head, name) if order[head] < order[name] else (name, head)
                note(by_name[lower], (
                    f"the URIs under skill://{path}/ would name files of both the skill "
                    f"{head!r} and the skill {name!r}; they are the files of {higher!r}, "
                    f"which takes precedence, and every surface withholds {lower!r}"))
    return found
