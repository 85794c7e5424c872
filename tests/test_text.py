"""Escaping for the terminal, XML, Markdown and JSON: nothing hostile passes, nothing is lost."""

from __future__ import annotations

import json
import sys
import unicodedata
import xml.dom.minidom
import xml.etree.ElementTree as ET

import pytest

from skillindex import text

# Categories a terminal must never receive raw: controls, format (bidi, zero-width, tags),
# surrogates, line and paragraph separators.
UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
HOSTILE = ("\x1b]0;pwned\x07", "\x1b[31mred\x1b[0m", "\x9b31m", "\x85", "a\u202eevil",
           "pdf\u200b", "\u2066x\u2069", "tag\U000e0041\U000e007f", "\ufeff", "\x00nul",
           "new\nline", "cr\rret", "tab\there", "\x7fdel", "\u2028sep", "bad\udcffbyte",
           "\ud800lone", "\ufffe\uffff", "soft\u00adhyphen")


def unsafe(value: str, *, allow: str = "") -> list[str]:
    return [c for c in value
            if c not in allow and (unicodedata.category(c) in UNSAFE_CATEGORIES
                                   or c in "\ufffe\uffff")]


def test_every_unsafe_character_of_this_python_is_escaped() -> None:
    # The module spells the format characters out; this keeps the list complete.
    missed = [f"U+{code:04X}" for code in range(sys.maxunicode + 1)
              if unicodedata.category(chr(code)) in UNSAFE_CATEGORIES
              and text.terminal(chr(code)) == chr(code)]
    assert missed == []


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    ("a\u202eb", "a\\u202eb"),
    ("pdf\u200b", "pdf\\u200b"),
    ("x\U000e0041", "x\\U000e0041"),
    ("c1\x85\x9b", "c1\\x85\\x9b"),
    ("new\nline\ttab\rcr", "new\\nline\\ttab\\rcr"),
    ("bad\udcffbyte", "bad\\xffbyte"),
    ("lone\ud800", "lone\\ud800"),
], ids=["osc", "bidi", "zero-width", "tag", "c1", "whitespace-controls", "undecodable-byte",
        "lone-surrogate"])
def test_terminal_shows_the_offending_character_escaped(raw: str, shown: str) -> None:
    assert text.terminal(raw) == shown


@pytest.mark.parametrize("ordinary", ["pdf-tools", "Café Ωμέγα", "日本語のスキル", "عربي",
                                      "emoji 🎉", "back\\slash", "  spaced  ", "a\u00a0b"])
def test_terminal_leaves_ordinary_text_alone(ordinary: str) -> None:
    assert text.terminal(ordinary) == ordinary


def test_terminal_can_keep_newlines_and_only_newlines() -> None:
    assert text.terminal("a\nb\x1b\r", keep_newlines=True) == "a\nb\\x1b\\r"


@pytest.mark.parametrize("raw", HOSTILE)
def test_xml_text_is_well_formed_and_keeps_the_text_visible(raw: str) -> None:
    escaped = text.xml(f"<x>&{raw}</x>")
    document = f"<a>{escaped}</a>"
    assert ET.fromstring(document).text == text.terminal(f"<x>&{raw}</x>")
    xml.dom.minidom.parseString(document)
    assert unsafe(escaped) == []
    assert "&#" not in escaped


@pytest.mark.parametrize("raw", HOSTILE)
def test_markdown_is_one_line_that_starts_no_block(raw: str) -> None:
    for start in ("", "# ", "- ", "1. ", "> "):
        escaped = text.markdown(start + raw)
        assert "\n" not in escaped
        assert unsafe(escaped) == []
        assert not escaped.startswith(("#", "-", "1.", ">"))


@pytest.mark.parametrize("raw", HOSTILE)
def test_json_keeps_the_exact_text_and_no_unsafe_character(raw: str) -> None:
    document = text.json_safe(json.dumps({"k": raw, raw: [raw]}, ensure_ascii=False, indent=2))
    assert json.loads(document) == {"k": raw, raw: [raw]}
    assert unsafe(document, allow="\n") == []


def test_json_leaves_ordinary_text_readable() -> None:
    value = {"name": "日本語 café 🎉", "path": "/a/b"}
    document = json.dumps(value, ensure_ascii=False)
    assert text.json_safe(document) == document


def test_fold_joins_lines_but_keeps_controls_for_escaping() -> None:
    assert text.fold("  one\n\ttwo\r\n three\u3000 ") == "one two three"
    assert text.fold("a\x1fb\u2028c") == "a\x1fb\u2028c"


def test_every_code_point_gives_well_formed_xml_and_safe_terminal_text() -> None:
    # Exhaustive rather than sampled: all 1,114,112 code points in one document, in chunks so
    # that each chunk's escapes are checked against its own characters.
    for start in range(0, sys.maxunicode + 1, 0x10000):
        chunk = "".join(map(chr, range(start, start + 0x10000)))
        document = f"<a>{text.xml(chunk)}</a>"
        assert ET.fromstring(document).text == text.terminal(chunk)
        assert unsafe(document) == []
        assert unsafe(text.markdown(chunk)) == []
        # A high surrogate followed by a low one would decode as one character (as with any
        # JSON encoder); lone surrogates, the kind a file name brings, are checked above.
        chunk = "".join(c for c in chunk if not "\ud800" <= c <= "\udfff")
        assert json.loads(text.json_safe(json.dumps(chunk, ensure_ascii=False))) == chunk


@pytest.mark.parametrize("value, shown", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@A1", "'@A1"), ("\tx", "'\tx"),
    ("\rx", "'\rx"), ("pdf", "pdf"), ("a=b", "a=b"), (-1, -1), (None, None), ("", "")])
def test_a_spreadsheet_cell_never_starts_a_formula(value: object, shown: object) -> None:
    assert text.cell(value) == shown
