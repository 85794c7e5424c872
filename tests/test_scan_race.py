"""A file swapped for a symlink and back while reindexes and reads run: nothing outside leaks.

Bounded by time: SKILLINDEX_RACE_SECONDS (default 3) per backend; set it higher for a long run.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.errors import SkillIndexError
from skillindex.store.models import Resource
from tests.conftest import OpenIndex, write_skill

INSIDE = b"inside: the indexed bytes\n"
OUTSIDE = b"OUTSIDE: a secret file!!\n\n"  # the same size: only the hash and inode tell
assert len(INSIDE) == len(OUTSIDE)


def _seconds() -> float:
    return float(os.environ.get("SKILLINDEX_RACE_SECONDS", "3"))


def _swapper(target: Path, outside: Path, stop: threading.Event) -> None:
    # Both moves are atomic renames: the name is always a regular file or a symlink.
    link, fresh = target.parent / ".link", target.parent / ".fresh"
    while not stop.is_set():
        link.unlink(missing_ok=True)
        link.symlink_to(outside)
        os.replace(link, target)
        fresh.write_bytes(INSIDE)
        os.replace(fresh, target)


def test_a_file_swapped_for_a_symlink_never_puts_an_outside_file_in_the_manifest(
        tmp_path: Path, open_index: OpenIndex) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(OUTSIDE)
    skill = write_skill(tmp_path / "skills", "pdf")
    (skill / "references").mkdir()
    target = skill / "references" / "data.txt"
    target.write_bytes(INSIDE)
    index = open_index(tmp_path / "skills")
    index.reindex()
    outside_id = (outside.stat().st_ino, outside.stat().st_dev)
    inside_sha = hashlib.sha256(INSIDE).hexdigest()
    stop = threading.Event()
    swapper = threading.Thread(target=_swapper, args=(target, outside, stop), daemon=True)
    runs = reads = 0
    swapper.start()
    try:
        deadline = time.monotonic() + _seconds()
        while time.monotonic() < deadline:
            index.reindex()  # never raises: a lost race is a finding
            runs += 1
            with Session(index.engine) as session:
                row = session.scalars(select(Resource).where(
                    Resource.rel_path == "references/data.txt")).one_or_none()
            if row is not None:
                assert row.sha256 == inside_sha
                assert (row.inode, row.device) != outside_id
            try:
                assert index.read("skill://pdf/references/data.txt", reason="race").data == INSIDE
                reads += 1
            except SkillIndexError:
                pass  # refused, changed or missing: never the outside bytes, never a crash
    finally:
        stop.set()
        swapper.join()
    assert runs
    # The swapper always stops on the regular file: a quiet reindex records it, from inside.
    index.reindex()
    with Session(index.engine) as session:
        row = session.scalars(select(Resource).where(
            Resource.rel_path == "references/data.txt")).one()
    assert row.sha256 == inside_sha
    assert all(event.outcome != "error" for event in index.audit())
