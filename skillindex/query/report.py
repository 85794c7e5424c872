"""`report`: everything a reviewer checks of an index, gathered in one value for the page."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from skillindex.index import risk
from skillindex.model import (
    ChainReport,
    FindingCount,
    HeldSkill,
    Limits,
    LoggedEvent,
    RiskFinding,
    RootState,
    Severity,
    Status,
    StoredApproval,
    UsageReport,
    VerifyRecord,
)
from skillindex.query import listing, resolve, usage
from skillindex.query import verify as verify_flow
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.query.resolve import Collision
from skillindex.store import queries, reporting

# The failed attempts the report lists one by one (it counts them all).
FAILED_SHOWN = 200
# The skills named for each warning code (the page counts them all).
WARNED_SHOWN = 20


@dataclass(frozen=True, slots=True)
class Report:
    """An index as a reviewer sees it at one moment, for one working directory."""

    generated: datetime
    index: str
    roots: tuple[RootState, ...]
    candidates: int
    rejected: int
    collisions: tuple[Collision, ...]
    rejections: tuple[FindingCount, ...]  # the errors that rejected candidates, by code
    risk_counts: tuple[FindingCount, ...]  # risk findings by code and severity
    risks: tuple[RiskFinding, ...]  # by skill and file
    quarantined: tuple[HeldSkill, ...]
    approvals: tuple[StoredApproval, ...]
    usage: UsageReport
    failed: tuple[LoggedEvent, ...]  # the latest failed attempts of the window, newest first
    verify: VerifyRecord | None  # the last verify of these roots (None: never recorded)
    verified_now: bool  # whether that verify ran for this report
    chain: ChainReport
    chain_seconds: float  # what recomputing the whole chain took (it grows with the log)
    # Warnings (not risk findings) on accepted skills, by code, with the first skills' names.
    warnings: tuple[tuple[FindingCount, tuple[str, ...]], ...] = ()
    signers: tuple[tuple[str, str], ...] = ()  # (skill, signer) of each verified signature

    def as_dict(self) -> dict[str, object]:
        return {
            "generated": self.generated.isoformat(), "index": self.index,
            "roots": [root.as_dict() for root in self.roots], "candidates": self.candidates,
            "rejected": self.rejected,
            "collisions": [collision.as_dict() for collision in self.collisions],
            "rejections": [count.as_dict() for count in self.rejections],
            "risk_counts": [count.as_dict() for count in self.risk_counts],
            "risks": [finding.as_dict() for finding in self.risks],
            "quarantined": [held.as_dict() for held in self.quarantined],
            "approvals": [approval.as_dict() for approval in self.approvals],
            "usage": self.usage.as_dict(),
            "failed": [event.as_dict() for event in self.failed],
            "verify": None if self.verify is None else self.verify.as_dict(),
            "verified_now": self.verified_now, "chain": self.chain.as_dict(),
            "chain_seconds": round(self.chain_seconds, 3),
            "warnings": [{**count.as_dict(), "skills": list(names)}
                         for count, names in self.warnings],
            "signers": [{"skill": name, "signer": signer} for name, signer in self.signers],
        }


def gather(store: Library, here: Here, *, since: datetime | str | None, verify: bool,
           limits: Limits, cwd: Path) -> Report:
    """The report of `here`'s roots with usage since `since` (default 30 days); with `verify`,
    every file is hashed again first (and recorded) and that verify is the one shown."""
    if verify:
        verify_flow.verify(store, here, limits, cwd=cwd)
    counts = listing.finding_counts(store, here, rejected=False)
    started = time.perf_counter()
    chain = store.verify_chain(head=None)  # the whole chain: the page shows its state now
    chain_seconds = time.perf_counter() - started
    now = datetime.now(UTC)
    return Report(
        generated=now, index=here.index_name, roots=tuple(listing.roots(store, here)),
        candidates=listing.count(store, here, rejected=False),
        rejected=listing.count(store, here, rejected=True),
        collisions=tuple(listing.collisions(store, here)),
        rejections=tuple(listing.finding_counts(store, here, rejected=True)),
        risk_counts=tuple(count for count in counts if count.code in risk.CODES),
        risks=tuple(listing.risks(store, here, code=None)),
        quarantined=tuple(quarantined(store, here)), approvals=tuple(approvals(store)),
        usage=usage.usage(store, here, since=since, session=None, skill=None, now=now),
        failed=tuple(usage.failed_attempts(store, here, since=since, limit=FAILED_SHOWN,
                                           now=now)),
        verify=last_verify(store, here), verified_now=verify, chain=chain,
        chain_seconds=chain_seconds, warnings=tuple(warnings(store, here)),
        signers=tuple(signers(store, here)))


def warnings(store: Library, here: Here) -> list[tuple[FindingCount, tuple[str, ...]]]:
    """The warnings accepted skills carry (risk findings have a section of their own), by code,
    each with the names of its first WARNED_SHOWN skills."""
    with store.session() as session:
        counts = queries.finding_counts(session, here.index_name, here.paths,
                                        status=Status.ACCEPTED)
    found = []
    for count in counts:
        if count.severity is not Severity.WARNING or count.code in risk.CODES:
            continue
        names = tuple(candidate.name or candidate.directory.name
                      for candidate in listing.iter_candidates(
                          store, here, status=Status.ACCEPTED, code=count.code,
                          limit=WARNED_SHOWN, page=WARNED_SHOWN))
        found.append((count, names))
    return found


def signers(store: Library, here: Here) -> list[tuple[str, str]]:
    """Each winner whose signature was verified, with its signer, in catalog order."""
    signed = listing.signers(store, here)
    if not signed:  # the common case: no winner is read
        return []
    return [(w.name, signed[w.candidate.id])
            for w in listing.iter_winners(store, here, findings=False)
            if w.candidate.id in signed]


def last_verify(store: Library, here: Here) -> VerifyRecord | None:
    """What the last `verify` of `here`'s roots found, as recorded; None if none."""
    with store.session() as session:
        return reporting.last_verify(session, here.index_name, here.paths)


def approvals(store: Library) -> list[StoredApproval]:
    """Every `trust` approval of the index, by name."""
    with store.session() as session:
        return reporting.approvals(session, store.index_name)


def quarantined(store: Library, here: Here) -> list[HeldSkill]:
    """The skills risk_policy = quarantine withholds here until approved."""
    if not here.quarantining:
        return []
    return [HeldSkill(verdict.name or verdict.candidate.name or "", verdict.candidate.path,
                      verdict.reason)
            for verdict in listing.resolution(store, here, all_findings=False).verdicts
            if verdict.outcome is resolve.Outcome.QUARANTINED]


def by_skill(findings: Sequence[RiskFinding]) -> list[tuple[str, list[RiskFinding]]]:
    """Risk findings grouped by skill (its name, else its SKILL.md), most findings first."""
    groups: dict[str, list[RiskFinding]] = {}
    for finding in findings:
        groups.setdefault(finding.name or str(finding.skill_path), []).append(finding)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
