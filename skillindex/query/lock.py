"""`skills-lock.json`: an entry for each of the catalog's winners, its folder hashed now
(query/lockfile.py), and the drift of the catalog from a lock file."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from skillindex.errors import FileReadError
from skillindex.index.signing import VERIFIED, Signature
from skillindex.query import listing, lockfile
from skillindex.query.library import Library
from skillindex.query.lockfile import LockDrift, LockEntry, Unhashed
from skillindex.query.reader import Here
from skillindex.query.resolve import Winner
from skillindex.text import shown_name


class LockEntries(dict[str, LockEntry]):
    """The entries of a lock file, and the skills left out of it because their folder could
    not be hashed (`unhashed`): one such skill does not stop the others."""

    def __init__(self) -> None:
        super().__init__()
        self.unhashed: list[Unhashed] = []


def lock(store: Library, here: Here, previous: Mapping[str, LockEntry], *,
         cwd: Path) -> LockEntries:
    """The entries of the winners; a skill already in `previous` keeps its `source` and
    `sourceType` there."""
    entries = LockEntries()
    for name, entry in _entries(store, here, previous, cwd=cwd):
        if isinstance(entry, Unhashed):
            entries.unhashed.append(entry)
        else:
            entries[name] = entry
    return entries


def verify_lock(store: Library, here: Here, path: Path, *, cwd: Path) -> list[LockDrift]:
    """The winners against a lock file: skills added, removed or changed (each folder hashed
    and compared as it comes, none of the new entries kept)."""
    locked = lockfile.read(path)
    return lockfile.compare(locked, _entries(store, here, locked, cwd=cwd))


def _entries(store: Library, here: Here, previous: Mapping[str, LockEntry], *,
             cwd: Path) -> Iterator[tuple[str, LockEntry | Unhashed]]:
    limit = here.settings.max_skill_bytes
    for winner, signer in _signed(store, listing.iter_winners(store, here, findings=False)):
        try:
            entry: LockEntry | Unhashed = lockfile.entry_for(
                winner.candidate.real_path, cwd=cwd, previous=previous.get(winner.name),
                max_bytes=limit, signer=signer)
        except FileReadError as exc:
            entry = Unhashed(winner.name, exc.message)
        except OSError as exc:  # a folder of it could not be listed
            entry = Unhashed(winner.name, f"cannot read {shown_name(str(exc.filename))}: "
                             f"{exc.strerror or exc}")
        yield winner.name, entry


def _signed(store: Library, winners: Iterable[Winner]) -> Iterator[tuple[Winner, str]]:
    """Each winner with the signer a lock pins: who signed it (verified), `unsigned`, or
    `unverified`; the signatures read 500 winners at a time."""
    found = iter(winners)
    while chunk := list(itertools.islice(found, 500)):
        stored = store.signatures([w.candidate.id for w in chunk])
        for winner in chunk:
            signature = Signature.from_json(stored.get(winner.candidate.id))
            if signature is None:
                yield winner, lockfile.UNSIGNED
            elif signature.status == VERIFIED and signature.signer:
                yield winner, signature.signer
            else:
                yield winner, lockfile.UNVERIFIED
