"""Hostile frontmatter, from a grammar of YAML 1.1 (tests/yamlgrammar.py), through the judging
the indexer runs on every skill it reads, in both validation modes: nothing raises, nothing is
an `internal-error`, every row can be stored on either backend.

Short by default (SKILLINDEX_FUZZ_FRONTMATTERS, 1,000 documents, derandomized); a long run:
`SKILLINDEX_FUZZ_FRONTMATTERS=200000 pytest tests/test_fuzz_frontmatter.py`
(docs/development.md). A failing run names each distinct failure once (by the exception's type and
where it was raised, or by the broken property) with the smallest document that showed it.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillindex.index import risk
from skillindex.index.judge import Row, judge
from skillindex.index.scanner import ENTRY, SkillScan
from skillindex.model import (
    RESOURCE_ROW,
    FileStat,
    ResourceEntry,
    ResourceKind,
    RootSpec,
    Scope,
    Validation,
)
from tests.yamlgrammar import documents

EXAMPLES = int(os.environ.get("SKILLINDEX_FUZZ_FRONTMATTERS", "1000"))
INT64 = range(-(1 << 63), 1 << 63)


def judged(data: bytes, validation: Validation) -> tuple[Row, list[Row], list[Row]]:
    """A skill whose SKILL.md holds `data`, read as the scanner reads it, judged as the
    indexer judges it."""
    spec = RootSpec(Path("/fuzz"), Scope.USER, "custom", 10, validation=validation)
    stat = FileStat(len(data), 1, 1, 1, 1)
    entry = ResourceEntry(ENTRY, ResourceKind.ENTRY, stat, "0" * 32, "0" * 64,
                          risk.record(risk.judge_file(ENTRY, data, 0o100644)))
    scan = SkillScan("fuzzed", "/fuzz/fuzzed", "/fuzz/fuzzed", None, "key", entry_stat=stat,
                     entry_data=data, entry_xxh3="0" * 32, entry_sha256="0" * 64,
                     resources=[entry])
    row, findings, resources = judge(scan, spec)
    return row, findings, [dict(zip(RESOURCE_ROW, each, strict=True)) for each in resources]


def _refusal(data: bytes, validation: Validation) -> str | None:
    """What is wrong with judging `data`, or None."""
    row, findings, resources = judged(data, validation)
    for finding in findings:
        if finding["code"] == "internal-error":
            return f"internal-error: {finding['message'].split(':')[0]}"
    for table, rows in (("candidate", [row]), ("finding", findings), ("resource", resources)):
        for each in rows:
            for column, value in each.items():
                problem = _unstorable(value)
                if problem is not None:
                    return f"{table}.{column}: {problem}"
    if row["frontmatter"] is not None:
        try:
            fields = json.loads(row["frontmatter"], parse_constant=_not_json)
        except ValueError as exc:
            return f"candidate.frontmatter is not JSON: {type(exc).__name__}"
        if not isinstance(fields, dict):
            return "candidate.frontmatter is not a JSON object"
    return None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _unstorable(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if value in INT64 else "an integer no SQL column holds"
    if isinstance(value, str):
        if "\x00" in value:
            return "NUL in text"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate in text"
        return None
    return f"a {type(value).__name__}, not a column value"


def _signature(exc: BaseException) -> str:
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__)
              if "/skillindex/" in frame.filename or "/yaml/" in frame.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


def test_no_frontmatter_breaks_the_judging() -> None:
    failures: dict[str, bytes] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              derandomize=EXAMPLES <= 1_000,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(data=documents, lenient=st.booleans())
    def one(data: bytes, lenient: bool) -> None:
        # Both modes for every document: lenient repairs what strict refuses.
        for validation in ((Validation.LENIENT, Validation.STRICT) if lenient
                           else (Validation.STRICT, Validation.LENIENT)):
            try:
                problem = _refusal(data, validation)
            except Exception as exc:  # counted, then reported together
                problem = _signature(exc)
            if problem is not None:
                key = f"{validation}: {problem}"
                if key not in failures or len(data) < len(failures[key]):
                    failures[key] = data

    one()
    assert not failures, "\n".join(
        f"{key}\n    {data[:300]!r}" for key, data in sorted(failures.items()))
