"""What the index holds for this directory, as lists: the candidates (all, rejected, counted),
the winners and the names in collision, the roots and whether the index is behind on them, the
stored manifests a server publishes, the risk findings. Read through the library's sessions."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from skillindex.errors import ConfigError
from skillindex.index import dialect, risk, signing
from skillindex.model import (
    Candidate,
    FindingCount,
    RiskFinding,
    RootState,
    SkillManifest,
    Status,
    StoredSkill,
)
from skillindex.query import lookup, resolve, staleness, winners
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.query.resolve import Collision, Resolution, Winner
from skillindex.store import feeds, queries, served
from skillindex.store import resolved as stored_sets


def iter_winners(store: Library, here: Here, *, findings: bool) -> Iterator[Winner]:
    """The winners in catalog order, read a page at a time from the stored resolution."""
    with store.session() as session:
        set_id = store.resolution_set(session, here)
        if set_id is None:
            yield from resolution(store, here, all_findings=findings).winners
            return
        yield from winners.Reader(session, set_id, here.roots).winners(findings=findings)


def argument_hints(store: Library, here: Here) -> dict[int, str]:
    """The `argument-hint` of each winner that declares one, by candidate id."""
    with store.session() as session:
        set_id = store.resolution_set(session, here)
        if set_id is not None:
            stored = stored_sets.winner_host_fields(session, set_id)
        else:
            ids = [w.candidate.id for w in resolution(store, here, all_findings=False).winners]
            stored = dict(stored_sets.host_fields(session, ids))
    return dialect.argument_hints(stored)


def signers(store: Library, here: Here) -> dict[int, str]:
    """The verified signer of each winner whose signature was verified, by candidate id."""
    with store.session() as session:
        set_id = store.resolution_set(session, here)
        if set_id is not None:
            stored: dict[int, str | None] = dict(stored_sets.winner_signatures(session, set_id))
        else:
            ids = [w.candidate.id for w in resolution(store, here, all_findings=False).winners]
            stored = queries.signatures(session, ids)
    return signing.signers(stored)


def collisions(store: Library, here: Here) -> list[Collision]:
    """Every name more than one file of this directory's roots declares."""
    with store.session() as session:
        set_id = store.resolution_set(session, here)
        if set_id is None:
            return list(resolution(store, here, all_findings=False).collisions)
        return winners.Reader(session, set_id, here.roots).collisions()


def resolution(store: Library, here: Here, *, all_findings: bool) -> Resolution:
    """Every candidate of this directory judged by the filters and the collision policy, with
    the winners that quarantine holds back withheld."""
    with store.session() as session:
        found = queries.candidates(session, here.index_name, here.paths,
                                   all_findings=all_findings)
    return lookup.withheld(store, here, resolve.resolve(found, here.roots, here.rules))


def iter_candidates(store: Library, here: Here, *, status: Status | None, code: str | None,
                    limit: int | None, page: int) -> Iterator[Candidate]:
    """The candidates of the roots in precedence order, a page at a time (root by root, each in
    path order), with a finding of `code` if given, the first `limit` if given."""
    check_limit(limit)
    left = limit
    with store.session() as session:
        for spec in here.by_precedence:
            for found in queries.candidate_pages(session, here.index_name, str(spec.path),
                                                 page, status=status, code=code):
                for candidate in found:
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield resolve.rebase(candidate, spec)


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ConfigError(f"limit must be 0 or more, not {limit}")


def count(store: Library, here: Here, *, rejected: bool) -> int:
    with store.session() as session:
        return queries.candidate_count(session, here.index_name, here.paths,
                                       status=Status.REJECTED if rejected else None)


def finding_counts(store: Library, here: Here, *, rejected: bool) -> list[FindingCount]:
    with store.session() as session:
        return queries.finding_counts(session, here.index_name, here.paths,
                                      status=Status.REJECTED if rejected else None)


def roots(store: Library, here: Here) -> list[RootState]:
    """The roots of this directory in precedence order (registration order breaks ties), as
    the collision policy ranks their candidates."""
    with store.session() as session:
        states = queries.root_states(session, here.index_name, here.roots)
    states.sort(key=lambda state: (-state.spec.precedence, state.spec.position))
    if not any(spec.remote for spec in here.roots):
        return states
    from skillindex.index import remote  # noqa: PLC0415 (only where a URL root is)

    return [state if state.spec.remote is None else
            replace(state, stale=remote.stale_note(state.spec)) for state in states]


def origin(here: Here, candidate: Candidate) -> dict[str, str | None] | None:
    """Where a candidate of a URL root was fetched from (the artifact's URL and digest) and
    whether that copy is stale; None for a local candidate."""
    spec = next((spec for spec in here.roots
                 if spec.remote is not None and spec.path == candidate.root), None)
    if spec is None:
        return None
    from skillindex.index import remote  # noqa: PLC0415 (only where a URL root is)

    status = remote.status(spec)
    name = candidate.directory.name
    found = status.provenance(name) if status else None
    return {"url": None if found is None else found["url"],
            "digest": None if found is None else found["digest"],
            "stale": status.entry_note(name) if status else None}


def stale_roots(store: Library, here: Here) -> list[Path]:
    """Roots whose skills the index may not show: never indexed, or changed since their last
    scan. A stat per root."""
    return staleness.stale_roots(here.roots, store.root_scans(here))


def staleness_note(store: Library, here: Here) -> str | None:
    """Why the index may show fewer skills than the folders hold, in words; None if no reason
    is known."""
    return staleness.note(here.settings, lambda: stale_roots(store, here), here.roots)


def risks(store: Library, here: Here, *, code: str | None) -> list[RiskFinding]:
    """The risk findings of the skills of this directory's roots, by skill and file."""
    if code is not None and code not in risk.CODES:
        raise ConfigError(f"unknown risk code {code!r} (use {', '.join(risk.CODES)})")
    with store.session() as session:
        rows = queries.risk_rows(session, here.index_name, here.paths,
                                 (code,) if code else risk.CODES)
    return [RiskFinding(name=name, skill_path=Path(skill_path), code=found_code,
                        path=path, line=line, message=message)
            for name, skill_path, found_code, path, line, message in rows]


def manifests(store: Library, found: Sequence[Winner]) -> list[SkillManifest]:
    """The stored manifests of these winners, in one pass, the frontmatter exactly as the file
    declared it (empty when it could not be parsed); no file is read."""
    ids = [winner.candidate.id for winner in found]
    with store.session() as session:
        stored = queries.frontmatters(session, ids)
        files = queries.manifest_files(session, ids)
    return [SkillManifest(name=w.name, candidate=w.candidate,
                          frontmatter=_object(stored.get(w.candidate.id)),
                          files=tuple(files.get(w.candidate.id, ()))) for w in found]


def iter_stored_skills(store: Library, here: Here, *, page: int) -> Iterator[StoredSkill]:
    """Every winner's stored frontmatter and files in catalog order, `page` winners a
    transaction, from the stored resolution named by its key (else resolved here)."""
    with store.session() as session:
        set_id = store.resolution_set(session, here)
        key = None if set_id is None else served.set_key(session, set_id)
    if key is None:
        listed = manifests(store, list(iter_winners(store, here, findings=True)))
        signed = signing.signers(store.signatures([found.candidate.id for found in listed]))
        for found in listed:
            yield StoredSkill(found.name, None, found.frontmatter, found.files,
                              signed.get(found.candidate.id))
        return
    after = 0
    while True:
        with store.session() as session:
            rows = served.stored_page(session, here.index_name, key, after, page)
        for _, name, front, files, signature in rows:
            yield StoredSkill(name, key, _object(front), tuple(files),
                              signing.signers({0: signature}).get(0) if signature else None)
        if len(rows) < page:
            return
        after = rows[-1][0]


def generation(store: Library, here: Here) -> str:
    """A value that changes whenever a reindex commits to one of this directory's roots, or
    the feeds in force change (a served catalog withholds what they revoke at once)."""
    with store.session() as session:
        runs = stored_sets.root_runs(session, here.index_name, here.paths)
        state = (feeds.state(session, here.index_name, here.settings.advisories)
                 if here.settings.advisories else "")
    return ",".join(f"{run}" for _, run in runs) + (f"+{state}" if state else "")


def _object(text: str | None) -> dict[str, object]:
    try:
        value = None if text is None else json.loads(text)
    except (ValueError, RecursionError):  # a row edited by hand: served as no frontmatter
        return {}
    return value if isinstance(value, dict) else {}


def manifest(store: Library, here: Here, name: str) -> SkillManifest:
    """A catalog skill's stored frontmatter and file manifest; no file is read. A name the
    frontmatter leaves out (it defaults to the directory's), and the description, are filled
    in: consumers need one to hand."""
    winner = lookup.winner(store, here, name)
    [found] = manifests(store, [winner])
    front = dict(found.frontmatter)
    candidate = winner.candidate
    front.setdefault("name", candidate.name or candidate.directory.name)
    if candidate.description is not None:
        front.setdefault("description", candidate.description)
    return replace(found, frontmatter=front)
