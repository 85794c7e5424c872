"""Risk rules: what a skill's files say that an agent should not run unseen (pure, no I/O)."""

from __future__ import annotations

import json
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ahocorasick_rs

from skillindex.index.policy import RISK_RULES_VERSION as RULES_VERSION

# RULES_VERSION is part of every skill's change key: bump it (in index/policy.py) when a rule
# here changes, so files are judged again.

HIDDEN_UNICODE = "hidden-unicode"
PROMPT_INJECTION = "prompt-injection"
REMOTE_EXEC = "remote-exec"
SECRET = "secret"  # noqa: S105 - a finding code, not a password
BINARY_MASQUERADE = "binary-masquerade"
EXECUTABLE_OUTSIDE_SCRIPTS = "executable-outside-scripts"
LOAD_TIME_EXEC = "load-time-exec"
# Not a rule of this module: a skill.oms.sig that fails under signatures = "record"
# (index/signing.py) is a risk finding too.
SIGNATURE_INVALID = "signature-invalid"
RULE_CODES = (HIDDEN_UNICODE, PROMPT_INJECTION, REMOTE_EXEC, SECRET, BINARY_MASQUERADE,
              EXECUTABLE_OUTSIDE_SCRIPTS, LOAD_TIME_EXEC)  # the rules of this module
CODES = (*RULE_CODES, SIGNATURE_INVALID)

# The one file a host preprocesses before the model reads it.
ENTRY = "SKILL.md"
# Text is judged up to this many bytes of a file; the rest of a larger file is not.
TEXT_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class Risk:
    """One finding in one file: its code, where, and what (never the secret itself)."""

    code: str
    path: str  # relative to the skill directory
    line: int  # 1-based; 0 for the file as a whole
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "path": self.path, "line": self.line, "message": self.message}


# -- Content types ------------------------------------------------------------------------------

TEXT_SUFFIXES = frozenset({
    "md", "markdown", "txt", "rst", "py", "sh", "bash", "zsh", "fish", "ps1", "js", "mjs", "cjs",
    "ts", "tsx", "jsx", "json", "yaml", "yml", "toml", "ini", "cfg", "csv", "tsv", "xml",
    "html", "htm", "css", "sql", "rb", "pl", "go", "rs", "java", "kt", "c", "h", "cpp", "hpp",
    "cs", "php", "lua", "r", "swift", "tex", "svg", "env", "conf", "mermaid", "dot", "j2",
    "jinja", "tmpl", "template",
})
# What the first bytes of a file say it is.
_MAGIC = (
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x00asm", "a WebAssembly module"),
)
_EXECUTABLE_KINDS = frozenset({"an ELF executable", "a Windows executable",
                               "a Mach-O executable", "a Mach-O or Java class file",
                               "a WebAssembly module"})
# Image and document suffixes and the kinds their bytes must be.
_BINARY_SUFFIXES = {"png": "a PNG image", "jpg": "a JPEG image", "jpeg": "a JPEG image",
                    "gif": "a GIF image", "pdf": "a PDF document", "zip": "a zip archive",
                    "gz": "a gzip archive"}


def _suffix(rel_path: str) -> str:
    name = rel_path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""


# The bytes a magic number can start with: a file that starts otherwise has none.
_MAGIC_FIRST = frozenset(magic[0] for magic, _kind in _MAGIC)


def _magic_kind(head: bytes) -> str | None:
    if not head or head[0] not in _MAGIC_FIRST:
        return None
    # "MZ" alone starts ordinary text too; a Windows executable also says "This program".
    for magic, kind in _MAGIC:
        if head.startswith(magic) and (magic != b"MZ" or b"This program" in head[:512]
                                       or b"PE\x00\x00" in head[:1024]):
            return kind
    return None


def _looks_binary(head: bytes) -> bool:
    return head.find(b"\x00", 0, 8192) >= 0


# -- Hidden Unicode -----------------------------------------------------------------------------

_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BIDI_MARKS = frozenset("\u200e\u200f\u061c")


def _is_rtl_letter(char: str) -> bool:
    return unicodedata.bidirectional(char) in ("R", "AL")


def _is_pictograph(char: str) -> bool:
    # Emoji joined by ZWJ (family, profession sequences) and their modifiers.
    code = ord(char)
    return (0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or char in "\ufe0f\u20e3"
            or 0x1F3FB <= code <= 0x1F3FF)


def _joins_script(before: str, after: str) -> bool:
    # ZWJ and ZWNJ shape letters in Arabic, Persian and the Indic scripts: legitimate there.
    return (unicodedata.category(before)[0] in "LM" and unicodedata.category(after)[0] in "LM"
            and not (before.isascii() and after.isascii()))


_SUSPECT = re.compile("[\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff"
                      "\U000e0000-\U000e007f]")


def _hidden_unicode(rel_path: str, text: str) -> list[Risk]:
    found: list[Risk] = []
    line_of = _Lines(text)
    line_start, line_end, judged_line = 0, -1, -1
    line, rtl = "", None  # whether the line holds right-to-left letters, once asked
    for match in _SUSPECT.finditer(text):
        offset = match.start()
        if offset > line_end:  # a new line: find its bounds and its script once
            line_start = text.rfind("\n", 0, offset) + 1
            line_end = text.find("\n", offset)
            line_end = len(text) if line_end < 0 else line_end
            line = text[line_start:line_end]
            rtl = None
        elif judged_line == line_start:
            continue  # one finding a line is enough to point at it
        column = offset - line_start + 1
        if rtl is None and (text[offset] in _BIDI_CONTROLS or text[offset] in _BIDI_MARKS):
            rtl = any(_is_rtl_letter(letter) for letter in line)
        problem = _hidden_problem(line, column - 1, rtl=bool(rtl), first=offset == 0)
        if problem is not None:
            judged_line = line_start
            found.append(Risk(HIDDEN_UNICODE, rel_path, line_of(offset),
                              f"column {column}: U+{ord(text[offset]):04X}, {problem}"))
            if len(found) == MAX_PER_CODE:
                break
    return found


def _hidden_problem(line: str, index: int, *, rtl: bool, first: bool) -> str | None:
    char = line[index]
    code = ord(char)
    if 0xE0000 <= code <= 0xE007F:
        return "a Unicode tag character (invisible text)"
    if char in _BIDI_CONTROLS or char in _BIDI_MARKS:
        return None if rtl else "a bidirectional control outside right-to-left text"
    before = line[index - 1] if index > 0 else ""
    after = line[index + 1] if index + 1 < len(line) else ""
    if char == "\ufeff" and first:
        return None  # a byte order mark
    if char == "\u200d" and (_is_pictograph(before) or _is_pictograph(after)):
        return None  # an emoji sequence
    if char in "\u200c\u200d" and before and after and _joins_script(before, after):
        return None
    if before.strip() and after.strip():
        return "an invisible zero-width character inside a word"
    return None if char == "\u200b" else "an invisible zero-width character"


# -- Patterns over text -------------------------------------------------------------------------

# Bounded gaps ({0,80}) keep every pattern linear in the line's length.
_NEGATED = re.compile(
    r"\b(never|don't|do not|must not|should not|avoid|instead of|rather than|not safe|unsafe|"
    r"dangerous|bad practice|anti-pattern|warn|flag|detect|block|refuse|reject|e\.g\.|"
    r"such as|for example|example of|like\b)", re.IGNORECASE)
_INJECTION = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)?"
    r"(previous|prior|above|earlier|preceding|system|original)\s+"
    r"(instructions?|prompts?|rules|directions|guidelines|context)"
    r"|\b(do not|don't|never)\s+(tell|inform|mention|reveal|show|disclose)\b.{0,40}"
    r"\b(the\s+)?user\b"
    r"|\bwithout\s+(telling|informing|notifying|asking)\s+the\s+user\b"
    r"|\b(hide|conceal)\s+(this|these|it|the\s+\w+|your\s+\w+)\s+from\s+the\s+user\b"
    r"|\b(reveal|print|output|repeat|show|leak|dump)\s+(me\s+)?(your|the)\s+"
    r"(full\s+|entire\s+|hidden\s+)?(system\s+prompt|initial\s+instructions|"
    r"hidden\s+instructions)"
    r"|\byou\s+are\s+now\s+(in\s+)?(dan|developer\s+mode|jailbroken|unrestricted)\b",
    re.IGNORECASE)
_FETCH = r"(curl|wget|fetch|iwr|invoke-webrequest|irm|invoke-restmethod)\b"
_SHELL = r"(sudo\s+)?(ba|z|k|da)?sh|python[0-9.]*|perl|ruby|node|php|iex|invoke-expression"
_REMOTE_EXEC = re.compile(
    rf"\b{_FETCH}[^|\n]{{0,200}}\|\s*({_SHELL})\b"
    rf"|\b(ba|z)?sh\s+(-c\s+)?[\"']?\$\(\s*{_FETCH}"
    rf"|\b(ba|z)?sh\s+<\(\s*{_FETCH}"
    rf"|\b(eval|exec)\s*\(?\s*[\"']?\$\(\s*{_FETCH}"
    r"|\biex\s*\(\s*(new-object\s+net\.webclient|iwr|irm|invoke-webrequest)",
    re.IGNORECASE)
# Kinds of secrets and their shapes, as one pattern; the value is never stored or shown.
_SECRET_SHAPES = {
    "private_key": ("a private key", r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?"
                                     r"PRIVATE KEY(?: BLOCK)?-----"),
    "aws": ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github": ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})"),
    "gitlab": ("a GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    "slack": ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "anthropic": ("an Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    "openai": ("an OpenAI API key", r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"),
    "google": ("a Google API key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "stripe": ("a Stripe secret key", r"\b[rs]k_live_[0-9A-Za-z]{16,}"),
}
_SECRET_KINDS = {group: kind for group, (kind, _) in _SECRET_SHAPES.items()}
_SECRET = re.compile("|".join(f"(?P<{group}>{shape})"
                              for group, (_, shape) in _SECRET_SHAPES.items()))
# A key in documentation is marked as not real; such lines are not findings.
_FAKE = re.compile(r"example|fake|dummy|placeholder|sample|not a real|redacted|your[-_ ]|"
                   r"xxxx|<[a-z_-]+>|\.\.\.", re.IGNORECASE)


class _Lines:
    """Line numbers of increasing offsets, counted once over the text (linear, not n*m)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = 0
        self.line = 1

    def __call__(self, offset: int) -> int:
        if offset < self.offset:
            self.offset, self.line = 0, 1
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


# Every pattern needs one of a few words, and most files hold none of them: one pass of a
# multi-pattern matcher (Aho-Corasick, in Rust) over the lowered bytes finds where each word is,
# and a pattern is tried only on the lines holding one of its words. Listing a file's words in
# Python, or trying a regular expression at every position, costs several times more.
#
# A word of the injection pattern also names the other words its branch of the pattern needs on
# the same line (one of them): "show" is only a finding with "user" beside it.
_USER = (b"user",)
_INJECTION_WORDS: dict[str, tuple[bytes, ...]] = {
    "ignore": (), "disregard": (), "forget": (), "override": (),
    **dict.fromkeys(("tell", "inform", "mention", "reveal", "show", "disclose", "telling",
                     "informing", "notifying", "asking", "hide", "conceal"), _USER),
    "prompt": (b"system",), "instructions": (b"initial", b"hidden"),
    **dict.fromkeys(("dan", "developer", "jailbroken", "unrestricted"), (b"now",))}
_FETCH_WORDS = ("curl", "wget", "iwr", "irm", "invoke-webrequest", "invoke-restmethod",
                "webclient", "iex")
_SECRET_WORDS = ("akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
                 "xox", "sk-", "aiza", "sk_live_", "rk_live_")
# The UTF-8 spellings of the characters _SUSPECT finds: a file with none of them needs no
# decoding character by character.
_SUSPECT_SPELLINGS = (
    *(chr(code).encode() for code in (*range(0x200B, 0x2010), *range(0x202A, 0x202F),
                                      *range(0x2060, 0x206A), 0xFEFF, 0x061C, 0x180E)),
    b"\xf3\xa0\x80", b"\xf3\xa0\x81")  # the tag characters U+E0000..U+E007F


@dataclass(frozen=True, slots=True)
class _Anchor:
    family: str
    word: bytes
    # Every word is preceded by `\b`, a space or punctuation in its pattern, so where it
    # follows a letter, digit or `_` no match can start (the hidden characters are not words).
    bounded: bool = True
    also: tuple[bytes, ...] = ()  # the line must hold one of these too (when any)


_FAMILIES = (PROMPT_INJECTION, REMOTE_EXEC, SECRET)
_ANCHORS = (
    *(_Anchor(PROMPT_INJECTION, word.encode(), also=also)
      for word, also in _INJECTION_WORDS.items()),
    *(_Anchor(REMOTE_EXEC, word.encode()) for word in _FETCH_WORDS),
    *(_Anchor(SECRET, word.encode()) for word in (*_SECRET_WORDS, "private key")),
    *(_Anchor(HIDDEN_UNICODE, spelling, bounded=False) for spelling in _SUSPECT_SPELLINGS),
    *(_Anchor(LOAD_TIME_EXEC, mark, bounded=False) for mark in (b"!`", b"```!", b"~~~!")))
_MATCHER = ahocorasick_rs.BytesAhoCorasick([anchor.word for anchor in _ANCHORS])
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
# Past this many findings of one code in one file, the file has made its point.
MAX_PER_CODE = 10


def _anchored(lowered: bytes) -> dict[str, list[tuple[int, _Anchor]]]:
    """Where each family's words start in the (lowered) text."""
    found: dict[str, list[tuple[int, _Anchor]]] = {}
    for number, start, _ in _MATCHER.find_matches_as_indexes(lowered, overlapping=True):
        anchor = _ANCHORS[number]
        if anchor.bounded and start and lowered[start - 1] in _WORD_BYTES:
            continue
        found.setdefault(anchor.family, []).append((start, anchor))
    return found


def _lines_at(lowered: bytes, anchors: list[tuple[int, _Anchor]]) -> list[tuple[int, int]]:
    """The (start, end) of every line holding one of the anchors with what it also needs."""
    spans: dict[int, int] = {}
    for at, anchor in sorted(anchors, key=lambda item: item[0]):
        start = lowered.rfind(b"\n", 0, at) + 1
        if start in spans:
            continue  # the line is taken already
        end = lowered.find(b"\n", at)
        end = len(lowered) if end < 0 else end
        if not anchor.also or any(lowered.find(word, start, end) >= 0 for word in anchor.also):
            spans[start] = end
    return list(spans.items())


def _patterns(rel_path: str, data: bytes, lowered: bytes,
              anchored: dict[str, list[tuple[int, _Anchor]]]) -> list[Risk]:
    """Injection, remote execution and secrets, tried only on lines holding their words."""
    found: list[Risk] = []
    for code in _FAMILIES:
        anchors = anchored.get(code)
        if not anchors:
            continue  # no line holds its words
        count = 0
        for start, end in _lines_at(lowered, anchors):
            for column, message in _JUDGES[code](data[start:end].decode("utf-8", "replace")):
                found.append(Risk(code, rel_path, data.count(b"\n", 0, start) + 1,
                                  f"column {column}: {message}"))
                count += 1
                break  # one finding of a code a line
            if count == MAX_PER_CODE:
                break
    return found


def _injection(line: str) -> Iterator[tuple[int, str]]:
    for match in _INJECTION.finditer(line):
        before, after = line[:match.start()], line[match.end():]
        if not _NEGATED.search(before) and not _quoted(before, after):
            yield match.start() + 1, f"an instruction to the model to {_summary(match.group(0))}"


def _remote_exec(line: str) -> Iterator[tuple[int, str]]:
    for match in _REMOTE_EXEC.finditer(line):
        if not _NEGATED.search(line[:match.start()]):
            yield match.start() + 1, "a download piped into an interpreter"


def _secret(line: str) -> Iterator[tuple[int, str]]:
    if _FAKE.search(line):
        return
    for match in _SECRET.finditer(line):
        kind = _SECRET_KINDS[match.lastgroup or ""]
        yield match.start() + 1, f"{kind} ({len(match.group(0))} characters, not shown)"


# What each family's lines are judged by.
_JUDGES: dict[str, Callable[[str], Iterator[tuple[int, str]]]] = {
    PROMPT_INJECTION: _injection, REMOTE_EXEC: _remote_exec, SECRET: _secret}


def _quoted(before: str, after: str) -> bool:
    # A phrase in quotes or backticks is being talked about, not said.
    before, after = before.rstrip(), after.lstrip()
    return bool(before) and bool(after) and before[-1] in _OPENING and after[0] in _CLOSING


_OPENING = "\"'`\u201c\u2018"
_CLOSING = "\"'`\u201d\u2019"


def _summary(phrase: str) -> str:
    words = phrase.lower().split()
    if words[0] in ("ignore", "disregard", "forget", "override"):
        return "ignore its prior instructions"
    if words[0] in ("reveal", "print", "output", "repeat", "show", "leak", "dump"):
        return "reveal its system prompt"
    if words[0] == "you":
        return "drop its rules"
    return "hide what it does from the user"


# -- Commands a host runs while it loads the skill --------------------------------------------

# Claude Code runs `` !`command` `` and fenced blocks opened with ```! in SKILL.md and puts their
# output in the text before the model reads it. Both patterns are linear: a class that
# excludes the closing character, and a fence at the start of a line.
_INLINE_EXEC = re.compile(r"!`([^`\n]+)`")
_FENCED_EXEC = re.compile(r"^[ ]{0,3}(?:```|~~~)!", re.MULTILINE)


def _load_time_exec(rel_path: str, text: str) -> list[Risk]:
    found: list[Risk] = []
    lines = _Lines(text)
    for match in _FENCED_EXEC.finditer(text):
        found.append(Risk(LOAD_TIME_EXEC, rel_path, lines(match.start()),
                          "a ```! block: a host runs it when it loads the skill, before the "
                          "model or anyone reads it"))
    for match in _INLINE_EXEC.finditer(text):
        found.append(Risk(LOAD_TIME_EXEC, rel_path, lines(match.start()),
                          "an inline !`command`: a host runs it when it loads the skill, "
                          "before the model or anyone reads it"))
    found.sort(key=lambda item: item.line)
    return found[:MAX_PER_CODE]


# -- The whole file -----------------------------------------------------------------------------

def judge_file(rel_path: str, data: bytes | None, mode: int) -> list[Risk]:
    """The risks of one file, from its bytes (None when too large to read) and its mode."""
    found: list[Risk] = []
    in_scripts = rel_path.startswith("scripts/")
    head = (data or b"")[:4096]
    kind = _magic_kind(head)
    suffix = _suffix(rel_path)
    if stat.S_ISREG(mode) and mode & 0o111 and not in_scripts:
        found.append(Risk(EXECUTABLE_OUTSIDE_SCRIPTS, rel_path, 0,
                          "executable file outside scripts/"))
    elif kind in _EXECUTABLE_KINDS and not in_scripts:
        found.append(Risk(EXECUTABLE_OUTSIDE_SCRIPTS, rel_path, 0,
                          f"{kind} outside scripts/"))
    if data is None:
        return found
    binary = kind is not None or _looks_binary(head)
    if suffix in TEXT_SUFFIXES and suffix != "svg" and binary:
        found.append(Risk(BINARY_MASQUERADE, rel_path, 0,
                          f"a .{suffix} file whose bytes are {kind or 'binary, not text'}"))
        return found
    expected = _BINARY_SUFFIXES.get(suffix)
    if expected is not None and kind != expected and not (
            expected == "a zip archive" and kind == "a zip archive"):
        found.append(Risk(BINARY_MASQUERADE, rel_path, 0,
                          f"a .{suffix} file whose bytes are {kind or 'not ' + expected}"))
        return found
    if binary:
        return found
    try:
        text = data[:TEXT_LIMIT].decode("utf-8")
    except UnicodeDecodeError:
        return found
    data = data[:TEXT_LIMIT]
    lowered = data.lower()  # ASCII only, so offsets stay those of `data`
    anchored = _anchored(lowered)
    if HIDDEN_UNICODE in anchored:
        found += _hidden_unicode(rel_path, text)
    found += _patterns(rel_path, data, lowered, anchored)
    if rel_path == ENTRY and LOAD_TIME_EXEC in anchored:
        found += _load_time_exec(rel_path, text)
    return found


# -- Stored with each file ----------------------------------------------------------------------

def record(risks: list[Risk]) -> str:
    """What the manifest keeps of a file's risks, so an unchanged file is not read again."""
    if not risks:
        return NOTHING_FOUND
    return json.dumps({"v": RULES_VERSION, "found": [[r.code, r.line, r.message] for r in risks]},
                      ensure_ascii=False)


# The record of a file with no risk, as record() would write it (nearly every file's): made
# once, and known again without decoding it.
NOTHING_FOUND = json.dumps({"v": RULES_VERSION, "found": []})


def current(stored: str | None) -> bool:
    """Whether a stored record was made by these rules (else the file is judged again)."""
    return stored is not None and stored.startswith(f'{{"v": {RULES_VERSION},')


def from_record(rel_path: str, stored: str | None) -> list[Risk]:
    if not stored or stored == NOTHING_FOUND:
        return []
    try:
        found = json.loads(stored)["found"]
        return [Risk(str(code), rel_path, int(line), str(message))
                for code, line, message in found]
    except (ValueError, KeyError, TypeError):
        return []
