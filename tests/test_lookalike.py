"""Names that look alike: one skeleton for every normalization form and look-alike letter."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from skillindex.query.lookalike import confusable_names, skeleton

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
                max_size=12)


@settings(max_examples=300, deadline=None)
@given(name=NAMES)
def test_every_normalization_form_of_a_name_has_one_skeleton(name: str) -> None:
    forms = {unicodedata.normalize(form, name) for form in ("NFC", "NFD", "NFKC", "NFKD")}
    assert len({skeleton(form) for form in forms}) == 1


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAMES, min_size=1, max_size=6, unique=True))
def test_a_warning_is_on_each_side_or_on_neither(names: list[str]) -> None:
    found = confusable_names((name, number) for number, name in enumerate(names))
    for number, name in enumerate(names):
        alike = [other for other in names if other != name and skeleton(other) == skeleton(name)]
        assert (number in found) == bool(alike)


def test_look_alike_letters_of_other_scripts_read_as_latin() -> None:
    assert skeleton("\u0440df") == skeleton("pdf") == "pdf"  # Cyrillic er
    assert skeleton("d\u03bfcx") == "docx"  # Greek omicron
    assert skeleton("\uff50\uff44\uff46") == "pdf"  # fullwidth
    assert skeleton("caf\u00e9") == skeleton("cafe\u0301") != "cafe"
