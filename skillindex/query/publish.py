"""The level-1 catalog, from the request to the text a host shows its model: its key and the
copy cached under it (query/quick.py, where the sqlite3 fast path stops), else the winners in
catalog order (query/modes.py) fitted into the budget (query/catalog.py) and cached; audited
as `catalog.published` when a session is named."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from skillindex import text as escape
from skillindex.errors import StoreError
from skillindex.index.dialect import HostFields
from skillindex.model import AuditRecord, Level, Listing
from skillindex.query import dialect, listing, modes, quick
from skillindex.query.catalog import (
    Catalog,
    CatalogItem,
    SearchHint,
    build,
    build_ranked,
    capped,
    describable,
    empty,
    with_omitted,
)
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries, resolved
from skillindex.store import usage as store_usage

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

CATALOG_PUBLISHED = "catalog.published"


def catalog(store: Library, here: Here, request: quick.Request, *, session: str | None,
            now: datetime) -> Catalog:
    """The catalog for `request`: cached, else built and cached (a read-only database still
    serves catalogs, just without the cache); with a `session`, audited."""
    key, since, result = quick.cached(store, here, request, now=now)
    if result is None:
        result = _built(store, here, request, since)
        try:
            if store.writable:
                with store.transaction("cache the catalog", immediate=False) as db:
                    queries.store_catalog(db, here.index_name, key, result.to_cache())
        except StoreError:
            pass  # a database that takes no write (full, or read-only) serves it uncached
    if session is not None:
        text = result.text.encode("utf-8")
        store.append(AuditRecord(
            event=CATALOG_PUBLISHED, level=Level.CATALOG,
            outcome="ok", bytes=len(text), digest=hashlib.sha256(text).hexdigest(),
            reason=f"{len(result.entries)} skills, {len(result.omitted)} omitted",
            session=session))
    return result


def _built(store: Library, here: Here, request: quick.Request,
           since: datetime | None) -> Catalog:
    with store.session() as db:
        arranged, texts = _arranged(store, db, here, request.words, since)
    applied = None
    hosts: dict[int, HostFields] = {}
    dialects = here.settings.dialects
    # Always: the fields are few and stored apart, and without files or dialects they only
    # mark which entries are conditional.
    if arranged.listed:
        with store.session() as db:
            stored = resolved.host_fields(db, [s.candidate_id for s in arranged.listed])
        hosts = {cid: HostFields.from_json(value) for cid, value in stored.items()}
        applied = dialect.apply(arranged, hosts, files=request.files, dialects=dialects)
        arranged = applied.arranged
    shown = arranged.listed
    limit, fmt = request.limit, request.fmt
    # Descriptions only for what the budget can show them for: a lookup of a few hundred,
    # however many skills there are.
    count = describable(((s.name, s.location) for s in shown), max_chars=limit, fmt=fmt)
    wanted = [s.candidate_id for number, s in enumerate(shown)
              if number < count or s.mode is modes.Mode.PINNED] if request.has_read else []
    if texts is None:
        with store.session() as db:
            texts = resolved.descriptions(db, wanted)
    fetched = set(wanted)
    cut: set[int] = set()
    if dialects and applied is not None:
        # What a host shows: when_to_use beside the description, within the per-skill cap.
        for cid in fetched:
            whole = escape.fold(dialect.described(texts.get(cid, ""), hosts.get(cid)))
            texts[cid] = capped(whole, here.settings.catalog_entry_chars, fmt)
            if texts[cid] != whole:
                cut.add(cid)
    items = [CatalogItem(s.name, texts.get(s.candidate_id, ""), s.location, str(s.mode),
                         None if s.candidate_id in fetched else s.described, s.why, s.rank)
             for s in shown]
    finder = request.hint(here.settings)
    gated = applied.gated if applied is not None else ()
    # Conditional skills left out for the files in play are still found by a search.
    hint = None if finder is None else SearchHint(finder, elsewhere=len(gated))
    if not request.has_read:
        result = empty(items, max_chars=limit, fmt=fmt, ranked_by=arranged.ranked_by,
                       reason="the host has no read tool to load skills with")
    elif request.words is not None:
        result = build_ranked(items, max_chars=limit, fmt=fmt, hint=hint)
    else:
        result = build(items, max_chars=limit, fmt=fmt, ranked_by=arranged.ranked_by,
                       hint=hint)
    left_out = [*arranged.manual, *gated]
    result = with_omitted(result, [name for name, _ in left_out],
                          [reason for _, reason in left_out])
    if applied is None:
        return result
    located = {s.candidate_id: s.location for s in shown}
    return dialect.marked(result, {located[cid] for cid in cut},
                          {located[cid]: globs for cid, globs in applied.conditional.items()
                           if cid in located})


def _arranged(store: Library, db: Session, here: Here, words: Sequence[str] | None,
              since: datetime | None) -> tuple[modes.Arranged, dict[int, str] | None]:
    """The winners in catalog order with their modes, read as they stream from the stored
    resolution; with the descriptions when they had to be resolved here instead."""
    set_id = store.resolution_set(db, here)  # first: it may end the transaction
    scores = usage = None
    if words is not None:
        scores = {m.candidate_id: m.score
                  for m in store.matches(db, here, words, depth=None).matches}
    elif since is not None:
        usage = store_usage.load_counts(db, here.index_name, since)
    if set_id is not None:
        listed: Iterable[Listing] = resolved.catalog_listing(db, set_id)
        texts = None
    else:
        winners = listing.resolution(store, here, all_findings=False).winners
        listed = map(modes.listing_of, winners)
        texts = {w.candidate.id or 0: w.candidate.description or "" for w in winners}
    return modes.arrange(listed, here.settings.catalog, scores=scores, usage=usage), texts
