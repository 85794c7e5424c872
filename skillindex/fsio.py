"""The one way skillindex writes a file: beside the target, synced and renamed over it, never
through a link or outside the command's directory unless the user named the path."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from skillindex.errors import RefusedError, SkillIndexError

# Files that hold secrets or excerpts of the audit (token files, reports) are the owner's alone.
PRIVATE_MODE = 0o600
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class FileWriteError(SkillIndexError):
    """A file skillindex was asked to write could not be written; the old file, if any, is
    as it was."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class WriteRefusedError(RefusedError):
    """The target of a write is a link skillindex was not given, a dangling link, not a
    regular file, or outside the directory the command is about: nothing was written."""

    def __init__(self, what: str, path: Path | str, why: str) -> None:
        super().__init__(f"refusing to write {what} {path}: {why}; nothing was written",
                         path=str(path))


def target(path: Path | str, *, what: str, named: bool, within: Path | None) -> Path:
    """The real path a write of `path` would replace, or WriteRefusedError.

    `named`: the user named this path (`--output`, `--file`, `--html`): a link there is
    followed to the regular file it leads to, and the path may be outside `within`.
    `within`: the directory the command is about; an unnamed path must resolve inside it
    (None: the caller vouches that the user chose the directory, as with `--tokens`)."""
    path = Path(path).absolute()
    if path.name in ("", ".", ".."):
        raise WriteRefusedError(what, path, "it does not name a file")
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise FileWriteError(f"cannot write {what} {path}: {exc.strerror}",
                             path=str(path)) from exc
    if info is not None and stat.S_ISLNK(info.st_mode):
        leads = os.readlink(path)
        try:
            resolved = Path(os.path.realpath(path, strict=True))
        except OSError:
            raise WriteRefusedError(what, path, f"it is a dangling symbolic link (to {leads})") \
                from None
        if not named:
            raise WriteRefusedError(what, path, f"it is a symbolic link (to {leads}) that "
                                    "skillindex was not given; remove it, or name the file it "
                                    "leads to")
        if not resolved.is_file():
            raise WriteRefusedError(what, path, f"it is a symbolic link to {resolved}, which is "
                                    "not a regular file")
        return resolved
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise WriteRefusedError(what, path, "it is not a regular file")
    probe = path.parent
    while not os.path.exists(probe):  # the folders write() would make: none through a link
        if os.path.islink(probe):
            raise WriteRefusedError(what, path, f"{probe} is a dangling symbolic link")
        probe = probe.parent
    real = Path(os.path.realpath(path.parent)) / path.name
    if not named and within is not None:
        base = os.path.realpath(within)
        if os.path.commonpath([base, str(real)]) != base:
            raise WriteRefusedError(what, path, f"it leads to {real}, outside {base}")
    return real


def write(path: Path | str, data: bytes | str | Iterable[str], *, what: str, named: bool,
          within: Path | None, private: bool) -> Path:
    """Write `data` (bytes, text, or text in chunks) to `path` whole or not at all and return
    the real path written.

    A temporary file in the target's directory is written, synced and renamed over the
    target, so a reader sees the old file or the new one. The target is checked by `target`
    (its rules on links and on `within`). The new file keeps the old one's permission bits,
    or gets 0600 when `private` (tokens, reports), or the umask's bits when it is new."""
    real = target(path, what=what, named=named, within=within)
    chunks: Iterable[bytes | str] = (data,) if isinstance(data, bytes | str) else data
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        directory = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise FileWriteError(f"cannot write {what} {path}: {exc.strerror}",
                             path=str(path)) from exc
    try:
        _replace(directory, real, chunks, private=private)
    except OSError as exc:
        raise FileWriteError(f"cannot write {what} {path}: {exc.strerror}",
                             path=str(path)) from exc
    finally:
        os.close(directory)
    return real


def _replace(directory: int, real: Path, chunks: Iterable[bytes | str], *,
             private: bool) -> None:
    """The temporary file, named beside `real` in the open `directory`, renamed over it."""
    try:
        old = os.stat(real.name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    kept = stat.S_IMODE(old.st_mode) & 0o777 if old and stat.S_ISREG(old.st_mode) else None
    mode = PRIVATE_MODE if private else kept
    temporary = f".{real.name}.{secrets.token_hex(6)}.tmp"
    # A new public file is created with 0666 so that the umask decides, as for any new file.
    handle = os.open(temporary, _OPEN_FLAGS, 0o666 if mode is None else PRIVATE_MODE,
                     dir_fd=directory)
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
                while view:
                    view = view[os.write(handle, view):]
            if mode is not None:
                os.fchmod(handle, mode)
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(temporary, real.name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise
    os.fsync(directory)
