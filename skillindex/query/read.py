"""Reading a skill, from its `skill://` URI to the audited bytes.

`read`: parse the URI (query/disclose.py), find the winner it names (query/lookup.py), read
the file once beneath the skill's real directory and compare it with its manifest row
(query/disclose.py), and write the attempt's audit row (query/audit.py) before returning.
The library and the sqlite3 fast path both call it, each with its own store.
"""

from __future__ import annotations

from typing import Protocol

from skillindex.errors import ConfigError
from skillindex.model import Candidate, Disclosure, ManifestFile
from skillindex.query import disclose, lookup
from skillindex.query.audit import Appender, audited
from skillindex.query.reader import Here


class Store(lookup.Store, Appender, Protocol):
    """What a read needs: finding the winner, appending the audit row."""


class Published(Store, Protocol):
    """A store that also finds a file of a resolution a server published."""

    def published_file(self, here: Here, resolution: str, name: str,
                       rel_path: str) -> tuple[Candidate, ManifestFile | None] | None:
        """The candidate the stored resolution `resolution` (its key) gives `name`, and the
        manifest row of `rel_path`; None when that resolution or the name is not there."""
        ...


def read(store: Store, here: Here, uri: str, *, reason: str | None, session: str | None,
         max_bytes: int | None) -> Disclosure:
    """`skill://<skill path>` (the body, level 2) or `skill://<skill path>/<path>` (a file,
    level 3), verified against the index and audited."""
    if max_bytes is not None and max_bytes < 0:
        raise ConfigError(f"max_bytes must be 0 or more, not {max_bytes}")
    attempt = disclose.Attempt.of_uri(uri)
    with audited(store, attempt, reason=reason, session=session):
        ref, candidate, expected = lookup.locate(store, here, uri)
        attempt.aim(ref)
        return disclose.disclose(uri, ref, candidate, expected, max_bytes=max_bytes,
                                 attempt=attempt, rules=rules_of(here, candidate))


def read_published(store: Published, here: Here, uri: str, ref: disclose.SkillRef,
                   resolution: str | None, *, reason: str | None, session: str | None,
                   principal: str | None = None) -> Disclosure:
    """`read` of a file of a winner of the stored resolution a server published: its candidate
    and the file's manifest row from one statement, audited under the principal the server
    authenticated. When a reindex has dropped that resolution since (or there was none), the
    URI is found again as `read` finds it."""
    attempt = disclose.Attempt.of_uri(uri)
    with audited(store, attempt, reason=reason, session=session, principal=principal):
        found = (None if resolution is None
                 else store.published_file(here, resolution, ref.name, ref.file))
        if found is not None:
            candidate, expected = found
        else:
            ref, candidate, expected = lookup.locate(store, here, uri)
        attempt.aim(ref)
        return disclose.disclose(uri, ref, candidate, expected, max_bytes=None,
                                 attempt=attempt, rules=rules_of(here, candidate))


def rules_of(here: Here, candidate: Candidate) -> disclose.ReadRules:
    """What the candidate's root allows a read (its settings as they are now)."""
    return disclose.ReadRules.of_root(candidate.root, here.roots,
                                      allow_hardlinks=here.settings.allow_hardlinks,
                                      max_file_bytes=here.settings.max_file_bytes)
