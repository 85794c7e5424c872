"""A catalog built from the stored winners reads the descriptions of only as many as its budget
can show, and is the same catalog as one built from all of them: text, entries, omissions."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.config import CatalogModes, Environment
from skillindex.errors import SkillIndexError
from skillindex.model import Validation
from skillindex.query import publish, quick
from skillindex.query.catalog import FORMATS, SEARCH_COMMAND, Catalog
from skillindex.store import resolved
from tests.conftest import root_settings
from tests.skilltrees import write_skill

# Names of very different lengths: past an entry that does not fit, a shorter one may.
NAMES = ("alpha", "beta", "gamma", "b2", "x",
         "a-long-skill-name-that-takes-room-" + "and-more-" * 4 + "end")
WORDS = ("forms", "charts", "audio", "mail")
EXTRAS = ("", "", "", "disable-model-invocation: true", "paths: 'src/**/*.py'",
          "globs: ['*.md']", "alwaysApply: true", "when_to_use: When forms & charts <matter>.")


@st.composite
def skills(draw: st.DrawFn) -> list[tuple[int, str, str, str]]:
    """(root, name, description, extra frontmatter) of up to 40 skills; names repeat across
    and within roots, so some lose, and many are numbered so that most are distinct."""
    found = []
    for number in range(draw(st.integers(0, 60))):
        base = draw(st.sampled_from(NAMES))
        name = base if draw(st.booleans()) else f"{base}-{number}"
        words = draw(st.lists(st.sampled_from(WORDS), max_size=3))
        description = draw(st.sampled_from((
            "", "Short.", "Does a thing with " + " and ".join(words) + ".",
            "A longer description & <angle> text: " + "word " * draw(st.integers(1, 60)))))
        found.append((draw(st.integers(0, 1)), name, description, draw(st.sampled_from(EXTRAS))))
    return found


GLOBS = st.lists(st.sampled_from(("a*", "b?", "*-1*", "gamma*", "x")), max_size=2).map(tuple)
REQUESTS = st.fixed_dictionaries({
    "max_chars": st.one_of(st.integers(0, 400), st.integers(400, 3_000), st.just(50_000)),
    "format": st.sampled_from(FORMATS),
    "has_read": st.booleans(),
    "query": st.one_of(st.none(), st.sampled_from(WORDS)),
    "files": st.one_of(st.none(), st.sampled_from((("src/a.py",), ("notes.md",), ("z.txt",)))),
    "hint": st.booleans(),
})
# The catalog's settings: modes, order, search hint, dialects, per-skill cap.
SETTINGS = st.tuples(
    st.builds(CatalogModes, pinned=GLOBS, names_only=GLOBS, manual_only=GLOBS),
    st.sampled_from(("precedence", "usage")), st.booleans(), st.booleans(),
    st.sampled_from((16, 40, 1536)))


def _tree(top: Path, found: list[tuple[int, str, str, str]]) -> tuple[Path, Path]:
    roots = top / "user", top / "project"
    for root in roots:
        root.mkdir()
    for number, (which, name, description, extra) in enumerate(found):
        write_skill(roots[which], f"s{number:02d}-{name}", name=name,
                    description=repr(description) if description else None, extra=extra)
    return roots


def _every_way(index: SkillIndex, asked: dict[str, object]) -> list[Catalog]:
    """The catalog built with every winner's description read, then a page at a time."""
    request = quick.request(max_chars=int(str(asked["max_chars"])), context_window=None,
                            format=str(asked["format"]),
                            tools=("read",) if asked["has_read"] else (),
                            query=asked["query"] if isinstance(asked["query"], str) else None,
                            search_hint=SEARCH_COMMAND if asked["hint"] else None)
    request = replace(request, files=asked["files"] if isinstance(asked["files"], tuple)
                      else None)
    store, here = index._store, index._here
    since = (quick.usage_since(here.settings.catalog_usage_days, datetime.now(UTC))
             if request.words is None and here.settings.catalog_order == "usage" else None)
    return [publish._built(store, here, request, since, page=page) for page in (None, 1, 2, 5)]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(found=skills(), chosen=SETTINGS, asked=st.lists(REQUESTS, min_size=1, max_size=4),
       loads=st.lists(st.sampled_from(NAMES), max_size=4))
def test_a_catalog_read_a_page_at_a_time_is_the_catalog_read_whole(
        found: list[tuple[int, str, str, str]],
        chosen: tuple[CatalogModes, str, bool, bool, int],
        asked: list[dict[str, object]], loads: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        user, project = _tree(top, found)
        (top / "home").mkdir()
        env = Environment(home=top / "home", cwd=top, config_home=top / "home" / ".config",
                          data_home=top / "home" / ".local" / "share")
        base = root_settings(user, project, require_description=False,
                             validation=Validation.LENIENT)
        modes, order, hint, dialects, cap = chosen
        chosen_settings = replace(base, catalog=modes, catalog_order=order,
                                  catalog_search_hint=hint, dialects=dialects,
                                  catalog_entry_chars=cap)
        with SkillIndex.open(chosen_settings, db=str(top / "i.sqlite"), env=env) as index:
            index.reindex()
            for name in loads:  # the usage order counts successful loads
                if any(name == skill[1] for skill in found):
                    with suppress(SkillIndexError):  # a refused load counts for nothing
                        index.read(f"skill://{name}", reason="test")
            for request in asked:
                whole, *paged = _every_way(index, request)
                for catalog in paged:
                    assert catalog.to_cache() == whole.to_cache()
                    assert catalog.as_dict() == whole.as_dict()


def test_a_cache_miss_reads_the_descriptions_of_one_page(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """300 skills, a budget for a few: the descriptions of one page are read, not 300."""
    root = tmp_path / "skills"
    for number in range(300):
        write_skill(root, f"skill-{number:03d}", description=f"Does thing {number}.")
    (tmp_path / "home").mkdir()
    env = Environment(home=tmp_path / "home", cwd=tmp_path, config_home=tmp_path / "c",
                      data_home=tmp_path / "d")
    with SkillIndex.open(root_settings(root), db=str(tmp_path / "i.sqlite"), env=env) as index:
        index.reindex()
        read: list[int] = []
        descriptions = resolved.descriptions

        def counted(db: Session, ids: Sequence[int]) -> dict[int, str]:
            read.extend(ids)
            return descriptions(db, ids)

        monkeypatch.setattr(resolved, "descriptions", counted)
        catalog = index.catalog(max_chars=2_000)
        assert 0 < len(catalog.entries) < 60 and len(catalog.omitted) > 200
        assert len(read) == publish.FIRST_PAGE
        assert catalog.to_cache() == publish._built(
            index._store, index._here, quick.request(
                max_chars=2_000, context_window=None, format="xml", tools=("read",),
                query=None), None, page=None).to_cache()
