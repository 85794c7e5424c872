"""Why a name is or is not in the catalog: every candidate for it with its outcome and the
reason, and how the catalog shows the winner."""

from __future__ import annotations

from dataclasses import replace

from skillindex.index.dialect import HostFields
from skillindex.query import lookup, modes, resolve
from skillindex.query.library import Library
from skillindex.query.modes import CatalogMode, Mode
from skillindex.query.reader import Here
from skillindex.query.resolve import Explanation
from skillindex.store import resolved


def explain(store: Library, here: Here, name: str) -> Explanation:
    """Every candidate for `name` with its outcome and the reason; SkillNotFoundError when none."""
    resolution = lookup.withheld(store, here, lookup.resolution_of(store, here, [name]))
    explanation = resolve.explain(resolution, name)
    if explanation is None:
        raise lookup.not_found(store, here, name, hint=True)
    if explanation.winner is None:
        return explanation
    mode = modes.mode_of(explanation.winner, here.settings.catalog)
    if mode.mode in (Mode.LISTED, Mode.NAMES_ONLY):
        mode = _with_host_fields(store, explanation.winner.candidate.id, mode,
                                 dialects=here.settings.dialects)
    return replace(explanation, catalog_mode=(str(mode.mode), mode.reason))


def _with_host_fields(store: Library, candidate_id: int, mode: CatalogMode, *,
                      dialects: bool) -> CatalogMode:
    """The mode once other hosts' fields apply, as the catalog applies them (query/dialect.py):
    with `dialects`, Codex's manual-only policy keeps it out and `alwaysApply: true` pins it."""
    with store.session() as session:
        stored = resolved.host_fields(session, [candidate_id]).get(candidate_id)
    if stored is None:
        return mode
    host = HostFields.from_json(stored)
    if not dialects:
        if host.always_apply:
            return replace(mode, reason=f"{mode.reason}; its frontmatter's alwaysApply: true "
                                        "pins it only with dialects = true")
        return mode
    if not host.implicit:
        return CatalogMode(Mode.MANUAL_ONLY, "its agents/openai.yaml says "
                           "allow_implicit_invocation: false (dialects = true)")
    if host.always_apply:
        return CatalogMode(Mode.PINNED, "its frontmatter says alwaysApply: true "
                           "(dialects = true)")
    return mode
