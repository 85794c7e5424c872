"""The winner a catalog name stands for here: looked up in the stored resolution when there is
one, else resolved from the candidates that can bear on that name, with quarantine applied.

Every use case that names a skill (read, command, winner, explain, manifest, search) finds it
here, through the store it is given: the library's sessions or the fast path's connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from skillindex.errors import QuarantinedError, SkillNotFoundError
from skillindex.model import Candidate, Finding, ManifestFile, RiskPolicy
from skillindex.query import staleness, trust
from skillindex.query.disclose import SkillRef
from skillindex.query.reader import Here, NotStored
from skillindex.query.resolve import Resolution, Winner, resolve
from skillindex.text import is_text, shown_name

# The place in what was asked of the first name that wins, its winner, and the manifest row of
# the file asked with it (None when none was asked, or it was not indexed).
Found = tuple[int, Winner, ManifestFile | None]


@dataclass(frozen=True, slots=True)
class Risky:
    """What quarantine is decided by, for the winners whose root quarantines: their risk
    findings, the manifests of those with findings, the approved digests of their names."""

    findings: Mapping[int, Sequence[Finding]]  # by candidate id; only the candidates with some
    manifests: Mapping[int, Sequence[ManifestFile]]
    approved: Mapping[str, frozenset[str]]


class Store(Protocol):
    """What finding a winner reads."""

    def stored_winner(self, here: Here, wanted: Sequence[tuple[str, str | None]]) -> Found | None:
        """From the stored resolution of `here`'s roots: the first (name, file) of `wanted`
        whose name wins; None when none does. NotStored when no resolution applies."""
        ...

    def candidates(self, here: Here, names: Sequence[str], *,
                   all_findings: bool) -> list[Candidate]:
        """Every candidate of `here`'s roots declaring one of `names`."""
        ...

    def risky(self, here: Here, winners: Sequence[Winner]) -> Risky | None:
        """The facts quarantine needs about these winners; None when none has a risk finding."""
        ...

    def manifest_file(self, candidate_id: int, rel_path: str) -> ManifestFile | None: ...

    def root_scans(self, here: Here) -> staleness.Scans: ...


def winner(store: Store, here: Here, name: str) -> Winner:
    """The winner `name` (a catalog name) stands for; SkillNotFoundError when none,
    QuarantinedError when risk_policy = quarantine holds it back."""
    return with_file(store, here, name, None)[0]


def with_file(store: Store, here: Here, name: str,
              rel_path: str | None) -> tuple[Winner, ManifestFile | None]:
    """`winner`, and the manifest row of one of its files (None when not indexed)."""
    wanted: list[tuple[str, str | None]] = [(name, rel_path)] if is_text(name) else []
    _, found, expected = _first(store, here, wanted, shown=name, hint=True)
    return found, expected


def locate(store: Store, here: Here,
           options: Sequence[SkillRef]) -> tuple[SkillRef, Candidate, ManifestFile | None]:
    """The first reading of a URI (`disclose.parse_uri_options`, longest skill path first) whose
    skill path names a winner here, with that winner's candidate and the manifest row of the
    file the reading names."""
    # Bytes of argv that are not UTF-8 name no skill (nor can a database bind them).
    refs = [ref for ref in options if is_text(ref.name)]
    place, found, expected = _first(store, here, [(ref.name, ref.file) for ref in refs],
                                    shown=options[-1].name, hint=len(options) == 1)
    return refs[place], found.candidate, expected


def _first(store: Store, here: Here, wanted: Sequence[tuple[str, str | None]], *, shown: str,
           hint: bool) -> Found:
    """The first of `wanted` that wins here; SkillNotFoundError names `shown`, with the
    staleness note when `hint`."""
    if not here.quarantining:
        try:
            found = store.stored_winner(here, wanted)
        except NotStored:
            pass
        else:
            if found is None:
                raise not_found(store, here, shown, hint=hint)
            return found
    resolution = withheld(store, here, resolution_of(store, here, [n for n, _ in wanted],
                                                     all_findings=False))
    winners = {w.name: w for w in resolution.winners}
    for place, (name, rel_path) in enumerate(wanted):
        if name in winners:
            chosen = winners[name]
            expected = (None if rel_path is None
                        else store.manifest_file(chosen.candidate.id, rel_path))
            return place, chosen, expected
        held = trust.held_verdict(resolution, name)
        if held is not None:
            raise QuarantinedError(f"skill {name} is {held.reason}", skill=name)
    raise not_found(store, here, shown, hint=hint)


def not_found(store: Store, here: Here, name: str, *, hint: bool) -> SkillNotFoundError:
    """No skill of that name here; with `hint`, why the index may not show it."""
    note = staleness.note(here.settings, lambda: staleness.stale_roots(
        here.roots, store.root_scans(here))) if hint else None
    return SkillNotFoundError(shown_name(name), hint=note)


def resolution_of(store: Store, here: Here, wanted: Iterable[str], *,
                  all_findings: bool = True) -> Resolution:
    """The resolution of these names, from the candidates that can bear on them alone.

    A qualified catalog name (`user:pdf`, `kit:pdf`) stands for what follows its first colon,
    so both spellings are loaded; names of other skills do not change the outcome (except a
    qualified name avoiding one declared elsewhere, which only the full resolution sees).
    """
    names = set()
    for name in wanted:
        if not is_text(name):  # bytes that are not UTF-8 (from argv): no skill has that name
            continue
        names.add(name)
        if ":" in name:
            names.add(name.split(":", 1)[1])
    found = store.candidates(here, sorted(names), all_findings=all_findings)
    return resolve(found, here.roots, here.rules)


def withheld(store: Store, here: Here, resolution: Resolution) -> Resolution:
    """The resolution without the winners that risk_policy = quarantine holds back."""
    policies = here.policies
    quarantining = [w for w in resolution.winners
                    if policies.get(str(w.candidate.root)) is RiskPolicy.QUARANTINE]
    if not quarantining:
        return resolution  # the default, warn: no query at all
    risky = store.risky(here, quarantining)
    if risky is None:
        return resolution
    digests = {cid: trust.manifest_digest(risky.manifests.get(cid, ()))
               for cid in risky.findings}
    return trust.withhold(resolution, trust.holds(resolution.winners, policies, risky.findings,
                                                  digests, risky.approved))
