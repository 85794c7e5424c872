"""Approving a skill under risk_policy = quarantine: the approval is bound to the skill's content
as the reviewer can read it on disk now (every file hashed again and compared with the index:
path, hash and execute bits) and to its risk findings, so any later change, or a finding the
approval did not see, revokes it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from skillindex.errors import RefusedError, SkillNotFoundError
from skillindex.index import risk
from skillindex.index.skilldir import LEFT_OUT
from skillindex.model import Approval, DriftItem, Finding
from skillindex.query import disclose, lookup, trust
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries
from skillindex.store.units import READ
from skillindex.text import shown_name

SHOWN = 5  # the drifted or left-out files a refusal names; the rest are counted


class ApprovalRefusedError(RefusedError):
    """`trust` was refused: the files on disk are not the indexed ones, or the skill holds
    what no digest can bind."""


def approve(store: Library, here: Here, name: str, *, note: str | None,
            now: datetime) -> Approval:
    """Approve the skill `name` as its files are on disk now, which must be the indexed ones.

    Every indexed file is hashed again and the directory listed again, as `verify` does: a
    file changed, missing or added since the reindex refuses the approval (reindex, review,
    then trust), and so does anything the manifest leaves out (skilldir.LEFT_OUT)."""
    resolution = lookup.resolution_of(store, here, [name], all_findings=False)
    winner = next((w for w in resolution.winners if w.name == name), None)
    if winner is None:
        raise SkillNotFoundError(name)
    candidate = winner.candidate
    cid = candidate.id
    with store.session() as session:
        files = queries.manifest_files(session, [cid]).get(cid, [])
        findings = queries.risk_findings(session, [cid], risk.CODES).get(cid, [])
        stored_out = queries.risk_findings(session, [cid], LEFT_OUT).get(cid, [])
    drift, left_out = disclose.on_disk(candidate, name, files, here.settings.limits)
    if drift:
        raise ApprovalRefusedError(_differs(name, drift), skill=name)
    if stored_out or left_out:
        raise ApprovalRefusedError(_unbound(name, [*stored_out, *left_out]), skill=name)
    digest = trust.manifest_digest(files, findings)
    with store.transaction(READ, immediate=False) as session:
        added = queries.approve(session, here.index_name, name, digest, at=now, note=note)
    return Approval(name=name, digest=digest, path=candidate.path, findings=tuple(findings),
                    new=added, files=tuple(files))


def _differs(name: str, drift: Sequence[DriftItem]) -> str:
    shown = ", ".join(f"{shown_name(item.resource) or 'the skill'} {item.problem}"
                      for item in drift[:SHOWN])
    more = f" and {len(drift) - SHOWN} more" if len(drift) > SHOWN else ""
    return (f"not trusted: the files of skill {shown_name(name)} on disk differ from the index "
            f"({shown}{more}); reindex, review, then trust")


def _unbound(name: str, found: Sequence[Finding]) -> str:
    messages = list(dict.fromkeys(f.message for f in found))
    more = f" and {len(messages) - SHOWN} more" if len(messages) > SHOWN else ""
    return (f"not trusted: skill {shown_name(name)} holds what an approval cannot bind "
            f"({'; '.join(messages[:SHOWN])}{more}); remove it, reindex, review, then trust")
