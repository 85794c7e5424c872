"""The file of static bearer tokens `serve --tokens` accepts: each a principal and a hash."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillindex import fsio, inputs
from skillindex.errors import ConfigError, NotFoundError

VERSION = 1
# A token is 32 random bytes: a plain sha256 of it cannot be searched back to the token, so
# the file needs no slow password hash, and checking a token costs microseconds.
PREFIX = "skillindex_"
PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


@dataclass(frozen=True, slots=True)
class TokenEntry:
    """One token as the file keeps it: never the token itself."""

    principal: str
    id: str
    sha256: str
    created: str

    def as_dict(self) -> dict[str, str]:
        return {"principal": self.principal, "id": self.id, "sha256": self.sha256,
                "created": self.created}


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_principal(name: str) -> str:
    if not PRINCIPAL.fullmatch(name):
        raise ConfigError(f"{name!r} is not a principal name (1 to 64 letters, digits and "
                          "._@+-, starting with a letter or digit)")
    return name


class TokenFile:
    """The tokens of one file, read again whenever the file changes on disk, so that a token
    added or removed while the server runs counts from the next request."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, ...] | None = None
        self._by_hash: dict[str, TokenEntry] = {}
        self.entries()  # a missing or malformed file stops the server before it listens

    def entries(self) -> tuple[TokenEntry, ...]:
        self._refresh()
        return tuple(self._by_hash.values())

    def principal_of(self, token: str) -> str | None:
        """The principal a presented token stands for; None when the file holds no such token.
        A file that turned unreadable or malformed accepts no token until it is mended."""
        try:
            self._refresh()
        except ConfigError:
            self._seen, self._by_hash = None, {}
            return None
        entry = self._by_hash.get(digest(token))
        return None if entry is None else entry.principal

    def _refresh(self) -> None:
        try:
            info = self.path.stat()
        except OSError as exc:
            raise ConfigError(f"cannot read the token file: {exc.strerror}",
                              source=str(self.path)) from exc
        seen = (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
                info.st_mode)
        if seen == self._seen:
            return
        _check_mode(self.path, info)
        entries = _parse(self.path, _read(self.path))
        self._by_hash = {entry.sha256: entry for entry in entries}
        self._seen = seen


def _check_mode(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("the token file is not a regular file", source=str(path))
    if info.st_mode & 0o022:
        # Whoever may write the file may add a token of their own.
        raise ConfigError("the token file is writable by others than its owner (chmod 600 it)",
                          source=str(path))


def _read(path: Path) -> bytes:
    try:
        return inputs.read_bytes(path, max_bytes=inputs.MAX_TOKEN_FILE_BYTES, what="token file")
    except FileNotFoundError as exc:
        raise ConfigError(f"cannot read the token file: {exc.strerror}",
                          source=str(path)) from exc


def _parse(path: Path, data: bytes) -> list[TokenEntry]:
    source = str(path)
    if len(data) > inputs.MAX_TOKEN_FILE_BYTES:
        raise ConfigError(f"the token file is larger than {inputs.MAX_TOKEN_FILE_BYTES:,} "
                          "bytes", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("the token file is not JSON: it is not UTF-8 text",
                          source=source) from None
    document = inputs.load_json(text, what="token file", source=source, finite=True)
    if not isinstance(document, dict) or document.get("version") != VERSION or not isinstance(
            document.get("tokens"), list):
        raise ConfigError(f'the token file must be {{"version": {VERSION}, "tokens": [...]}}',
                          source=source)
    entries = []
    for number, item in enumerate(document["tokens"], 1):
        entry = _entry(item)
        if entry is None:
            raise ConfigError(f"token {number} of the file needs principal, id, sha256 (64 hex "
                              "digits) and created", source=source)
        entries.append(entry)
    return entries


def _entry(item: Any) -> TokenEntry | None:
    if not isinstance(item, dict):
        return None
    values = [item.get(key) for key in ("principal", "id", "sha256", "created")]
    texts = [value for value in values if isinstance(value, str)]
    if len(texts) != len(values):
        return None
    entry = TokenEntry(*texts)
    if not PRINCIPAL.fullmatch(entry.principal) or not re.fullmatch(r"[0-9a-f]{64}",
                                                                     entry.sha256):
        return None
    return entry


def add(path: Path, principal: str) -> tuple[str, TokenEntry]:
    """A new token for `principal`, stored in the file by its hash alone (the file is made if
    it does not exist); the token is returned, once."""
    check_principal(principal)
    token = PREFIX + secrets.token_urlsafe(32)
    entry = TokenEntry(principal=principal, id=secrets.token_hex(4), sha256=digest(token),
                       created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    with _locked(path) as entries:
        entries.append(entry)
    return token, entry


def remove(path: Path, principal: str, token_id: str | None = None) -> list[TokenEntry]:
    """Remove the principal's tokens (or only the one with `token_id`); what was removed."""
    with _locked(path, create=False) as entries:
        gone = [entry for entry in entries if entry.principal == principal
                and token_id in (None, entry.id)]
        if not gone:
            which = f"token {token_id!r} of " if token_id else "token of "
            raise NotFoundError(f"no {which}{principal!r} in {path}")
        entries[:] = [entry for entry in entries if entry not in gone]
    return gone


def listed(path: Path) -> tuple[TokenEntry, ...]:
    return TokenFile(path).entries()


@contextlib.contextmanager
def _locked(path: Path, *, create: bool = True) -> Iterator[list[TokenEntry]]:
    """The file's entries, to change in place; written back whole by `fsio.write` (mode 0600)
    when the block ends, while an exclusive lock on the file's directory keeps a second
    writer from losing the first one's change (the directory, because each write replaces
    the file and with it any lock taken on the file)."""
    # --tokens names the file, but a file of secrets is never read or written through a link.
    fsio.target(path, what="the token file", named=False, within=None)
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot open the token file: {exc.strerror}",
                          source=str(path)) from exc
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            if not create:
                raise ConfigError(f"cannot open the token file: {exc.strerror}",
                                  source=str(path)) from exc
            data = b""
        except OSError as exc:
            raise ConfigError(f"cannot open the token file: {exc.strerror}",
                              source=str(path)) from exc
        else:
            with os.fdopen(handle, "rb") as stream:
                _check_mode(path, os.fstat(stream.fileno()))
                data = stream.read(inputs.MAX_TOKEN_FILE_BYTES + 1)
        entries = _parse(path, data) if data else []
        yield entries
        text = json.dumps({"version": VERSION, "tokens": [e.as_dict() for e in entries]},
                          indent=2) + "\n"
        fsio.write(path, text, what="the token file", named=False, within=None, private=True)
    finally:
        os.close(directory)
