"""The winner a catalog name stands for here: looked up in the stored resolution when there is
one, else resolved from the candidates that can bear on that name, with quarantine applied.

Every use case that names a skill (read, command, winner, explain, manifest, search) finds it
here, through the store it is given: the library's sessions or the fast path's connection.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from skillindex.errors import (
    AmbiguousUriError,
    QuarantinedError,
    SkillIndexError,
    SkillNotFoundError,
    SkillRejectedError,
    UriCollisionError,
)
from skillindex.model import Candidate, Finding, ManifestFile, RiskPolicy, Severity
from skillindex.query import advisories, disclose, lockfile, staleness, trust
from skillindex.query.disclose import SkillRef
from skillindex.query.reader import Here, NotStored
from skillindex.query.resolve import KEEP_ALL, Resolution, Winner, rank, resolve
from skillindex.text import is_text, shown_name

# The place in what was asked of the first name that wins, its winner, and the manifest row of
# the file asked with it (None when none was asked, or it was not indexed).
Found = tuple[int, Winner, ManifestFile | None]


@dataclass(frozen=True, slots=True)
class Risky:
    """What quarantine is decided by, for the winners whose root quarantines: their risk
    findings, the manifests of those with findings, the approved digests of their names, and
    what those skills hold that their manifests leave out (bound by the digest as findings)."""

    findings: Mapping[int, Sequence[Finding]]  # by candidate id; only the candidates with some
    manifests: Mapping[int, Sequence[ManifestFile]]
    approved: Mapping[str, frozenset[str]]
    left_out: Mapping[int, Sequence[Finding]]


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

    def stored_wins(self, here: Here, names: Sequence[str]) -> bool:
        """Whether one of `names` has a winner in the stored resolution of `here`'s roots."""
        ...

    def feed(self, here: Here) -> advisories.Feed:
        """The advisories in force from the feeds `here`'s settings name."""
        ...

    def skill_facts(self, candidate_ids: Sequence[int],
                    ) -> Mapping[int, tuple[str | None, str | None]]:
        """(sha256 of SKILL.md, frontmatter JSON) of these candidates."""
        ...

    def manifest_file(self, candidate_id: int, rel_path: str) -> ManifestFile | None: ...

    def uri_collision(self, candidate_id: int) -> str | None:
        """The `uri-collision` warning the reindex recorded on this candidate, if any."""
        ...

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
           uri: str) -> tuple[SkillRef, Candidate, ManifestFile | None]:
    """What a skill:// URI names here: the one reading of it (`disclose.parse_uri_options`)
    whose skill path names a winner, that winner's candidate and the manifest row of the file
    the reading names. Every surface that reads a URI finds it here.

    When two readings name winners (the skill `kit` with a file `pdf/SKILL.md` and the plugin
    skill `kit:pdf`), the URI is the file of the winner of higher precedence (`resolve.rank`):
    the lower side of a collision is the one that loses, as it loses a name, so a skill of
    lower precedence can never take a URI of one above it. When its name has several winners
    (collision_policy keep-all), it names no one file and AmbiguousUriError refuses it."""
    options = disclose.parse_uri_options(uri)
    # Bytes of argv that are not UTF-8 name no skill (nor can a database bind them).
    refs = [ref for ref in options if is_text(ref.name)]
    place, found, expected = _first(store, here, [(ref.name, ref.file) for ref in refs],
                                    shown=options[-1].name, hint=len(options) == 1, uri=uri)
    if not _several(found):  # keep-all's warning is on each winner, refused as ambiguous
        collided = store.uri_collision(found.candidate.id)
        if collided is not None:
            # Any spelling of its URIs (`skill://kit:pdf`, which no other skill's path
            # reads as its own) reaches the lower side: each surface withholds it, as MCP does.
            raise UriCollisionError(
                f"skill {shown_name(found.name)} is withheld (uri-collision): {collided}; "
                f"`skillindex explain {shown_name(found.name)}` shows both", skill=found.name)
    return refs[place], found.candidate, expected


def _first(store: Store, here: Here, wanted: Sequence[tuple[str, str | None]], *, shown: str,
           hint: bool, uri: str | None = None) -> Found:
    """The first of `wanted` that wins here; SkillNotFoundError names `shown`, with the
    staleness note when `hint`. With `uri`, the readings of that URI: one more that wins, or
    a name with several winners, makes it ambiguous."""
    if not here.quarantining:
        try:
            found = store.stored_winner(here, wanted)
        except NotStored:
            pass
        else:
            if found is None:
                raise not_found(store, here, shown, hint=hint)
            if uri is not None:
                found = _best_reading(store, here, wanted, found, uri)
            return found
    resolution = withheld(store, here, resolution_of(store, here, [n for n, _ in wanted],
                                                     all_findings=False))
    winners: dict[str, Winner] = {}
    for w in resolution.winners:
        winners.setdefault(w.name, w)  # keep-all: a name's first file, as a stored one
    held = {name: verdict.candidate for name, _ in wanted
            if name not in winners
            and (verdict := trust.held_verdict(resolution, name)) is not None}
    hits = [place for place, (name, _) in enumerate(wanted) if name in winners or name in held]
    if uri is not None and hits:
        several = next((wanted[place][0] for place in hits if wanted[place][0] in winners
                        and _several(winners[wanted[place][0]])), None)
        if several is not None:
            raise ambiguous(uri, several)
        # A quarantined skill still holds its name, and so its URIs.
        hits = [min(hits, key=lambda place: rank(
            winners[wanted[place][0]].candidate if wanted[place][0] in winners
            else held[wanted[place][0]]))]
    for place in hits:
        name, rel_path = wanted[place]
        if name in winners:
            chosen = winners[name]
            expected = (None if rel_path is None
                        else store.manifest_file(chosen.candidate.id, rel_path))
            return place, chosen, expected
        verdict = trust.held_verdict(resolution, name)
        if verdict is not None:
            raise QuarantinedError(f"skill {name} is {verdict.reason}", skill=name)
    raise not_found(store, here, shown, hint=hint)


def _best_reading(store: Store, here: Here, wanted: Sequence[tuple[str, str | None]],
                  found: Found, uri: str) -> Found:
    """Of the readings of `uri` that name stored winners, the one whose winner ranks first
    (`found` is the first reading that wins); AmbiguousUriError for a keep-all name."""
    place, best, _ = found
    if _several(best):
        raise ambiguous(uri, best.name)
    start = place + 1
    while start < len(wanted) and store.stored_wins(here, [n for n, _ in wanted[start:]]):
        other = store.stored_winner(here, wanted[start:])
        if other is None:
            break
        shift, winner, expected = other
        if _several(winner):
            raise ambiguous(uri, winner.name)
        if rank(winner.candidate) < rank(best.candidate):
            found = (start + shift, winner, expected)
            best = winner
        start += shift + 1
    return found


def _several(winner: Winner) -> bool:
    """Whether the winner's name is kept for other files too (collision_policy keep-all)."""
    collision = winner.collision
    return (collision is not None and collision.policy == KEEP_ALL
            and len(collision.kept) > 1)


def ambiguous(uri: str, name: str) -> AmbiguousUriError:
    return AmbiguousUriError(f"{uri} is ambiguous: it would name the files of more than one "
                             "skill (uri-collision), so it is not served; `skillindex explain "
                             f"{name}` shows them", skill=name)


def not_found(store: Store, here: Here, name: str, *, hint: bool) -> SkillNotFoundError:
    """No skill of that name here: SkillRejectedError, with its codes, when the index holds
    one and rejected it; else, with `hint`, why the index may not show it."""
    if is_text(name):
        rejected = [c for c in store.candidates(here, [name], all_findings=False)
                    if not c.accepted]
        if rejected:
            codes = dict.fromkeys(f.code for c in rejected for f in c.findings
                                  if f.severity is Severity.ERROR)
            return SkillRejectedError(shown_name(name), list(codes))
    note = staleness.note(here.settings, lambda: staleness.stale_roots(
        here.roots, store.root_scans(here))) if hint else None
    return SkillNotFoundError(shown_name(name), hint=note)


def resolution_of(store: Store, here: Here, wanted: Iterable[str], *,
                  all_findings: bool = True) -> Resolution:
    """The resolution of these names, from the candidates that can bear on them alone.

    A qualified catalog name (`user:pdf`, `kit:pdf`) stands for what follows its first colon,
    so both spellings are loaded, with the names a qualification avoids (each `:`-prefix of
    the name, each form its label may take); names of other skills do not change the outcome
    (except a qualified name avoiding a longer one declared elsewhere, which only the full
    resolution sees).
    """
    names = set()
    for name in wanted:
        if not is_text(name):  # bytes that are not UTF-8 (from argv): no skill has that name
            continue
        names.add(name)
        if ":" in name:
            names.update(_avoided(name))
    found = store.candidates(here, sorted(names), all_findings=all_findings)
    return resolve(found, here.roots, here.rules)


def _avoided(name: str) -> set[str]:
    """What the qualification `name` may have been chosen to avoid: the declared name after
    its first colon, every `:`-prefix of it, and the other forms of its label
    (`<scope>`, `<provider>.<scope>`, `<provider>.<scope>.<n>`) with and without the name."""
    label, _, declared = name.partition(":")
    parts = name.split(":")
    found = {declared, *(":".join(parts[:cut]) for cut in range(1, len(parts)))}
    pieces = label.split(".")
    forms = {".".join(pieces[:cut]) for cut in range(1, len(pieces) + 1)}
    forms.update(pieces)
    found.update(forms)
    found.update(f"{form}:{declared}" for form in forms)
    return found


def withheld(store: Store, here: Here, resolution: Resolution) -> Resolution:
    """The resolution without the winners an advisory revokes or risk_policy = quarantine
    holds back."""
    if here.settings.advisories:
        resolution = trust.withhold(resolution, revoked(store, here, resolution.winners))
    policies = here.policies
    quarantining = [w for w in resolution.winners
                    if policies.get(str(w.candidate.root)) is RiskPolicy.QUARANTINE]
    if not quarantining:
        return resolution  # the default, warn: no query at all
    risky = store.risky(here, quarantining)
    if risky is None:
        return resolution
    digests = {cid: trust.manifest_digest(risky.manifests.get(cid, ()),
                                          [*found, *risky.left_out.get(cid, ())])
               for cid, found in risky.findings.items()}
    return trust.withhold(resolution, trust.holds(resolution.winners, policies, risky.findings,
                                                  digests, risky.approved))


def revoked(store: Store, here: Here, found: Sequence[Winner]) -> dict[str, trust.Revoked]:
    """The winners an advisory in force names, each with its advisory."""
    feed = store.feed(here)
    if not feed or not found:
        return {}
    facts = store.skill_facts([w.candidate.id for w in found]) if (
        feed.by_digest or feed.by_version) else {}
    held: dict[str, trust.Revoked] = {}
    limit = here.settings.max_skill_bytes
    for w in found:
        candidate = w.candidate
        digest, front = facts.get(candidate.id, (None, None))
        names = {w.name, *([candidate.name] if candidate.name else [])}
        version = None
        if front is not None and names & feed.versioned:
            version = advisories.version_of(_mapping(front))
        match = feed.match(sorted(names), version=version, skill_md=digest,
                           whole=functools.partial(_whole_hash, candidate, limit))
        if match is not None:
            held[w.name] = trust.Revoked(w.name, match)
    return held


def _mapping(text: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _whole_hash(candidate: Candidate, limit: int) -> str | None:
    """The sha256 of the skill's folder as the lock file computes it, read from disk now; None
    when it cannot be read (the read itself then refuses the skill)."""
    try:
        return lockfile.computed_hash(lockfile.folder_files(candidate.real_path,
                                                            max_bytes=limit))
    except (OSError, SkillIndexError):
        return None
