"""The reindex progress line: fits the terminal, has a total on the first run, rate and time."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from skillindex.cli.progress import Progress
from skillindex.query import verify
from tests.conftest import OpenIndex, write_skill


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_every_redraw_fits_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    stream = io.StringIO()
    progress = Progress(stream)
    deep = "/home/someone/" + "very-long-folder-name/" * 12 + "skills"
    for done, root in [(1, deep), (500, "/short"), (61_452, deep), (7, "/x")]:
        progress._draw(progress.line(done, 61_452, root, elapsed=3.0))
    progress.clear()
    drawn = stream.getvalue().split("\r")
    assert all(len(segment) < columns for segment in drawn), [len(s) for s in drawn]
    assert drawn[-1] == ""  # cleared: the cursor is back at the start of an empty line


def test_a_known_total_gives_a_rate_and_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    line = Progress().line(500, 2_000, "/r/skills", elapsed=2.0)
    assert line.startswith("indexing 500/2000 skills (25%), 250/s, 6 s left  /r/skills")
    assert Progress().line(5, None, "/r", elapsed=1.0).startswith("indexing 5 skills, 5/s")


def test_the_first_reindex_has_a_total(tmp_path: Path, open_index: OpenIndex) -> None:
    for number in range(7):
        write_skill(tmp_path / "skills", f"s{number}")
    seen: list[tuple[int, int | None]] = []
    index = open_index(tmp_path / "skills")
    index.reindex(progress=lambda done, expected, _root: seen.append((done, expected)))
    assert seen[-1] == (7, 7)
    assert all(expected == 7 for _done, expected in seen)


def test_verify_tells_its_progress_page_by_page(tmp_path: Path, open_index: OpenIndex,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "PAGE", 3)
    for number in range(7):
        write_skill(tmp_path / "skills", f"s{number}")
    index = open_index(tmp_path / "skills")
    index.reindex()
    seen: list[tuple[int, int | None, str]] = []
    report = index.verify(progress=lambda done, expected, root: seen.append(
        (done, expected, root)))
    assert report.ok
    assert [done for done, _expected, _root in seen] == [3, 6, 7]
    assert {root for _done, _expected, root in seen} == {str(tmp_path / "skills")}
    assert "verifying 7 skills" in Progress(verb="verifying").line(7, None, "/r", elapsed=1.0)
