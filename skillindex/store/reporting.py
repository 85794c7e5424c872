"""Keeps what each `verify` found and lists the approvals, for the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.store.chain import utc
from skillindex.store.models import Approval, VerifyRun

# The drifted files a record keeps by name; it counts them all.
DRIFT_KEPT = 500


def record_verify(session: Session, index_name: str, cwd: str, roots: Sequence[str],
                  report: model.VerifyReport, at: datetime) -> None:
    """Store the outcome of one verify of these roots."""
    session.add(VerifyRun(
        index_name=index_name, time=at, cwd=cwd, roots=json.dumps(sorted(roots)),
        skills=report.skills, files=report.files, drifted=len(report.drift),
        drift=json.dumps([item.as_dict() for item in report.drift[:DRIFT_KEPT]])))


def last_verify(session: Session, index_name: str,
                roots: Sequence[str]) -> model.VerifyRecord | None:
    """The newest verify of exactly these roots, or None."""
    run = session.scalars(
        select(VerifyRun).where(VerifyRun.index_name == index_name,
                                VerifyRun.roots == json.dumps(sorted(roots)))
        .order_by(VerifyRun.id.desc()).limit(1)).first()
    if run is None:
        return None
    drift = tuple(model.DriftItem(item["skill"], item["resource"], model.Drift(item["problem"]),
                                  Path(item["path"])) for item in json.loads(run.drift))
    return model.VerifyRecord(time=utc(run.time), cwd=run.cwd, skills=run.skills,
                              files=run.files, drifted=run.drifted, drift=drift)


def approvals(session: Session, index_name: str) -> list[model.StoredApproval]:
    """Every approval of the index, by name, oldest first."""
    return [model.StoredApproval(row.name, row.digest, utc(row.approved_at), row.note)
            for row in session.scalars(select(Approval).where(Approval.index_name == index_name)
                                       .order_by(Approval.name, Approval.id))]
