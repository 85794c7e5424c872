"""What other hosts' fields change in a catalog: conditional skills, pins, manual-only skills,
`when_to_use` beside the description within a per-skill cap (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

from skillindex.index.dialect import HostFields, in_play
from skillindex.query.catalog import Catalog
from skillindex.query.modes import Arranged, Mode, Shown

_CANDIDATE_ID = attrgetter("candidate_id")


@dataclass(frozen=True, slots=True)
class Applied:
    """The catalog order once the hosts' fields are applied, and what they changed."""

    arranged: Arranged
    gated: tuple[tuple[str, str], ...]  # conditional skills no file in play matches, and why
    conditional: Mapping[int, tuple[str, ...]]  # candidate id -> its globs, for those listed


def apply(arranged: Arranged, hosts: Mapping[int, HostFields], *,
          files: Sequence[str] | None, dialects: bool) -> Applied:
    """Gate conditional skills on `files` (None: no files given, every skill stays); with
    `dialects`, pin `alwaysApply: true` and keep Codex's manual-only skills out."""
    pinned: list[Shown] = []
    rest: list[Shown] = []
    manual = list(arranged.manual)
    gated: list[tuple[str, str]] = []
    conditional: dict[int, tuple[str, ...]] = {}
    listed = arranged.listed
    # The winners with fields are few: where none of them is gated, kept out or pinned, the
    # order stands as it is, and the other winners need not be looked at one by one.
    fielded = [(number, host) for number, host in enumerate(
        map(hosts.get, map(_CANDIDATE_ID, listed))) if host is not None]
    if not any((files is not None and not in_play(host, files))
               or (dialects and (not host.implicit or host.always_apply))
               for _number, host in fielded):
        return Applied(arranged, (), {listed[number].candidate_id: host.paths
                                      for number, host in fielded if host.conditional})
    for shown in listed:
        host = hosts.get(shown.candidate_id)
        if host is None:
            (pinned if shown.mode is Mode.PINNED else rest).append(shown)
            continue
        if files is not None and not in_play(host, files):
            gated.append((shown.name, "conditional: its paths match none of the files in "
                          f"play ({', '.join(host.paths)})"))
            continue
        if dialects and not host.implicit:
            manual.append((shown.name, "manual-only: its agents/openai.yaml says "
                           "allow_implicit_invocation: false"))
            continue
        if host.conditional:
            conditional[shown.candidate_id] = host.paths
        if dialects and host.always_apply and shown.mode is not Mode.PINNED:
            pinned.append(shown._replace(mode=Mode.PINNED))
        else:
            (pinned if shown.mode is Mode.PINNED else rest).append(shown)
    return Applied(Arranged(tuple(pinned + rest), tuple(manual), arranged.ranked_by),
                   tuple(gated), conditional)


def described(description: str, host: HostFields | None) -> str:
    """The description a host shows: `when_to_use` after it, on the same folded line."""
    if host is None or not host.when_to_use:
        return description
    return f"{description} {host.when_to_use}" if description else host.when_to_use


def marked(catalog: Catalog, cut: set[str], conditional: Mapping[str, tuple[str, ...]]
           ) -> Catalog:
    """The catalog's entries (by location) marked truncated where the per-skill cap cut their
    text, and with the globs of conditional skills."""
    if not cut and not conditional:
        return catalog
    entries = tuple(
        replace(entry, truncated=entry.truncated or entry.location in cut,
                conditional=conditional.get(entry.location, ()))
        for entry in catalog.entries)
    return replace(catalog, entries=entries)
