"""Unpacks a publisher's skill archive (.tar.gz or .zip) into an empty folder, refusing links,
special files, absolute or `..` paths and anything past the file and byte limits."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from skillindex import fsio

CHUNK = 1 << 16


class UnsafeArchiveError(ValueError):
    """The archive holds something a skill folder must not: the reason, in words."""


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    max_files: int
    max_bytes: int


def kind_of(content_type: str | None, url: str, data: bytes) -> str:
    """`tar.gz` or `zip`, by the server's Content-Type, else the URL's extension, else the
    bytes' magic number."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in ("application/zip", "application/x-zip-compressed"):
        return "zip"
    if media in ("application/gzip", "application/x-gzip", "application/x-tar+gzip",
                 "application/x-compressed-tar"):
        return "tar.gz"
    path = url.split("?", 1)[0].lower()
    if path.endswith(".zip"):
        return "zip"
    if path.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if data[:4] == b"PK\x03\x04":
        return "zip"
    if data[:2] == b"\x1f\x8b":
        return "tar.gz"
    raise UnsafeArchiveError(f"not a .tar.gz or .zip archive (Content-Type {media or 'none'})")


def unpack(data: bytes, kind: str, target: Path, limits: ArchiveLimits) -> int:
    """Unpack `data` into the empty folder `target`; the number of files written. Nothing is
    trusted from the archive's headers: sizes are counted as the bytes come out."""
    members = _tar_members(data) if kind == "tar.gz" else _zip_members(data)
    seen: set[str] = set()
    files = 0
    total = 0
    for name, executable, source in members:
        relative = safe_member_path(name)
        if relative is None:
            continue  # the archive's root folder itself
        if relative in seen:
            raise UnsafeArchiveError(f"{relative} appears twice")
        seen.add(relative)
        if source is None:
            (target / relative).mkdir(parents=True, exist_ok=True)
            continue
        files += 1
        if files > limits.max_files:
            raise UnsafeArchiveError(f"more than {limits.max_files} files")
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        chunks = []
        while chunk := source.read(CHUNK):
            total += len(chunk)
            if total > limits.max_bytes:
                raise UnsafeArchiveError(f"unpacks to more than {limits.max_bytes} bytes")
            chunks.append(chunk)
        write_file(destination, b"".join(chunks), executable=executable, within=target)
    if "SKILL.md" not in seen:
        raise UnsafeArchiveError("no SKILL.md at the archive's root")
    return files


def safe_member_path(name: str) -> str | None:
    """The member's path relative to the skill folder, or UnsafeArchiveError; None for the
    root itself (`./`)."""
    if "\\" in name or "\x00" in name:
        raise UnsafeArchiveError(f"{name!r}: a backslash or NUL in a path")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{name!r}: an absolute path")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if any(part == ".." for part in parts):
        raise UnsafeArchiveError(f"{name!r}: a path with `..`")
    return "/".join(parts) or None


Member = tuple[str, bool, IO[bytes] | None]  # path, executable, content (None: a folder)


def _tar_members(data: bytes) -> Iterator[Member]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UnsafeArchiveError(f"not a readable .tar.gz: {exc}") from None
    with archive:
        try:
            for member in archive:
                if member.issym() or member.islnk():
                    raise UnsafeArchiveError(f"{member.name!r}: a link")
                if member.isdir():
                    yield member.name, False, None
                elif member.isfile():
                    handle = archive.extractfile(member)
                    if handle is None:
                        raise UnsafeArchiveError(f"{member.name!r}: unreadable")
                    yield member.name, bool(member.mode & 0o111), handle
                else:
                    raise UnsafeArchiveError(f"{member.name!r}: a device, FIFO or other "
                                             "special file")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UnsafeArchiveError(f"a damaged .tar.gz: {exc}") from None


def _zip_members(data: bytes) -> Iterator[Member]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise UnsafeArchiveError(f"not a readable .zip: {exc}") from None
    with archive:
        try:
            for info in archive.infolist():
                mode = info.external_attr >> 16
                kind = stat.S_IFMT(mode)
                if kind == stat.S_IFLNK:
                    raise UnsafeArchiveError(f"{info.filename!r}: a link")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise UnsafeArchiveError(f"{info.filename!r}: a special file")
                if info.is_dir():
                    yield info.filename, False, None
                    continue
                with archive.open(info) as handle:
                    yield info.filename, bool(mode & 0o111), handle
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise UnsafeArchiveError(f"a damaged .zip: {exc}") from None


def write_file(path: Path, data: bytes, *, executable: bool, within: Path) -> None:
    """One file of a skill folder the cache holds, with the execute bits it was published with
    (an approval binds them)."""
    fsio.write(path, data, what="a cached skill file", named=False, within=within,
               private=False)
    os.chmod(path, 0o755 if executable else 0o644)
