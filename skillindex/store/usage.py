"""Counts the successful loads of each skill in the audit table, for a usage-ordered catalog."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from skillindex.model import Level
from skillindex.store.models import LoadEvent


def load_counts(session: Session, index_name: str, since: datetime) -> dict[str, int]:
    """Skill name -> successful loads of its body (read or `/skill:`) since `since`."""
    rows = session.execute(
        select(LoadEvent.skill, func.count())
        .where(LoadEvent.index_name == index_name, LoadEvent.outcome == "ok",
               LoadEvent.level == Level.BODY.value, LoadEvent.time >= since,
               LoadEvent.skill.is_not(None))
        .group_by(LoadEvent.skill))
    return {str(skill): int(count) for skill, count in rows}


def last_event(session: Session) -> int:
    """The newest audit row's id (0 for none): a usage-ordered catalog is valid until it moves."""
    return int(session.execute(select(func.coalesce(func.max(LoadEvent.id), 0))).scalar_one())
