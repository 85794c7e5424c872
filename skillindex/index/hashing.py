"""Opens files beneath a skill directory without following symlinks and hashes what it read."""

from __future__ import annotations

import hashlib
import os
import stat as stat_module
from pathlib import Path
from typing import NamedTuple

import xxhash

from skillindex.model import FileStat

CHUNK = 1 << 20
_BASE = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: a FIFO swapped in never blocks the open; O_NOCTTY: a terminal never becomes ours.
_FILE_FLAGS = _BASE | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = _BASE | getattr(os, "O_DIRECTORY", 0)


class SpecialFileError(OSError):
    """The path is a FIFO, socket, device or directory: never read it."""


def file_stat(st: os.stat_result) -> FileStat:
    # Unsigned as the kernel gives them; the store's FileId column type keeps all 64 bits.
    return FileStat(st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns)


def executable(mode: int) -> int:
    """The execute bits of a mode: what an approval binds of it."""
    return mode & 0o111


def same_file_version(a: os.stat_result, b: os.stat_result) -> bool:
    """Whether two stats describe the same version of the same file (the change key)."""
    return (a.st_size, a.st_mtime_ns, a.st_ctime_ns, a.st_ino, a.st_dev, a.st_mode) == (
        b.st_size, b.st_mtime_ns, b.st_ctime_ns, b.st_ino, b.st_dev, b.st_mode)


def digest(data: bytes) -> tuple[str, str]:
    return xxhash.xxh3_128_hexdigest(data), hashlib.sha256(data).hexdigest()


class FileRead(NamedTuple):  # one a file read: see model.FileStat
    data: bytes | None  # None when the file is larger than the caller keeps in memory
    stat: FileStat
    xxh3: str
    sha256: str
    raw: os.stat_result  # fstat of the descriptor that was read


def _regular(fd: int, label: str) -> os.stat_result:
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            raise SpecialFileError(f"not a regular file: {label}")
    except BaseException:
        os.close(fd)
        raise
    return st


def open_regular(path: Path | str, *, follow_symlinks: bool) -> tuple[int, os.stat_result]:
    """Open a file for reading only if it is a regular file; FIFOs never block the caller."""
    fd = os.open(path, _FILE_FLAGS | (0 if follow_symlinks else NOFOLLOW))
    return fd, _regular(fd, str(path))


class SkillDir:
    """A skill directory held open by descriptor: every file beneath it is opened one path
    segment at a time, relative to its parent's descriptor, following no symlink on the way.
    What is opened therefore lies beneath this directory, whatever is renamed meanwhile."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, _DIR_FLAGS)
        self._dirs: dict[str, int] = {"": self.fd}

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def __enter__(self) -> SkillDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def directory(self, rel_dir: str) -> int:
        """The descriptor of a folder beneath the skill (`a/b`; "" for the skill itself)."""
        fd = self._dirs.get(rel_dir)
        if fd is not None:
            return fd
        # Down from the skill a name at a time, in a loop: a path of any depth (a URI may name
        # one of thousands of segments) costs no recursion, and the walk stops at the first
        # folder that is not there, so its work is bounded by the depth on disk.
        fd = self.fd
        prefix = ""
        for name in rel_dir.split("/"):
            prefix = f"{prefix}/{name}" if prefix else name
            known = self._dirs.get(prefix)
            if known is None:
                known = os.open(name, _DIR_FLAGS | NOFOLLOW, dir_fd=fd)
                self._dirs[prefix] = known
            fd = known
        return fd

    def lstat(self, rel_path: str) -> os.stat_result:
        """The file's own stat (a symlink is not followed); opens no file."""
        parent, _, name = rel_path.rpartition("/")
        return os.stat(name, dir_fd=self.directory(parent), follow_symlinks=False)

    def open(self, rel_path: str) -> tuple[int, os.stat_result]:
        """A descriptor of the regular file at `rel_path` and its fstat; a symlink in its place
        fails with ELOOP, anything but a regular file with SpecialFileError."""
        parent, _, name = rel_path.rpartition("/")
        fd = os.open(name, _FILE_FLAGS | NOFOLLOW, dir_fd=self.directory(parent))
        return fd, _regular(fd, rel_path)

    def read(self, rel_path: str, *, keep_limit: int) -> FileRead:
        fd, st = self.open(rel_path)
        return read_open(fd, st, keep_limit=keep_limit)


def read_open(fd: int, st: os.stat_result, *, keep_limit: int) -> FileRead:
    """Hash the whole open file (and close it); keep its bytes only when it is at most
    `keep_limit` bytes long (-1: never). Memory stays bounded by the limit or one chunk."""
    try:
        # Asking for one byte more than fstat promised: a short read is the end of the file,
        # so nearly every file takes a single read. (Not the limit plus one: a buffer that
        # large, allocated and shrunk for every small file, cost more than reading it.)
        size = st.st_size
        want = (size if size <= keep_limit else min(size, CHUNK)) + 1
        first = os.read(fd, want)
        if len(first) < want:
            x, s = digest(first)
            return FileRead(first if len(first) <= keep_limit else None, file_stat(st), x, s, st)
        # Longer than fstat said (it grew), or than one chunk: hash the rest, and keep it all
        # only while it still fits the limit.
        hx = xxhash.xxh3_128(first)
        hs = hashlib.sha256(first)
        total = len(first)
        kept: list[bytes] | None = [first] if total <= keep_limit else None
        while chunk := os.read(fd, CHUNK):
            hx.update(chunk)
            hs.update(chunk)
            total += len(chunk)
            if kept is not None and total <= keep_limit:
                kept.append(chunk)
            else:
                kept = None
        data = b"".join(kept) if kept is not None else None
        return FileRead(data, file_stat(st), hx.hexdigest(), hs.hexdigest(), st)
    finally:
        os.close(fd)


def read_file(path: Path | str, *, keep_limit: int, follow_symlinks: bool) -> FileRead:
    """Open `path` (a regular file only) and hash it as `read_open` does."""
    fd, st = open_regular(path, follow_symlinks=follow_symlinks)
    return read_open(fd, st, keep_limit=keep_limit)
