"""Hostile trees beside good skills: every reindex finishes, the good skills are indexed, the
index verifies clean.

Short by default (SKILLINDEX_FUZZ_EXAMPLES, 25 examples); a long run, e.g.
`SKILLINDEX_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz.py`, explores much more, and
`SKILLINDEX_FUZZ_BACKEND=postgresql` runs it against the test PostgreSQL server.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import xml.dom.minidom
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment
from skillindex.model import Status, Validation
from tests.conftest import root_settings

EXAMPLES = int(os.environ.get("SKILLINDEX_FUZZ_EXAMPLES", "25"))
BACKEND = os.environ.get("SKILLINDEX_FUZZ_BACKEND", "sqlite")
GOOD = ("good-one", "good-two")

# -- what a hostile tree is made of ------------------------------------------------------------

NASTY_TEXT = ["pdf\u200b", "good-one\u200b", "\u202egood-one", "\x1b]0;title\x07", "a\nb",
              "\x85", " ", "-", "good-one", "GOOD", "a" * 200, "\udcff", "\ufeff", "\U000e0041",
              "..x", "%2e%2e", "\\", "é", "\u2028"]


def _usable(name: bytes) -> bool:
    """Any name a folder may have: bytes that are not UTF-8 included."""
    return b"/" not in name and b"\0" not in name and name not in (b".", b"..")


names = st.one_of(
    st.binary(min_size=1, max_size=40).filter(_usable),
    st.sampled_from(NASTY_TEXT).map(lambda text: text.encode("utf-8", "surrogateescape"))
    .filter(_usable),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(max_size=40), st.sampled_from([*NASTY_TEXT, "\0", "a\0b"]))
yaml_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


@st.composite
def frontmatter(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "text", "yaml", "lines", "deep", "wide"]))
    if kind == "bytes":
        return draw(st.binary(max_size=600))
    if kind == "text":
        head = draw(st.text(alphabet=st.sampled_from(
            [*"abc: -[]{}|>&*!?#'\"\n\t\\%@`,", "\0", "\x1b", "\u202e", "\x85", "é"]),
            max_size=300))
        return f"---\n{head}\n---\nbody\n".encode("utf-8", "surrogatepass")
    if kind == "yaml":
        fields = draw(st.dictionaries(st.sampled_from(
            ["name", "description", "metadata", "license", "compatibility", "allowed-tools",
             "enabled", "x-other"]), yaml_values, max_size=6))
        head = yaml.safe_dump(fields, allow_unicode=draw(st.booleans()))
        return f"---\n{head}---\nbody\n".encode("utf-8", "surrogatepass")
    if kind == "lines":
        lines = draw(st.lists(st.tuples(
            st.sampled_from(["name", "description", "metadata", "x"]),
            st.text(max_size=60)), max_size=6))
        head = "".join(f"{key}: {value}\n" for key, value in lines
                       if "\n" not in value and "\r" not in value)
        return f"---\n{head}---\n".encode("utf-8", "surrogatepass")
    if kind == "deep":
        levels = draw(st.integers(min_value=90, max_value=1_100))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("- ", "")]))
        head = ("name: deep\ndescription: d\nmetadata:\n  " + opener * levels + "x"
                + closer * levels + "\n")
        return f"---\n{head}---\n".encode()
    count = draw(st.integers(min_value=500, max_value=6_000))
    return ("---\nm: [" + ",".join(["a"] * count) + "]\n---\n").encode()


@dataclass(frozen=True)
class Entry:
    kind: str
    name: bytes
    content: bytes = b""
    target: str = ""
    depth: int = 0


entries = st.one_of(
    st.builds(Entry, st.just("skill"), names, frontmatter()),
    st.builds(Entry, st.just("skill-with-resources"), names, frontmatter()),
    st.builds(Entry, st.just("symlink"), names, target=st.sampled_from(
        ["good-one", "outside", "self", "root", "dangling", "outside/SKILL.md"])),
    st.builds(Entry, st.just("entry-symlink"), names),
    st.builds(Entry, st.just("fifo"), names),
    st.builds(Entry, st.just("fifo-entry"), names),
    st.builds(Entry, st.just("folder-chain"), names, depth=st.integers(2, 120)),
    st.builds(Entry, st.just("file"), names, frontmatter()),
)


def materialize(root: Path, outside: Path, entry: Entry) -> None:
    """Make one hostile entry under the root; names that clash with one made before are left."""
    base = os.fsencode(root)
    path = os.path.join(base, entry.name)
    if os.path.lexists(path) or entry.name in {name.encode() for name in GOOD}:
        return
    try:
        if entry.kind == "symlink":
            target = {"good-one": os.path.join(base, b"good-one"),
                      "outside": os.fsencode(outside), "self": path, "root": base,
                      "dangling": os.path.join(base, b"no-such-thing"),
                      "outside/SKILL.md": os.fsencode(outside / "SKILL.md")}[entry.target]
            os.symlink(target, path)
        elif entry.kind == "fifo":
            os.mkfifo(path)
        elif entry.kind == "file":
            Path(os.fsdecode(path)).write_bytes(entry.content)
        elif entry.kind == "folder-chain":
            deepest = os.path.join(path, *([b"d"] * entry.depth))
            os.makedirs(deepest)
            _write(os.path.join(deepest, b"SKILL.md"), b"---\nname: d\ndescription: d\n---\n")
        else:
            os.mkdir(path)
            skill_md = os.path.join(path, b"SKILL.md")
            if entry.kind == "entry-symlink":
                os.symlink(os.fsencode(outside / "SKILL.md"), skill_md)
            elif entry.kind == "fifo-entry":
                os.mkfifo(skill_md)
            else:
                _write(skill_md, entry.content)
            if entry.kind == "skill-with-resources":
                _resources(path, entry.name, outside)
    except OSError as exc:  # a name the file system refuses (too long, not valid there)
        assert exc.errno is not None


def _write(path: bytes, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _resources(skill: bytes, name: bytes, outside: Path) -> None:
    refs = os.path.join(skill, b"references")
    os.mkdir(refs)
    _write(os.path.join(refs, name), b"a resource with a hostile name\n")
    _write(os.path.join(refs, b"guide.md"), b"# Guide\n")
    os.symlink(os.fsencode(outside / "secret.txt"), os.path.join(refs, b"escape"))
    os.symlink(b"..", os.path.join(refs, b"loop"))
    os.mkfifo(os.path.join(refs, b"pipe"))
    deep = os.path.join(skill, *([b"n"] * 20))
    os.makedirs(deep)
    _write(os.path.join(deep, b"deep.txt"), b"deep\n")


# -- the property -----------------------------------------------------------------------------

NewDatabase = Callable[[Path], str]


@pytest.fixture(scope="module")
def new_database(request: pytest.FixtureRequest) -> Iterator[NewDatabase]:
    """Fresh migrated databases: SQLite copies of one migrated file, or PostgreSQL databases."""
    if BACKEND == "postgresql":
        server = request.getfixturevalue("pg_server")
        yield lambda _folder: str(server.create_database("fuzz"))
        return
    template = Path(tempfile.mkdtemp(prefix="skillindex-fuzz-template-"))
    SkillIndex.open(root_settings(), db=str(template / "index.sqlite")).close()

    def copy(folder: Path) -> str:
        shutil.copy(template / "index.sqlite", folder / "index.sqlite")
        return str(folder / "index.sqlite")

    yield copy
    shutil.rmtree(template)


def good_tree(root: Path, outside: Path) -> None:
    for name in GOOD:
        skill = root / name
        (skill / "references").mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A good skill.\n---\n"
                                        f"# {name}\n", encoding="utf-8")
        (skill / "references" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\nname: outside\ndescription: o\n---\n",
                                      encoding="utf-8")
    (outside / "secret.txt").write_text("not part of any skill\n", encoding="utf-8")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 25,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(hostile=st.lists(entries, min_size=1, max_size=6),
       validation=st.sampled_from([Validation.LENIENT, Validation.STRICT]),
       max_depth=st.integers(min_value=1, max_value=4))
def test_no_hostile_tree_stops_a_reindex(new_database: NewDatabase, hostile: list[Entry],
                                         validation: Validation, max_depth: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="skillindex-fuzz-"))
    try:
        root, outside, home = folder / "skills", folder / "outside", folder / "home"
        home.mkdir()
        root.mkdir()
        good_tree(root, outside)
        for entry in hostile:
            materialize(root, outside, entry)
        db = new_database(folder)
        config = folder / "config.toml"
        config.write_text(
            f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\nprecedence = 10\n'
            f'max_depth = {max_depth}\nvalidation = "{validation}"\n', encoding="utf-8")
        environ = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                   "XDG_DATA_HOME": str(home / ".data"), "SKILLINDEX_CONFIG": None,
                   "SKILLINDEX_DB": None}
        run = CliRunner().invoke(cli, ["--config", str(config), "--db", db, "--json",
                                       "reindex"], env=environ)
        assert run.exit_code == 0, run.output
        assert json.loads(run.stdout)["seen"] >= len(GOOD)
        env = Environment(home=home, cwd=folder, config_home=home / ".config",
                          data_home=home / ".data")
        with SkillIndex.open(config, db=db, env=env) as index:
            found = {candidate.directory.name: candidate for candidate in index.candidates()}
            for name in GOOD:
                assert found[name].status is Status.ACCEPTED, found[name].findings
                assert found[name].description == "A good skill."
            verified = index.verify()
            assert verified.ok, verified.drift
            again = index.reindex()
            assert (again.added, again.changed, again.removed) == (0, 0, 0)
            for format_ in ("xml", "markdown"):
                catalog = index.catalog(format=format_)
                assert "\0" not in catalog.text
            xml_text = index.catalog(format="xml").text
            if xml_text:
                xml.dom.minidom.parseString(xml_text)  # well-formed XML 1.0
        listed = CliRunner().invoke(cli, ["--config", str(config), "--db", db, "candidates"],
                                    env=environ)
        assert listed.exit_code == 0, listed.output
        assert "\x1b" not in listed.output
    finally:
        shutil.rmtree(folder, ignore_errors=True)
