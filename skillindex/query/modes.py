"""Decides how the catalog shows each winner (its mode) and in what order, as pure functions."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from skillindex.config import CatalogModes
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
    if not winner.candidate.model_invocation:
        return CatalogMode(Mode.MANUAL_ONLY, "its frontmatter says disable-model-invocation: "
                           "true (loadable by /skill: and read, not listed for the model)")
    names = {winner.name, winner.candidate.name or winner.name}
    for mode, key, globs in ((Mode.MANUAL_ONLY, "manual_only", modes.manual_only),
                             (Mode.PINNED, "pinned", modes.pinned),
                             (Mode.NAMES_ONLY, "names_only", modes.names_only)):
        glob = next((g for g in globs if any(fnmatchcase(name, g) for name in names)), None)
        if glob is not None:
            return CatalogMode(mode, f"name matches [skills.catalog] {key} pattern {glob!r}")
    return CatalogMode(Mode.LISTED, "no [skills.catalog] pattern names it")


@dataclass(frozen=True, slots=True)
class Arranged:
    """Winners in the order the catalog offers them, with their modes, and those it must not."""

    listed: tuple[tuple[Winner, Mode], ...]
    manual: tuple[tuple[Winner, str], ...]  # manual-only winners and why
    ranked_by: str


def arrange(winners: Sequence[Winner], modes: CatalogModes, *,
            scores: Mapping[int, float] | None = None,
            usage: Mapping[str, int] | None = None) -> Arranged:
    """Pinned winners first; then, with `scores` (a search), matched winners best first and the
    rest after; with `usage`, the most loaded first; else precedence order. Every sort is
    stable, so precedence breaks ties."""
    pinned: list[tuple[Winner, Mode]] = []
    rest: list[tuple[Winner, Mode]] = []
    manual: list[tuple[Winner, str]] = []
    for winner in winners:
        mode = mode_of(winner, modes)
        if mode.mode is Mode.MANUAL_ONLY:
            manual.append((winner, f"manual-only: {mode.reason}"))
        else:
            (pinned if mode.mode is Mode.PINNED else rest).append((winner, mode.mode))
    if scores is not None:
        rest.sort(key=lambda item: -scores.get(item[0].candidate.id, float("-inf")))
        ranked_by = "query"
    elif usage is not None:
        rest.sort(key=lambda item: -usage.get(item[0].name, 0))
        ranked_by = "usage"
    else:
        ranked_by = "precedence"
    return Arranged(tuple(pinned + rest), tuple(manual), ranked_by)
