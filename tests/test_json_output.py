"""The JSON the commands print: laid out as `json.dumps(indent=2, ensure_ascii=False)` lays it
out, with what a terminal must not receive escaped, whatever the values hold."""

from __future__ import annotations

import json
from typing import Any

import click
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from skillindex import text
from skillindex.cli.common import json_text, print_json, print_json_array
from skillindex.model import Level, Scope, Status

# Strings with what needs care: quotes, backslashes, controls, DEL and C1, bidi and
# zero-width characters, line separators, lone surrogates, astral characters.
TRICKY = st.text(st.sampled_from(
    ['a', ' ', '"', '\\', '\n', '\t', '\x00', '\x1b', '\x7f', '\x85', '\u00ad', '\u200b',
     '\u2028', '\u202e', '\ud800', '\udcff', '\ufeff', 'é', '中', '\U0001f600', '\U000e0041',
     '/', ':']), max_size=12)
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
           | st.floats(allow_nan=True, allow_infinity=True) | TRICKY
           | st.sampled_from([Status.REJECTED, Level.BODY]))  # a StrEnum, an IntEnum
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner, max_size=4) | st.tuples(inner, inner)
                   | st.dictionaries(TRICKY | st.sampled_from([Scope.USER]), inner, max_size=4)
                   | st.dictionaries(st.integers() | st.booleans() | st.none(), inner,
                                     max_size=2)),
    max_leaves=20)


def dumped(value: Any) -> str:
    """What `print_json` printed before it built the text itself."""
    return text.json_safe(json.dumps(value, indent=2, ensure_ascii=False))


@settings(max_examples=400, derandomize=True)
@given(VALUES, st.sampled_from(["", "  ", "    "]))
def test_the_text_is_the_indented_dump(value: Any, margin: str) -> None:
    assert json_text(value, margin) == dumped(value).replace("\n", "\n" + margin)


def printed(write: Any, value: Any) -> str:
    @click.command()
    def command() -> None:
        write(value)

    result = CliRunner().invoke(command, [], catch_exceptions=False)
    return result.stdout


def array_before(items: list[Any]) -> str:
    """What `print_json_array` printed an item at a time before it wrote in chunks."""
    if not items:
        return "[]\n"
    return "[\n  " + ",\n  ".join(dumped(item).replace("\n", "\n  ") for item in items) + "\n]\n"


@settings(max_examples=100, derandomize=True)
@given(st.lists(VALUES, max_size=6))
def test_an_array_is_printed_as_one_dump(items: list[Any]) -> None:
    assert printed(print_json_array, iter(items)) == array_before(items)
    assert printed(print_json_array, iter(items)) == dumped(items) + "\n"
    assert printed(print_json, items) == dumped(items) + "\n"


def test_a_long_array_written_in_chunks_is_the_same_text() -> None:
    items = [{"name": f"skill-{n}", "description": "\u202e" * (n % 3) + "x" * 300,
              "findings": [{"code": "c", "severity": "warning"}] * (n % 2), "collision": None}
             for n in range(2_000)]
    assert printed(print_json_array, iter(items)) == array_before(items)
    assert printed(print_json_array, iter(items[:1])) == array_before(items[:1])
