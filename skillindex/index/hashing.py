"""Reads a regular file once, safely, and hashes exactly the bytes it read (xxh3-128 and sha256)."""

from __future__ import annotations

import hashlib
import os
import stat as stat_module
from dataclasses import dataclass
from pathlib import Path

import xxhash

from skillindex.model import FileStat

CHUNK = 1 << 20


class SpecialFileError(OSError):
    """The path is a FIFO, socket, device or directory: never read it."""


def file_stat(st: os.stat_result) -> FileStat:
    # Unsigned as the kernel gives them; the store's FileId column type keeps all 64 bits.
    return FileStat(st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def digest(data: bytes) -> tuple[str, str]:
    return xxhash.xxh3_128_hexdigest(data), hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class FileRead:
    data: bytes | None  # None when the file is larger than the caller keeps in memory
    stat: FileStat
    xxh3: str
    sha256: str


def open_regular(path: Path | str, *, follow_symlinks: bool) -> tuple[int, os.stat_result]:
    """Open a file for reading only if it is a regular file; FIFOs never block the caller."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            raise SpecialFileError(f"not a regular file: {path}")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_file(path: Path | str, *, keep_limit: int, follow_symlinks: bool) -> FileRead:
    """Hash the whole file; keep its bytes only when it is at most `keep_limit` bytes long
    (-1: never). Memory stays bounded by the limit or one chunk, whatever the file's size."""
    fd, st = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        # Asking for one byte more than fstat promised: a short read is the end of the file,
        # so nearly every file takes a single read.
        want = max(keep_limit, min(st.st_size, CHUNK)) + 1
        first = os.read(fd, want)
        if len(first) < want:
            x, s = digest(first)
            return FileRead(first if len(first) <= keep_limit else None, file_stat(st), x, s)
        hx = xxhash.xxh3_128(first)
        hs = hashlib.sha256(first)
        while chunk := os.read(fd, CHUNK):
            hx.update(chunk)
            hs.update(chunk)
        return FileRead(None, file_stat(st), hx.hexdigest(), hs.hexdigest())
    finally:
        os.close(fd)
