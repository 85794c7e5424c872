"""Decides how the catalog shows each winner (its mode) and in what order, as pure functions."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from skillindex.config import CatalogModes
from skillindex.inputs import first_match
from skillindex.model import Listing, has_text
from skillindex.query.resolve import Winner


class Mode(enum.StrEnum):
    LISTED = "listed"
    PINNED = "pinned"
    NAMES_ONLY = "names-only"
    MANUAL_ONLY = "manual-only"


@dataclass(frozen=True, slots=True)
class CatalogMode:
    """A winner's catalog mode and the reason in words."""

    mode: Mode
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"mode": str(self.mode), "reason": self.reason}


def mode_of(winner: Winner, modes: CatalogModes) -> CatalogMode:
    """The first that applies: the frontmatter's `disable-model-invocation: true`, then the
    `[skills.catalog]` globs manual_only, pinned, names_only (on the catalog name or the
    declared one); keeping a skill from the model is the safer reading of a conflict."""
    return mode_for(winner.name, winner.candidate.name, winner.candidate.model_invocation, modes)


def mode_for(name: str, declared: str | None, model_invocation: bool,
             modes: CatalogModes) -> CatalogMode:
    """`mode_of` from the columns it reads: catalog name, declared name, model invocation."""
    if not model_invocation:
        return CatalogMode(Mode.MANUAL_ONLY, "its frontmatter says disable-model-invocation: "
                           "true (loadable by /skill: and read, not listed for the model)")
    names = {name, declared or name}
    for mode, key, globs in ((Mode.MANUAL_ONLY, "manual_only", modes.manual_only),
                             (Mode.PINNED, "pinned", modes.pinned),
                             (Mode.NAMES_ONLY, "names_only", modes.names_only)):
        glob = first_match(globs, names)
        if glob is not None:
            return CatalogMode(mode, f"name matches [skills.catalog] {key} pattern {glob!r}")
    return _LISTED


_LISTED = CatalogMode(Mode.LISTED, "no [skills.catalog] pattern names it")


def manual_only(winner: Winner, modes: CatalogModes) -> bool:
    """Whether the catalog keeps this winner from the model (so must a search for the model)."""
    return mode_of(winner, modes).mode is Mode.MANUAL_ONLY


class Shown(NamedTuple):
    """A winner the catalog may show, with its mode (and why, for a names-only one) and, in a
    catalog ranked by a search, its rank among the matches (1 the best)."""

    name: str
    location: str
    candidate_id: int
    mode: Mode
    described: bool
    why: str = ""
    rank: int | None = None


def listing_of(winner: Winner) -> Listing:
    description = winner.candidate.description
    return Listing(winner.name, winner.candidate.name, winner.candidate.id or 0,
                   str(winner.candidate.path), winner.candidate.model_invocation,
                   has_text(description))


@dataclass(frozen=True, slots=True)
class Arranged:
    """Winners in the order the catalog offers them, with their modes, and those it must not."""

    listed: tuple[Shown, ...]
    manual: tuple[tuple[str, str], ...]  # manual-only winners' names and why
    ranked_by: str


def arrange(winners: Iterable[Listing], modes: CatalogModes, *,
            scores: Mapping[int, float] | None = None,
            usage: Mapping[str, int] | None = None) -> Arranged:
    """Pinned winners first; then, with `scores` (a search), matched winners best first and the
    rest after; with `usage`, the most loaded first; else precedence order. Every sort is
    stable, so precedence breaks ties. Winners are read once, as they come."""
    pinned: list[Shown] = []
    rest: list[Shown] = []
    manual: list[tuple[str, str]] = []
    patterned = bool(modes.manual_only or modes.pinned or modes.names_only)
    # tuple.__new__ rather than Shown(...): no Python-level call for each of the winners.
    listed, made = Mode.LISTED, tuple.__new__
    for name, declared, cid, location, invocable, described in winners:
        if invocable and not patterned:
            rest.append(made(Shown, (name, location, cid, listed, described, "", None)))
            continue
        mode = mode_for(name, declared, invocable, modes)
        if mode.mode is Mode.MANUAL_ONLY:
            manual.append((name, f"manual-only: {mode.reason}"))
        else:
            why = f"mode: {mode.reason}" if mode.mode is Mode.NAMES_ONLY else ""
            (pinned if mode.mode is Mode.PINNED else rest).append(
                Shown(name, location, cid, mode.mode, described, why))
    if scores is not None:
        rest.sort(key=lambda item: -scores.get(item.candidate_id, float("-inf")))
        rest = [shown._replace(rank=number) if shown.candidate_id in scores else shown
                for number, shown in enumerate(rest, 1)]
        ranked_by = "query"
    elif usage is not None:
        rest.sort(key=lambda item: -usage.get(item.name, 0))
        ranked_by = "usage"
    else:
        ranked_by = "precedence"
    return Arranged(tuple(pinned + rest), tuple(manual), ranked_by)
