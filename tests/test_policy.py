from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillindex.index.frontmatter import parse
from skillindex.index.policy import judge, rules_key
from skillindex.model import RootSpec, Scope, Severity, Status, Validation


def spec(validation: Validation = Validation.STRICT, *, require_description: bool = True,
         prefix: str = "") -> RootSpec:
    return RootSpec(Path("/r"), Scope.USER, "test", 10, require_description=require_description,
                    validation=validation, name_prefix=prefix)


def verdict(head: str, *, dir_name: str = "pdf", root: RootSpec | None = None):  # type: ignore[no-untyped-def]
    parsed = parse(f"---\n{head}---\nbody\n".encode(), lenient=(root or spec()).validation
                   == Validation.LENIENT)
    return judge(parsed, dir_name=dir_name, root=root or spec())


def errors(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.code for f in result.findings if f.severity is Severity.ERROR]


def warnings(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.code for f in result.findings if f.severity is Severity.WARNING]


def test_a_valid_skill_is_accepted_without_findings() -> None:
    result = verdict("name: pdf\ndescription: Read PDFs.\nlicense: MIT\n")
    assert result.status is Status.ACCEPTED
    assert result.findings == ()
    assert (result.name, result.description, result.enabled) == ("pdf", "Read PDFs.", True)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("Pdf", "name-invalid"),
        ("pdf_tools", "name-invalid"),
        ("-pdf", "name-invalid"),
        ("pdf-", "name-invalid"),
        ("pd--f", "name-invalid"),
        ("a" * 65, "name-too-long"),
        ("other", "name-dir-mismatch"),
    ],
    ids=["uppercase", "underscore", "leading-hyphen", "trailing-hyphen", "double-hyphen",
         "65-chars", "dir-mismatch"],
)
def test_name_rules_reject_in_strict_and_warn_in_lenient(name: str, code: str) -> None:
    head = f"name: {name}\ndescription: d\n"
    strict = verdict(head, dir_name=name if code != "name-dir-mismatch" else "pdf")
    assert strict.status is Status.REJECTED
    assert code in errors(strict)
    lenient = verdict(head, dir_name=name if code != "name-dir-mismatch" else "pdf",
                      root=spec(Validation.LENIENT))
    assert lenient.status is Status.ACCEPTED
    assert code in warnings(lenient)
    assert lenient.name == name


def test_64_characters_is_the_longest_name() -> None:
    assert verdict(f"name: {'a' * 64}\ndescription: d\n", dir_name="a" * 64).findings == ()


def test_name_defaults_to_the_directory() -> None:
    result = verdict("description: d\n", dir_name="my-skill")
    assert (result.status, result.name) == (Status.ACCEPTED, "my-skill")


@pytest.mark.parametrize(
    "head", ["name: 12\ndescription: d\n", "name: [a]\ndescription: d\n",
             "name: pdf\ndescription: 12\n", "name: pdf\ndescription: {a: b}\n"],
    ids=["int-name", "list-name", "int-description", "map-description"])
@pytest.mark.parametrize("mode", list(Validation), ids=str)
def test_non_string_name_or_description_is_rejected(head: str, mode: Validation) -> None:
    result = verdict(head, root=spec(mode))
    assert result.status is Status.REJECTED
    assert errors(result) == ["field-type"]


@pytest.mark.parametrize("name", ["a/b", "tab\there", "   "], ids=["slash", "control", "blank"])
def test_lenient_still_needs_a_usable_name(name: str) -> None:
    result = verdict(f"name: {json.dumps(name)}\ndescription: d\n", root=spec(Validation.LENIENT))
    assert result.status is Status.REJECTED
    assert "name-invalid" in errors(result)


@pytest.mark.parametrize(("field", "limit"), [("description", 1024), ("compatibility", 500)])
def test_length_limits_reject_in_strict_mode_and_warn_in_lenient(field: str, limit: int) -> None:
    head = "name: pdf\n" + ("" if field == "description" else "description: d\n")
    assert verdict(f"{head}{field}: {'d' * limit}\n").status is Status.ACCEPTED
    over = f"{head}{field}: {'d' * (limit + 1)}\n"
    strict = verdict(over, root=spec(Validation.STRICT))
    assert errors(strict) == [f"{field}-too-long"]
    # A real host loads such a skill (one vendor's own had 1,068 characters); so does lenient.
    lenient = verdict(over, root=spec(Validation.LENIENT))
    assert lenient.status is Status.ACCEPTED
    assert warnings(lenient) == [f"{field}-too-long"]


def test_description_required_only_where_the_root_says_so() -> None:
    assert errors(verdict("name: pdf\n")) == ["description-missing"]
    optional = verdict("name: pdf\n", root=spec(require_description=False))
    assert optional.status is Status.ACCEPTED
    assert warnings(optional) == ["description-missing"]


def test_compatibility_and_field_types() -> None:
    result = verdict(f"name: pdf\ndescription: d\ncompatibility: {'c' * 501}\n")
    assert errors(result) == ["compatibility-too-long"]
    typed = verdict("name: pdf\ndescription: d\nallowed-tools: [Read, Write]\n"
                    "metadata:\n  stars: 3\n")
    assert errors(typed) == ["field-type", "field-type"]
    relaxed = verdict("name: pdf\ndescription: d\nallowed-tools: [Read]\n",
                      root=spec(Validation.LENIENT))
    assert relaxed.status is Status.ACCEPTED
    assert warnings(relaxed) == ["field-type"]


def test_unknown_fields_are_kept_with_a_warning() -> None:
    result = verdict("name: pdf\ndescription: d\nauthor: me\nversion: '1'\n")
    assert result.status is Status.ACCEPTED
    assert warnings(result) == ["unknown-field", "unknown-field"]


def test_enabled_false_is_recorded_not_an_error() -> None:
    result = verdict("name: pdf\ndescription: d\nenabled: false\n")
    assert (result.status, result.enabled) == (Status.ACCEPTED, False)
    assert errors(verdict("name: pdf\ndescription: d\nenabled: 'no'\n")) == ["field-type"]


def test_plugin_names_are_qualified_after_validation() -> None:
    result = verdict("name: pdf\ndescription: d\n", root=spec(prefix="tools:"))
    assert (result.status, result.name) == (Status.ACCEPTED, "tools:pdf")


def test_rules_key_changes_with_what_decides_a_verdict() -> None:
    assert rules_key(spec()) != rules_key(spec(Validation.LENIENT))
    assert rules_key(spec()) != rules_key(spec(require_description=False))


INVISIBLE_NAMES = {
    "zero-width-space": "pdf\u200b",
    "zero-width-joiner": "p\u200ddf",
    "bidi-override": "\u202epdf",
    "bidi-isolate": "pdf\u2066",
    "byte-order-mark": "\ufeffpdf",
    "tag-character": "pdf\U000e0041",
    "soft-hyphen": "pd\u00adf",
    "c1-control": "p\x85df",
    "line-separator": "pdf\u2028x",
    "nul": "p\x00df",
}


@pytest.mark.parametrize("mode", [Validation.STRICT, Validation.LENIENT])
@pytest.mark.parametrize("name", INVISIBLE_NAMES.values(), ids=INVISIBLE_NAMES.keys())
def test_invisible_and_control_characters_reject_a_name_in_every_mode(
        name: str, mode: Validation) -> None:
    quoted = "".join(char if " " <= char <= "~" and char not in '"\\' else f"\\U{ord(char):08x}"
                     for char in name)
    result = verdict(f'name: "{quoted}"\ndescription: d\n', root=spec(mode))
    assert result.status is Status.REJECTED
    assert "name-invalid" in errors(result)
    assert result.name is None


@pytest.mark.parametrize("dir_name", ["pdf\u200b", "pdf\udcff"], ids=["zero-width", "not-utf8"])
def test_a_name_taken_from_its_directory_obeys_the_same_rule(dir_name: str) -> None:
    result = verdict("description: d\n", dir_name=dir_name, root=spec(Validation.LENIENT))
    assert result.status is Status.REJECTED
    assert "name-invalid" in errors(result)


@pytest.mark.parametrize("name", ["café", "pdf-工具"], ids=["accent", "cjk"])
def test_visible_letters_of_any_script_are_only_a_lenient_warning(name: str) -> None:
    result = verdict(f"name: {name}\ndescription: d\n", dir_name=name,
                     root=spec(Validation.LENIENT))
    assert result.status is Status.ACCEPTED
    assert warnings(result) == ["name-invalid"]
