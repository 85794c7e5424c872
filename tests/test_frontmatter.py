from __future__ import annotations

import time

import pytest
import yaml

from skillindex.index import frontmatter
from skillindex.index.frontmatter import MAX_YAML_NODES, parse
from skillindex.index.skillmd import split
from skillindex.model import Finding


def codes(result: frontmatter.Frontmatter) -> list[str]:
    return [finding.code for finding in result.findings]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"# no frontmatter\n", "frontmatter-missing"),
        (b"", "frontmatter-missing"),
        (b"---\nname: x\n", "frontmatter-unclosed"),
        (b"---", "frontmatter-unclosed"),
        (b"---\nname: [unclosed\n---\n", "yaml-invalid"),
        (b"---\n- a\n- b\n---\n", "yaml-not-mapping"),
        (b"---\njust a string\n---\n", "yaml-not-mapping"),
        (b"---\nname: \xff\xfe\n---\n", "not-utf8"),
    ],
    ids=["none", "empty-file", "unclosed", "only-dashes", "invalid-yaml", "list", "scalar",
         "not-utf8"],
)
def test_broken_frontmatter_is_a_finding_not_an_exception(data: bytes, code: str) -> None:
    result = parse(data, lenient=False)
    assert result.fields is None
    assert codes(result) == [code]


def test_python_tags_are_never_constructed(tmp_path: object) -> None:
    data = (b"---\nname: x\n"
            b"boom: !!python/object/apply:os.system ['touch /tmp/pwned-skillindex']\n---\n")
    strict = parse(data, lenient=False)
    assert codes(strict) == ["yaml-invalid"]
    lenient = parse(data, lenient=True)
    # Read line by line, the tag is inert text.
    assert lenient.fields is not None
    assert isinstance(lenient.fields["boom"], str)
    assert "python/object" in lenient.fields["boom"]


def _alias_bomb(levels: int = 9) -> bytes:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return ("---\n" + "\n".join(lines) + "\n---\nbody\n").encode()


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_alias_bomb_is_rejected_quickly(lenient: bool) -> None:
    started = time.process_time()
    result = parse(_alias_bomb(), lenient=lenient)
    # 9**9 nodes if expanded; refusing it must not expand it (a generous bound, not a benchmark).
    assert time.process_time() - started < 5
    assert result.fields is None
    assert codes(result) == ["yaml-invalid"]
    assert str(MAX_YAML_NODES) in result.findings[0].message


def test_recursive_alias_is_rejected() -> None:
    assert codes(parse(b"---\na: &a [*a]\n---\n", lenient=False)) == ["yaml-invalid"]


def test_small_aliases_are_fine() -> None:
    result = parse(b"---\nbase: &b {k: v}\nmetadata: *b\n---\n", lenient=False)
    assert result.fields == {"base": {"k": "v"}, "metadata": {"k": "v"}}


def test_bom_and_crlf_are_accepted() -> None:
    data = "\ufeff---\r\nname: pdf\r\ndescription: Read PDFs.\r\n---\r\n# Title\r\nText\r\n"
    result = parse(data.encode("utf-8"), lenient=False)
    assert result.findings == ()
    assert result.fields == {"name": "pdf", "description": "Read PDFs."}
    assert result.body == "# Title\nText\n"


def test_body_excludes_the_frontmatter_and_keeps_later_rules() -> None:
    head, body = split("---\nname: a\n---\nintro\n---\nmore\n")  # type: ignore[misc]
    assert head == "name: a\n"
    assert body == "intro\n---\nmore\n"


def test_empty_frontmatter_is_an_empty_mapping() -> None:
    assert parse(b"---\n---\nbody", lenient=False).fields == {}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("description: Build for AWS: ECS and Fargate", "Build for AWS: ECS and Fargate"),
        ("description: [AUTO] Use when deploying", "[AUTO] Use when deploying"),
        ("description: | text on the same line", "| text on the same line"),
        ('description: "quoted: fine"', "quoted: fine"),
    ],
    ids=["colon", "leading-tag", "pipe-same-line", "quoted"],
)
def test_lenient_mode_repairs_what_breaks_in_practice(line: str, expected: str) -> None:
    data = f"---\nname: x\n{line}\nmetadata:\n  author: me\n  list: a\n---\n".encode()
    strict = parse(data, lenient=False)
    lenient = parse(data, lenient=True)
    if line.startswith('description: "'):
        assert strict.fields is not None  # valid YAML needs no repair
        return
    assert codes(strict) == ["yaml-invalid"]
    assert lenient.fields == {"name": "x", "description": expected,
                              "metadata": {"author": "me", "list": "a"}}
    assert codes(lenient) == ["yaml-repaired"]
    assert lenient.repaired


def test_lenient_block_scalar_and_continuation_lines() -> None:
    data = (b"---\nname: x: y\ndescription: |\n  first\n  second\n"
            b"compatibility: works with\n  many hosts\n---\n")
    result = parse(data, lenient=True)
    assert result.fields == {"name": "x: y", "description": "first\nsecond\n",
                             "compatibility": "works with many hosts"}


@pytest.mark.parametrize(
    "head",
    ["name: x: y\nnot a key line\n", "name: x: y\nmetadata:\n  - [unclosed\n"],
    ids=["stray-line", "bad-block"],
)
def test_lenient_mode_still_rejects_the_unreadable(head: str) -> None:
    result = parse(f"---\n{head}---\n".encode(), lenient=True)
    assert result.fields is None
    assert codes(result) == ["yaml-invalid"]


def test_oversized_frontmatter_is_refused_before_parsing() -> None:
    head = "description: " + "x" * (frontmatter.MAX_FRONTMATTER_CHARS + 1) + "\n"
    result = parse(f"---\n{head}---\n".encode(), lenient=True)
    assert codes(result) == ["file-too-large"]


def _nested(shape: str, levels: int) -> str:
    if shape == "flow-sequence":
        return "metadata: " + "[" * levels + "]" * levels + "\n"
    if shape == "flow-mapping":
        return "metadata: " + "{a: " * levels + "x" + "}" * levels + "\n"
    if shape == "block-sequence":
        return "metadata:\n  " + "- " * levels + "x\n"
    return "metadata: " + "{<<: " * levels + "{}" + "}" * levels + "\n"  # merge keys


NEST_SHAPES = ["flow-sequence", "flow-mapping", "block-sequence", "merge-keys"]


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
@pytest.mark.parametrize("levels", [frontmatter.MAX_YAML_DEPTH, 990, 5000])
@pytest.mark.parametrize("shape", NEST_SHAPES)
def test_nesting_past_the_limit_is_a_finding(shape: str, levels: int, lenient: bool) -> None:
    # 990 levels is just under libyaml's own limit; the JSON encoder used to recurse past
    # Python's limit on it. 5000 is past libyaml's limit, which used to send it to the repair.
    data = f"---\nname: x\ndescription: d\n{_nested(shape, levels)}---\nbody\n".encode()
    result = parse(data, lenient=lenient)
    assert result.fields is None
    assert codes(result) == ["yaml-invalid"]
    assert f"deeper than {frontmatter.MAX_YAML_DEPTH} levels" in result.findings[0].message


@pytest.mark.parametrize("shape", NEST_SHAPES)
def test_nesting_below_the_limit_is_kept(shape: str) -> None:
    levels = frontmatter.MAX_YAML_DEPTH // 2 - 2
    data = f"---\nname: x\ndescription: d\n{_nested(shape, levels)}---\n".encode()
    result = parse(data, lenient=False)
    assert result.findings == ()
    assert result.fields is not None


@pytest.mark.parametrize("shape", NEST_SHAPES)
def test_nesting_is_bounded_with_the_pure_python_parser_too(
        shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where libyaml is missing, PyYAML composes recursively in Python.
    monkeypatch.setattr(frontmatter, "_Loader", yaml.SafeLoader)
    data = f"---\nname: x\ndescription: d\n{_nested(shape, 400)}---\n".encode()
    result = parse(data, lenient=True)
    assert codes(result) == ["yaml-invalid"]


def test_a_64k_line_of_blanks_is_repaired_exactly() -> None:
    # A value with a long inner run of blanks made the key-line pattern backtrack
    # quadratically (about 12 s for 64 KB); its value must come back with the blanks intact.
    padding = " " * (frontmatter.MAX_FRONTMATTER_CHARS - 100)
    head = f"name: x\ndescription: a{padding}b \t\nbroken: [\n"
    result = parse(f"---\n{head}---\n".encode(), lenient=True)
    assert codes(result) == ["yaml-repaired"]
    assert result.fields is not None
    assert result.fields["description"] == f"a{padding}b"
    assert result.fields["broken"] == "["


@pytest.mark.parametrize(
    "head",
    ["m: [" + ",".join(["a"] * 20_000) + "]\n",
     "".join(f"k{n}: a: b\n" for n in range(5_000)),
     "".join(f"k{n}:\n  - x\n" for n in range(4_000)) + "b: [\n"],
    ids=["one-long-list", "many-lines-to-repair", "many-blocks-to-repair"])
@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_frontmatter_with_too_many_values_is_refused(head: str, lenient: bool) -> None:
    result = parse(f"---\n{head}---\n".encode(), lenient=lenient)
    assert result.fields is None
    assert codes(result) == ["yaml-invalid"]


def test_a_long_frontmatter_of_real_size_is_not_refused() -> None:
    head = "name: x\ndescription: d\nmetadata:\n" + "".join(
        f"  key-{n}: value {n}\n" for n in range(300))
    result = parse(f"---\n{head}---\n".encode(), lenient=False)
    assert result.findings == ()
    assert result.fields is not None
    assert len(result.fields["metadata"]) == 300


# Values PyYAML's constructors cannot build, each raising below yaml.YAMLError.
@pytest.mark.parametrize(("head", "tag", "value"), [
    ("enabled: !!bool maybe", "!!bool", "maybe"),
    ('x: !!int ""', "!!int", ""),
    ("x: !!float _", "!!float", "_"),
    ("x: !!timestamp nope", "!!timestamp", "nope"),
    ("x: !!timestamp 0000-01-01", "!!timestamp", "0000-01-01"),
    ("x: [a, {b: !!bool maybe}]", "!!bool", "maybe"),
    ("!!int x: y", "!!int", "x"),
    ('? !!float ""\n: y', "!!float", ""),
], ids=["bool", "int", "float", "timestamp", "year-0", "nested", "key", "complex-key"])
def test_a_tag_its_value_cannot_take_is_invalid_yaml(head: str, tag: str, value: str) -> None:
    finding = refused(f"name: x\n{head}\n", "yaml-invalid", lenient=False)
    assert f"a {tag} value cannot be {value!r}" in finding.message


def refused(head: str, code: str, *, lenient: bool) -> Finding:
    """The one error that refuses this frontmatter, of this code."""
    result = parse(f"---\n{head}---\n".encode(), lenient=lenient)
    assert result.fields is None
    [finding] = result.findings
    assert (finding.code, finding.severity) == (code, "error")
    return finding


def test_lenient_mode_reads_a_line_with_such_a_tag_as_text() -> None:
    result = parse(b"---\nname: x\nx: !!int \"\"\ny: !!bool maybe\n---\n", lenient=True)
    assert codes(result) == ["yaml-repaired"]
    assert result.fields == {"name": "x", "x": '!!int ""', "y": "!!bool maybe"}


@pytest.mark.parametrize("number", [
    "9" * 101, "-" + "9" * 4_500, "0x" + "f" * 4_500, "0" + "7" * 200, "0b" + "1" * 200,
    "1" + ":59" * 40, "!!float 1" + ":59" * 400 + ".5", "!!int " + "9" * 101,
    "1" + "0" * 200 + ".5",
], ids=["decimal", "4500-digits", "hex", "octal", "binary", "base-60", "base-60-float",
        "tagged", "float"])
@pytest.mark.parametrize("place", ["value", "key", "nested"])
@pytest.mark.parametrize("lenient", [False, True])
def test_a_number_past_the_limit_is_refused(number: str, place: str, lenient: bool) -> None:
    head = {"value": f"x: {number}", "key": f"? {number}\n: x",
            "nested": f"x:\n  - {{a: [{number}]}}"}[place]
    finding = refused(f"name: x\n{head}\n", "number-too-large", lenient=lenient)
    assert f"the limit is {frontmatter.MAX_NUMBER_CHARS}" in finding.message


def test_a_number_at_the_limit_is_kept() -> None:
    result = parse(f"---\nname: x\nx: {'9' * 100}\ny: 0x{'f' * 98}\n---\n".encode(),
                   lenient=False)
    assert result.findings == ()
    assert result.fields is not None
    assert result.fields["x"] == int("9" * 100)
