"""Why a name is or is not in the catalog: every candidate for it with its outcome and the
reason, and how the catalog shows the winner."""

from __future__ import annotations

from dataclasses import replace

from skillindex.query import lookup, modes, resolve
from skillindex.query.reader import Here
from skillindex.query.resolve import Explanation


def explain(store: lookup.Store, here: Here, name: str) -> Explanation:
    """Every candidate for `name` with its outcome and the reason; SkillNotFoundError when none."""
    resolution = lookup.withheld(store, here, lookup.resolution_of(store, here, [name]))
    explanation = resolve.explain(resolution, name)
    if explanation is None:
        raise lookup.not_found(store, here, name, hint=True)
    if explanation.winner is None:
        return explanation
    mode = modes.mode_of(explanation.winner, here.settings.catalog)
    return replace(explanation, catalog_mode=(str(mode.mode), mode.reason))
