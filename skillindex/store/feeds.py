"""The SQL of advisory feeds: the feed in force per source, replaced whole or left as it was."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.store.models import AdvisoryFeed, Candidate


@dataclass(frozen=True, slots=True)
class StoredFeed:
    source: str
    advisories: str  # JSON, as query/advisories.py dumps it
    digest: str | None
    etag: str | None
    loaded_at: datetime | None
    checked_at: datetime
    error: str | None


def _row(session: Session, index_name: str, source: str) -> AdvisoryFeed | None:
    return session.scalars(select(AdvisoryFeed).where(AdvisoryFeed.index_name == index_name,
                                                      AdvisoryFeed.source == source)).first()


def stored(session: Session, index_name: str, sources: Sequence[str]) -> list[StoredFeed]:
    """The feeds of these sources that were ever read, in the order given."""
    rows = {row.source: row for row in session.scalars(
        select(AdvisoryFeed).where(AdvisoryFeed.index_name == index_name,
                                   AdvisoryFeed.source.in_(list(sources))))}
    return [StoredFeed(row.source, row.advisories, row.digest, row.etag, row.loaded_at,
                       row.checked_at, row.error)
            for source in sources if (row := rows.get(source)) is not None]


def state(session: Session, index_name: str, sources: Sequence[str]) -> str:
    """A digest that changes whenever the feeds in force of these sources change."""
    digest = hashlib.sha256()
    for source, body in session.execute(
            select(AdvisoryFeed.source, AdvisoryFeed.digest)
            .where(AdvisoryFeed.index_name == index_name,
                   AdvisoryFeed.source.in_(list(sources)))
            .order_by(AdvisoryFeed.source)):
        digest.update(f"{source}\0{body}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def put(session: Session, index_name: str, source: str, *, advisories: str, digest: str,
        etag: str | None, now: datetime) -> None:
    """The feed read well: it is now the one in force, and no error stands."""
    row = _row(session, index_name, source)
    if row is None:
        row = AdvisoryFeed(index_name=index_name, source=source)
        session.add(row)
    row.advisories, row.digest, row.etag = advisories, digest, etag
    row.loaded_at = row.checked_at = now
    row.error = None


def checked(session: Session, index_name: str, source: str, *, now: datetime,
            error: str | None) -> None:
    """The feed was read again and is unchanged (error None), or could not be read or parsed:
    whatever was in force stays."""
    row = _row(session, index_name, source)
    if row is None:
        row = AdvisoryFeed(index_name=index_name, source=source, advisories="[]")
        session.add(row)
    row.checked_at = now
    row.error = error


def skill_facts(session: Session, candidate_ids: Sequence[int],
                ) -> dict[int, tuple[str | None, str | None]]:
    """(sha256 of SKILL.md, frontmatter JSON) of these candidates: what advisories match on."""
    found: dict[int, tuple[str | None, str | None]] = {}
    ids = list(candidate_ids)
    for start in range(0, len(ids), 500):
        for cid, digest, front in session.execute(
                select(Candidate.id, Candidate.sha256, Candidate.frontmatter)
                .where(Candidate.id.in_(ids[start:start + 500]))):
            found[int(cid)] = (digest, front)
    return found
