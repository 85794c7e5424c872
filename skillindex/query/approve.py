"""Approving a skill under risk_policy = quarantine: the approval is bound to the skill's content
as it is now (every file's path, hash and execute bits) and to its risk findings, so any later
change, or a finding the approval did not see, revokes it."""

from __future__ import annotations

from datetime import datetime

from skillindex.errors import SkillNotFoundError
from skillindex.index import risk
from skillindex.model import Approval
from skillindex.query import lookup, trust
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries
from skillindex.store.units import READ


def approve(store: Library, here: Here, name: str, *, note: str | None,
            now: datetime) -> Approval:
    """Approve the skill `name` as its content is now (one transaction)."""
    resolution = lookup.resolution_of(store, here, [name], all_findings=False)
    winner = next((w for w in resolution.winners if w.name == name), None)
    if winner is None:
        raise SkillNotFoundError(name)
    cid = winner.candidate.id
    with store.transaction(READ, immediate=False) as session:
        files = queries.manifest_files(session, [cid])
        findings = queries.risk_findings(session, [cid], risk.CODES)
        digest = trust.manifest_digest(files.get(cid, ()), findings.get(cid, ()))
        added = queries.approve(session, here.index_name, name, digest, at=now, note=note)
    return Approval(name=name, digest=digest, path=winner.candidate.path,
                    findings=tuple(findings.get(cid, ())), new=added)
