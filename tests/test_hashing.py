from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import xxhash

from skillindex.index.hashing import CHUNK, SpecialFileError, read_file, read_open


@pytest.mark.parametrize(
    ("size", "keep", "kept"),
    [(0, 10, True), (10, 10, True), (11, 10, False), (10, -1, False),
     (CHUNK * 2 + 7, CHUNK * 3, True), (CHUNK * 2 + 7, 100, False), (CHUNK * 3, -1, False)],
    ids=["empty", "at-limit", "over-limit", "never-keep", "big-kept", "big-streamed",
         "chunks-streamed"])
def test_hashes_cover_every_byte_and_bytes_are_kept_only_within_the_limit(
        tmp_path: Path, size: int, keep: int, kept: bool) -> None:
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    read = read_file(path, keep_limit=keep, follow_symlinks=False)
    assert read.xxh3 == xxhash.xxh3_128_hexdigest(data)
    assert read.sha256 == hashlib.sha256(data).hexdigest()
    assert read.stat.size == size
    assert (read.data == data) if kept else read.data is None


@pytest.mark.parametrize(("size", "keep", "kept"), [
    (100, 1000, True), (100, 100, True), (100, 99, False), (CHUNK + 10, CHUNK * 2, True),
    (CHUNK * 2 + 10, CHUNK * 2, False)],
    ids=["within", "at-limit", "past-limit", "past-a-chunk", "past-a-chunk-and-the-limit"])
def test_a_file_that_grew_after_its_fstat_is_read_and_hashed_whole(
        tmp_path: Path, size: int, keep: int, kept: bool) -> None:
    # A read asks for one byte more than fstat said: here fstat said 10 bytes, so the first
    # read is not short and the rest must still be read, hashed and (within the limit) kept.
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    fields = list(os.fstat(fd))
    fields[6] = 10  # st_size
    read = read_open(fd, os.stat_result(fields), keep_limit=keep)
    assert read.xxh3 == xxhash.xxh3_128_hexdigest(data)
    assert read.sha256 == hashlib.sha256(data).hexdigest()
    assert (read.data == data) if kept else read.data is None


def test_symlinks_and_fifos_are_not_read(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.write_text("x")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError):
        read_file(tmp_path / "link", keep_limit=10, follow_symlinks=False)
    assert read_file(tmp_path / "link", keep_limit=10, follow_symlinks=True).data == b"x"
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SpecialFileError):
        read_file(tmp_path / "pipe", keep_limit=10, follow_symlinks=False)
