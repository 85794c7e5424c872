"""Quarantine: which winners with risk findings are withheld, and approvals bound to content."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from skillindex.model import Finding, ManifestFile, RiskPolicy
from skillindex.query import advisories
from skillindex.query.advisories import Advisory
from skillindex.query.resolve import Outcome, Resolution, Verdict, Winner

QUARANTINED = "quarantined"


def manifest_digest(files: Sequence[ManifestFile],
                    findings: Sequence[Finding] = ()) -> str:
    """What an approval is bound to: every file's path, sha256 and execute bits, in path order,
    and the skill's risk findings (code and file, as many as there are).

    A file over the size limit, never read, counts by its change key (`FileStat.unread_key`),
    so a rewrite of the same size still changes the digest. A mode the store does not know yet
    (a row from before modes were kept) is written `?`, so it can never match one it knows.
    Rules that find something new in the same bytes change the findings, so they revoke the
    approval too. The findings given include those of what the manifest leaves out
    (skilldir.LEFT_OUT: a link out of the skill, a name that is not UTF-8, a FIFO): `trust`
    refuses while one is there, so one appearing later revokes the approval.
    """
    digest = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.rel_path):
        content = item.sha256 or (item.stat.unread_key() if item.stat is not None
                                  else f"size:{item.size}")
        mode = "?" if item.mode is None else f"{item.mode & 0o111:o}"  # the execute bits
        digest.update(f"{item.rel_path}\0{content}\0{mode}\n".encode("utf-8",
                                                                     "surrogateescape"))
    for code, path in sorted((f.code, f.path or "") for f in findings):
        digest.update(f"finding\0{code}\0{path}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a winner is withheld: its risk findings, and what any approval was for."""

    name: str
    findings: tuple[Finding, ...]
    digest: str
    approved: frozenset[str]  # the digests approved for this name

    @property
    def reason(self) -> str:
        codes = sorted({f.code for f in self.findings})
        count = len(self.findings)
        what = (f"quarantined: {count} risk finding{'s' if count != 1 else ''} "
                f"({', '.join(codes)}) under risk_policy = quarantine")
        if self.approved:
            return (f"{what}; an approval exists but no longer matches: the skill's files or "
                    f"findings changed since it was approved (content {self.digest[:12]}); "
                    f"review it, then "
                    f"`skillindex trust {shlex.quote(self.name)}`")
        return (f"{what}; review it, then `skillindex trust {shlex.quote(self.name)}` to serve "
                "this content")


@dataclass(frozen=True, slots=True)
class Revoked:
    """A winner an advisory in force names: withheld whatever its approvals."""

    name: str
    advisory: Advisory

    @property
    def reason(self) -> str:
        return advisories.reason(self.advisory)


def holds(winners: Sequence[Winner], policies: Mapping[str, RiskPolicy],
          risky: Mapping[int, Sequence[Finding]], digests: Mapping[int, str],
          approvals: Mapping[str, frozenset[str]]) -> dict[str, Hold]:
    """The winners to withhold: risk findings, a quarantining root, no approval of this content.

    `policies` maps a root path to its policy; `risky` and `digests` are keyed by candidate id.
    """
    held: dict[str, Hold] = {}
    for winner in winners:
        candidate = winner.candidate
        findings = risky.get(candidate.id)
        if not findings or policies.get(str(candidate.root)) is not RiskPolicy.QUARANTINE:
            continue
        digest = digests[candidate.id]
        approved = approvals.get(winner.name, frozenset())
        if digest not in approved:
            held[winner.name] = Hold(winner.name, tuple(findings), digest, approved)
    return held


def withhold(resolution: Resolution, held: Mapping[str, Hold | Revoked]) -> Resolution:
    """The resolution without the held winners; their verdicts say why."""
    if not held:
        return resolution
    ids = {w.candidate.id: held[w.name] for w in resolution.winners if w.name in held}
    verdicts = tuple(
        replace(v, outcome=Outcome.QUARANTINED, reason=ids[v.candidate.id].reason)
        if v.outcome is Outcome.WINNER and v.candidate.id in ids else v
        for v in resolution.verdicts)
    winners = tuple(w for w in resolution.winners if w.name not in held)
    return replace(resolution, verdicts=verdicts, winners=winners)


def held_verdict(resolution: Resolution, name: str) -> Verdict | None:
    """The quarantined verdict a catalog name stands for, if it is held."""
    return next((v for v in resolution.verdicts
                 if v.outcome is Outcome.QUARANTINED and v.name == name), None)
