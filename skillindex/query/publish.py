"""The level-1 catalog, from the request to the text a host shows its model: its key and the
copy cached under it (query/quick.py, where the sqlite3 fast path stops), else the winners in
catalog order (query/modes.py) fitted into the budget (query/catalog.py) and cached; audited
as `catalog.published` when a session is named."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import takewhile
from operator import attrgetter
from typing import TYPE_CHECKING

from skillindex import text as escape
from skillindex.collector import no_cycle_collection
from skillindex.errors import StoreError
from skillindex.index.dialect import HostFields
from skillindex.model import AuditRecord, Level, Listing, has_text
from skillindex.query import dialect, listing, modes, quick
from skillindex.query.catalog import (
    Catalog,
    CatalogItem,
    SearchHint,
    Tail,
    Unspent,
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
        with no_cycle_collection():
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


_NAME, _LOCATION, _RANK = attrgetter("name"), attrgetter("location"), attrgetter("rank")


def _pinned(shown: modes.Shown) -> bool:
    return shown.mode is modes.Mode.PINNED


# The winners a cache miss reads the descriptions of first, past the pinned ones; more (four
# times as many, or as far as one might still fit) while the budget is not spent on them.
FIRST_PAGE = 256


def _built(store: Library, here: Here, request: quick.Request, since: datetime | None, *,
           page: int | None = FIRST_PAGE) -> Catalog:
    """The catalog built from the stored winners: every one read by name, location and mode
    to order them and to name those it leaves out, the descriptions only of the first `page`
    and of as many more as the budget needs (None: of all). The same catalog whatever the
    page: only the reading differs."""
    with store.session() as db:
        arranged, texts, stored = _arranged(store, db, here, request.words, since)
    hosts: dict[int, HostFields] = {}
    applied = None
    # Always: the fields are few and stored apart, and without files or dialects they only
    # mark which entries are conditional.
    if arranged.listed:
        if stored is None:
            with store.session() as db:
                stored = resolved.host_fields(db, [s.candidate_id for s in arranged.listed])
        hosts = {cid: HostFields.from_json(value) for cid, value in stored.items()}
        applied = dialect.apply(arranged, hosts, files=request.files,
                                dialects=here.settings.dialects)
        arranged = applied.arranged
    listed = arranged.listed
    if texts is not None or page is None:  # the winners were read whole
        size = len(listed)
    else:  # the pinned winners come first
        size = page + sum(1 for _ in takewhile(_pinned, listed))
    read: dict[int, str] = {}
    while True:
        shown = listed[:size]
        if texts is None:
            shown = _described(store, shown, read)
        try:
            return _fitted(store, here, request, arranged, applied, hosts, shown,
                           listed[size:], texts, read)
        except Unspent as short:
            size = max(size * 4, size + short.needed + 1)


def _described(store: Library, shown: Sequence[modes.Shown],
               read: dict[int, str]) -> tuple[modes.Shown, ...]:
    """These winners, each marked as having a description or not. `read` holds the
    descriptions of the first ones ("" for none); those of the others are read into it."""
    missing = [s.candidate_id for s in shown[len(read):]]
    if missing:
        with store.session() as db:
            read.update(resolved.descriptions(db, missing))
        read.update((cid, "") for cid in missing if cid not in read)
    return tuple(s._replace(described=has_text(read[s.candidate_id])) for s in shown)


def _fitted(store: Library, here: Here, request: quick.Request, arranged: modes.Arranged,
            applied: dialect.Applied | None, hosts: dict[int, HostFields],
            shown: Sequence[modes.Shown], rest: Sequence[modes.Shown],
            texts: dict[int, str] | None, read: dict[int, str]) -> Catalog:
    """The catalog of the `shown` winners in full (their descriptions in `texts`, else in
    `read`) and of the `rest` by name and location; `Unspent` when its budget might reach
    into the rest."""
    limit, fmt = request.limit, request.fmt
    dialects = here.settings.dialects
    tail = Tail(tuple(map(_NAME, rest)), tuple(map(_LOCATION, rest)), tuple(map(_RANK, rest)))
    # Descriptions only for what the budget can show them for: a lookup of a few hundred,
    # however many skills there are.
    count = describable(((s.name, s.location) for s in shown), max_chars=limit, fmt=fmt)
    if request.has_read and rest and count == len(shown):
        raise Unspent(0)
    wanted = [s.candidate_id for number, s in enumerate(shown)
              if number < count or s.mode is modes.Mode.PINNED] if request.has_read else []
    if texts is None:
        texts = {cid: read[cid] for cid in wanted}
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
                       reason="the host has no read tool to load skills with", beyond=tail)
    elif request.words is not None:
        result = build_ranked(items, max_chars=limit, fmt=fmt, hint=hint, beyond=tail)
    else:
        result = build(items, max_chars=limit, fmt=fmt, ranked_by=arranged.ranked_by,
                       hint=hint, beyond=tail)
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
              since: datetime | None,
              ) -> tuple[modes.Arranged, dict[int, str] | None, dict[int, str] | None]:
    """The winners in catalog order with their modes, as ordering them takes (no description:
    `_described` reads those of the few shown), and the host fields of those that have any;
    or, when they had to be resolved here instead, whole, with their descriptions (and no
    host fields yet)."""
    set_id = store.resolution_set(db, here)  # first: it may end the transaction
    scores = usage = None
    if words is not None:
        scores = {m.candidate_id: m.score
                  for m in store.matches(db, here, words, depth=None).matches}
    elif since is not None:
        usage = store_usage.load_counts(db, here.index_name, since)
    if set_id is not None:
        listed: Iterable[Listing]
        listed, hosts = resolved.catalog_order(db, set_id)
        texts = None
    else:
        winners = listing.resolution(store, here, all_findings=False).winners
        listed = map(modes.listing_of, winners)
        texts = {w.candidate.id or 0: w.candidate.description or "" for w in winners}
        hosts = None
    arranged = modes.arrange(listed, here.settings.catalog, scores=scores, usage=usage)
    return arranged, texts, hosts
