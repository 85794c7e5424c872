"""The risk rules on a labelled set: every hostile file found, no benign look-alike flagged."""

from __future__ import annotations

import pytest

from skillindex.index import risk
from tests.riskcases import BENIGN, HOSTILE, OPENAI_KEY, Case


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_files_are_found(case: Case) -> None:
    found = risk.judge_file(case.path, case.data, case.mode)

    assert {r.code for r in found} == case.expected
    assert all(r.path == case.path for r in found)


@pytest.mark.parametrize("case", BENIGN, ids=[c.id for c in BENIGN])
def test_benign_look_alikes_are_not_flagged(case: Case) -> None:
    assert risk.judge_file(case.path, case.data, case.mode) == []


def test_every_code_has_hostile_cases() -> None:
    assert {code for c in HOSTILE for code in c.expected} == set(risk.CODES)


def test_a_finding_names_the_line_and_never_the_secret() -> None:
    text = f"# Setup\n\nfirst line\nOPENAI_API_KEY={OPENAI_KEY}\n"

    (found,) = risk.judge_file("SKILL.md", text.encode(), 0o100644)

    assert (found.code, found.line) == ("secret", 4)
    assert "column 16" in found.message
    assert OPENAI_KEY not in found.message and OPENAI_KEY[8:20] not in found.message


def test_a_file_too_large_to_read_is_judged_by_its_mode_alone() -> None:
    assert [r.code for r in risk.judge_file("assets/big.bin", None, 0o100755)] == [
        "executable-outside-scripts"]
    assert risk.judge_file("assets/big.bin", None, 0o100644) == []


@pytest.mark.parametrize("text", [
    "curl " + "a" * 200_000 + " | ",
    "ignore " * 50_000,
    "\u200b" * 100_000,
    "sk-" + "a" * 300_000,
    "x\n" * 200_000,
], ids=["long-curl", "repeated-ignore", "zero-width-run", "long-key-shape", "many-lines"])
def test_hostile_shapes_finish(text: str) -> None:
    # Linear patterns: these finish at once (the benchmark measures how fast).
    risk.judge_file("SKILL.md", text.encode(), 0o100644)
