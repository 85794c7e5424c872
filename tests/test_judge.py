"""The rows a judged skill becomes: every value one both backends store and any reader reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillindex.index.judge import judge
from skillindex.index.scanner import SkillScan
from skillindex.model import FileStat, RootSpec, Scope


def _strict(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize(("value", "stored"), [
    (".inf", ".inf"), ("-.inf", "-.inf"), (".nan", ".nan"), ("[1.5, .Inf]", [1.5, ".inf"]),
    ("{a: -.INF}", {"a": "-.inf"}), ("1e400", "1e400"), ("!!float 1e400", ".inf"),
])
def test_numbers_json_cannot_hold_are_stored_as_yaml_spells_them(tmp_path: Path, value: str,
                                                                 stored: object) -> None:
    data = f"---\nname: x\ndescription: d\nv: {value}\n---\n".encode()
    scan = SkillScan("x", str(tmp_path / "x"), str(tmp_path / "x"), None, "key",
                     entry_stat=FileStat(len(data), 1, 1, 1, 1), entry_data=data)

    row, findings, _ = judge(scan, RootSpec(tmp_path, Scope.USER, "test", 10))

    assert row["status"] == "accepted", findings
    # A host's JSON.parse refuses Python's Infinity and NaN.
    assert json.loads(row["frontmatter"], parse_constant=_strict)["v"] == stored
