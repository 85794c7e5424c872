"""Makes text from skill files safe to show: on a terminal, in XML, HTML, Markdown and JSON;
and names from the filesystem or argv safe to store."""

from __future__ import annotations

import re

# A character is shown escaped when it can steer a terminal (C0 and C1 controls, DEL: escape
# sequences start with them), break or hide lines (line and paragraph separators), is invisible
# or reorders what is shown (every format character, Unicode category Cf: bidi controls,
# zero-width characters, tag characters, the soft hyphen), stands for an undecodable byte (a lone
# surrogate), or is a noncharacter XML 1.0 forbids. Everything else, letters of every script
# included, passes. The format characters are spelled out (Unicode 15; a test keeps the list
# complete for the running Python) because deriving them costs a scan of every code point.
_OTHERS = (r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
           r"\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
           r"\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
           r"\U0001d173-\U0001d17a\U000e0000-\U000e007f")
_UNSAFE = re.compile(rf"[\x00-\x1f\x7f-\x9f{_OTHERS}]")
_UNSAFE_BUT_NEWLINE = re.compile(rf"[\x00-\x09\x0b-\x1f\x7f-\x9f{_OTHERS}]")
# JSON's encoder escapes everything below U+0020 already.
_JSON_UNSAFE = re.compile(rf"[\x7f-\x9f{_OTHERS}]")
# Whitespace a description may fold into single spaces: what a YAML author means as a break.
_FOLD = re.compile(r"[\t\n\r \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_MARKDOWN_BLOCK_START = re.compile(r"^(?:[#>=|~`+*-]|\d+[.)])")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if 0xDC80 <= code <= 0xDCFF:
        # A byte that was not UTF-8, carried by Python's surrogateescape: show the byte.
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def terminal(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control, escape, invisible or bidi character shown escaped (`\\x1b`,
    `\\u202e`), so it cannot steer the terminal and what it hides stays visible. Newlines are
    escaped too unless `keep_newlines`: a name cannot add a line of its own."""
    if text.isprintable():
        # The common case, decided in C: no control, format, separator or surrogate character.
        return text
    pattern = _UNSAFE_BUT_NEWLINE if keep_newlines else _UNSAFE
    return pattern.sub(_escape, text)


def fold(text: str) -> str:
    """Runs of whitespace (line breaks included) as one space, without the outer ones."""
    if text.isprintable():
        # Printable text holds no whitespace but the ASCII space: str.split folds it in C.
        return " ".join(text.split())
    return _FOLD.sub(" ", text).strip(" ")


def xml(text: str) -> str:
    """Character data for XML 1.0: shown escaped as for a terminal (so no character XML forbids
    remains, even as a reference), then `&`, `<` and `>` as entities."""
    if not text.isprintable():
        text = _UNSAFE.sub(_escape, text)
    if "&" in text or "<" in text or ">" in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text


def html(text: object) -> str:
    """Text for an HTML page, in an element or a quoted attribute: as `xml` (controls and
    invisible characters shown escaped, `&`, `<`, `>` as entities), and both quotes too."""
    escaped = xml(str(text))
    if '"' in escaped or "'" in escaped:
        escaped = escaped.replace('"', "&quot;").replace("'", "&#39;")
    return escaped


# What makes a spreadsheet read a cell as a formula (or, after a TAB or CR, as the next one).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: object) -> object:
    """A value for a CSV or TSV cell a person's spreadsheet opens: text that a spreadsheet
    would run as a formula gets a leading `'`, shown as text; numbers and other text pass."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def markdown(text: str) -> str:
    """One line of Markdown that cannot start a block, open a tag or hide what follows."""
    text = xml(text)
    return f"\\{text}" if _MARKDOWN_BLOCK_START.match(text) else text


def json_safe(document: str) -> str:
    """A JSON document with the characters a terminal must not receive written as `\\u`
    escapes; it decodes to exactly the same values. Safe because JSON's own syntax is ASCII, so
    such characters can only stand inside strings."""
    if document.isprintable():
        return document
    return _JSON_UNSAFE.sub(_json_escape, document)


def shown_name(text: str) -> str:
    """A file name as text any database can store: bytes that are not UTF-8 become `\\xNN`."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_text(name: str) -> bool:
    """Whether a name can be stored as text: os.scandir and sys.argv decode bytes that are not
    UTF-8 to lone surrogates, which no database (nor UTF-8) can hold."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
