"""Finds the standalone context files (XCSH.md, AGENTS.md ...) for a directory and hashes them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillindex.index.hashing import read_file
from skillindex.model import ContextFile


def find_context_files(directories: Sequence[tuple[int, Path]],
                       names: Sequence[str]) -> list[ContextFile]:
    """Every regular file called one of `names` in the (depth, directory) pairs, in their order
    and then in the order of `names`; missing, unreadable and special files are left out."""
    found: list[ContextFile] = []
    for depth, directory in directories:
        for name in names:
            path = directory / name
            try:
                # Hashed, never kept: a host that reads the file later can check it is the same.
                read = read_file(path, keep_limit=-1, follow_symlinks=True)
            except OSError:
                continue
            found.append(ContextFile(path, depth, read.stat.size, read.stat.mtime_ns, read.xxh3,
                                     read.sha256))
    return found
