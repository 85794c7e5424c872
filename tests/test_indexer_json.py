"""How frontmatter is kept as JSON in the store: every YAML value has a readable form."""

from __future__ import annotations

import datetime
import json

import pytest

from skillindex.index.judge import _to_json


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"name": "a", "n": 1}, {"n": 1, "name": "a"}),
        ({"when": datetime.date(2026, 11, 30)}, {"when": "2026-11-30"}),
        ({"tags": {"b", "a"}}, {"tags": ["a", "b"]}),
        ({"metadata": {1: "one", "two": 2}}, {"metadata": {"1": "one", "two": 2}}),
        ({"nested": {"deep": [{"x": datetime.datetime(2026, 1, 1, 12, 0)}]}},
         {"nested": {"deep": [{"x": "2026-01-01 12:00:00"}]}}),
    ],
    ids=["plain", "date", "set", "mixed-keys", "nested-datetime"])
def test_frontmatter_is_stored_as_readable_json(fields: dict[str, object],
                                                expected: dict[str, object]) -> None:
    assert json.loads(_to_json(fields)) == expected
