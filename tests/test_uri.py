"""One skill:// URI names one file: names cannot hold the URI's separators, a qualification is
never another skill's file, an ambiguous URI is served by no surface, and every URI a surface
publishes reads back, on every surface, as the bytes its digest describes."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError, types

from skillindex import SkillIndex, SkillIndexError, SkillRejectedError
from skillindex.cli import cli
from skillindex.query import oneshot
from skillindex.serve.mcp import create_server
from tests.conftest import isolate_home
from tests.test_serve_mcp import content_bytes, sha256

REFUSED = "refused"
WITHHELD = f"{REFUSED}: UriCollisionError"  # the lower side of a URI collision


@dataclass
class Root:
    path: str  # under the tree's folder
    precedence: int
    scope: str = "user"
    provider: str = "test"


@dataclass
class Tree:
    """Folders of skills, a settings file naming them as roots, and an index of them."""

    base: Path
    db: str
    roots: list[Root]
    policy: str = "precedence"
    files: dict[str, bytes] = field(default_factory=dict)  # path under base -> bytes

    def skill(self, root: str, folder: str, name: str, *, body: str = "# Body\n") -> None:
        self.files[f"{root}/{folder}/SKILL.md"] = (
            f"---\nname: {json.dumps(name)}\ndescription: d\n---\n{body}").encode()

    def file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    def write(self) -> None:
        for rel, data in self.files.items():
            path = self.base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        lines = ["[skills]", "presets = false", f'collision_policy = "{self.policy}"', ""]
        for root in self.roots:
            (self.base / root.path).mkdir(parents=True, exist_ok=True)
            lines += ["[[roots]]", f'path = "{self.base / root.path}"',
                      f'scope = "{root.scope}"', f'provider = "{root.provider}"',
                      f"precedence = {root.precedence}", 'validation = "lenient"', ""]
        self.config.write_text("\n".join(lines))

    def open(self) -> SkillIndex:
        return SkillIndex.open(str(self.config), db=self.db, cwd=self.base)

    def index(self) -> None:
        self.write()
        with self.open() as index:
            index.reindex()


def outcome(read: Callable[[], bytes]) -> bytes | str:
    try:
        return read()
    except SkillIndexError as exc:
        return f"{REFUSED}: {type(exc).__name__}"


@dataclass
class Served:
    """What the MCP server publishes: each file URI with its digest, and what skills/get and
    resources/read give for the URIs asked."""

    digests: dict[str, str]
    entries: dict[str, str]  # skills/get of each published SKILL.md URI: that entry's uri
    reads: dict[str, bytes | str]


def mcp_view(index: SkillIndex, asked: list[str]) -> Served:
    async def main() -> Served:
        async with Client(create_server(index)) as client:
            request = types.Request[dict[str, Any] | None, str](method="skills/list", params={})
            from pydantic import BaseModel, ConfigDict

            class Raw(BaseModel):
                model_config = ConfigDict(extra="allow")

            entries = (await client.session.send_request(request, Raw)).model_dump()["skills"]
            digests: dict[str, str] = {}
            for resource in (r for e in entries for r in e["resources"]):
                # One URI, one file: a URI listed twice must at least be listed alike.
                assert digests.setdefault(resource["uri"], resource["digest"]) == (
                    resource["digest"]), resource["uri"]
            got: dict[str, str] = {}
            for entry in entries:
                get = types.Request[dict[str, Any] | None, str](
                    method="skills/get", params={"uri": entry["uri"]})
                got[entry["uri"]] = (await client.session.send_request(get, Raw)
                                     ).model_dump()["skill"]["uri"]
            reads: dict[str, bytes | str] = {}
            for uri in dict.fromkeys([*digests, *asked]):
                try:
                    reads[uri] = content_bytes(await client.read_resource(uri))
                except MCPError:
                    reads[uri] = REFUSED
            return Served(digests, got, reads)
    return anyio.run(main)


def read_data(index: SkillIndex, uri: str) -> bytes:
    return index.read(uri).data


def every_surface(tree: Tree, uris: list[str]) -> tuple[Served, dict[str, dict[str, Any]]]:
    """For each URI: the library's read, the sqlite3 fast path's (None where it leaves the
    request to the library) and MCP's resources/read; with what MCP publishes."""
    seen: dict[str, dict[str, Any]] = {}
    with tree.open() as index:
        served = mcp_view(index, uris)
        for uri in dict.fromkeys([*served.digests, *uris]):
            seen[uri] = {"library": outcome(partial(read_data, index, uri)),
                         "mcp": served.reads[uri]}
    for uri, answers in seen.items():
        try:
            fast = oneshot.read(str(tree.config), db=tree.db, cwd=tree.base, index=None, uri=uri)
        except SkillIndexError as exc:
            answers["fast"] = f"{REFUSED}: {type(exc).__name__}"
        else:
            answers["fast"] = None if fast is None else fast.data
    return served, seen


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_home(tmp_path, monkeypatch)
    return tmp_path


# -- The reproductions ---------------------------------------------------------------------


def test_a_lower_root_cannot_take_a_higher_skills_file_with_a_colon_in_its_name(
        home: Path) -> None:
    tree = Tree(home, str(home / "index.sqlite"), [Root("admin", 200, "admin"),
                                                   Root("project", 70, "project")])
    tree.skill("admin", "pdf", "pdf", body="# the genuine body\n")
    tree.file("admin/pdf/forms.md", b"the genuine forms\n")
    tree.skill("project", "evil", "pdf:forms.md", body="# evil's body\n")
    tree.skill("project", "evil2", "pdf:SKILL.md", body="# evil's other body\n")
    tree.index()

    genuine = (home / "admin/pdf/SKILL.md").read_bytes()
    served, seen = every_surface(tree, ["skill://pdf/forms.md", "skill://pdf/SKILL.md"])
    for uri, data in (("skill://pdf/forms.md", b"the genuine forms\n"),
                      ("skill://pdf/SKILL.md", genuine)):
        assert seen[uri] == {"library": data, "mcp": data, "fast": data}, uri
        assert served.digests[uri] == sha256(data)
    with tree.open() as index:
        [evil] = [c for c in index.candidates() if c.directory.name == "evil"]
    assert [(f.code, str(f.severity)) for f in evil.findings] == [("name-reserved", "error")]


@pytest.mark.parametrize("name", [":a", "a:b", "a/b", "a\\b", "a%2fb", "a?b", "a#b", ".a",
                                  "..", "a\x00b"])
def test_a_name_with_a_uri_separator_is_rejected_in_lenient_mode_too(home: Path,
                                                                     name: str) -> None:
    tree = Tree(home, str(home / "index.sqlite"), [Root("r", 10)])
    tree.skill("r", "s", name)
    tree.index()
    with tree.open() as index:
        [candidate] = index.candidates()
    assert not candidate.accepted
    assert {f.code for f in candidate.findings} & {"name-reserved", "name-invalid",
                                                   "control-character"}


def test_a_qualification_is_never_another_skills_file(home: Path) -> None:
    # The admin `pdf` wins `pdf`; the user root's becomes `user:...`; in that root a skill
    # named `user` holds a plain file pdf/SKILL.md.
    tree = Tree(home, str(home / "index.sqlite"), [Root("admin", 200, "admin"),
                                                   Root("user", 100, "user")], "qualify")
    tree.skill("admin", "pdf", "pdf", body="# admin's\n")
    tree.skill("user", "pdf", "pdf", body="# user's\n")
    tree.skill("user", "user", "user", body="# the skill user\n")
    tree.file("user/user/pdf/SKILL.md", b"# a plain file of the skill user\n")
    tree.index()

    with tree.open() as index:
        names = {w.name for w in index.winners()}
    assert "user:pdf" not in names and {"admin:pdf", "test.user:pdf", "user"} <= names
    plain = b"# a plain file of the skill user\n"
    qualified = (home / "user/pdf/SKILL.md").read_bytes()
    served, seen = every_surface(tree, ["skill://user/pdf/SKILL.md",
                                        "skill://test.user/pdf/SKILL.md"])
    assert seen["skill://user/pdf/SKILL.md"] == {"library": plain, "mcp": plain, "fast": plain}
    assert seen["skill://test.user/pdf/SKILL.md"] == {"library": qualified, "mcp": qualified,
                                                      "fast": qualified}
    assert served.entries["skill://test.user/pdf/SKILL.md"] == "skill://test.user/pdf/SKILL.md"


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
def test_a_plugin_beside_a_skill_of_its_name_takes_none_of_its_uris(home: Path,
                                                                    db_url: str) -> None:
    # A plugin `kit` publishes `kit:pdf` (skill://kit/pdf/...); a user skill `kit` of higher
    # precedence holds the file pdf/SKILL.md: the URI is the user skill's file on every
    # surface, and MCP withholds the plugin's skill alone (it used to withhold both).
    tree = plugin_tree(home, db_url)
    kit_file = b"# a file of kit\n"
    with tree.open() as index:
        index.reindex()
        assert {"kit", "kit:pdf"} <= {w.name for w in index.winners()}
        assert index.read("skill://kit/pdf/SKILL.md").data == kit_file
        with pytest.raises(SkillIndexError):
            index.read("skill://kit/pdf")
        served = mcp_view(index, ["skill://kit/pdf/SKILL.md"])
        assert index.read("skill://kit/SKILL.md").data.startswith(b"---\nname: \"kit\"")
    assert served.reads["skill://kit/pdf/SKILL.md"] == kit_file
    assert served.reads["skill://kit/SKILL.md"] != REFUSED
    assert "skill://kit/SKILL.md" in served.entries
    assert not any(uri.startswith("skill://kit:") for uri in served.digests)
    fast = oneshot.read(str(tree.config), db=tree.db, cwd=tree.base, index=None,
                        uri="skill://kit/pdf/SKILL.md")
    assert fast is None or fast.data == kit_file


def test_keep_all_serves_no_uri_that_names_two_skills(home: Path) -> None:
    tree = Tree(home, str(home / "index.sqlite"), [Root("a", 200), Root("b", 100)], "keep-all")
    tree.skill("a", "pdf", "pdf", body="# a's\n")
    tree.skill("b", "pdf", "pdf", body="# b's\n")
    tree.skill("b", "other", "other")
    tree.index()
    served, seen = every_surface(tree, ["skill://pdf/SKILL.md", "skill://pdf"])
    for uri in ("skill://pdf/SKILL.md", "skill://pdf"):
        assert seen[uri]["library"] == f"{REFUSED}: AmbiguousUriError"
        assert seen[uri]["fast"] in (None, f"{REFUSED}: AmbiguousUriError")
        assert served.reads.get(uri, REFUSED) == REFUSED
    assert "skill://other/SKILL.md" in served.digests


def collided(index: SkillIndex) -> dict[str, list[str]]:
    """The `uri-collision` messages the index holds, by SKILL.md path under the tree."""
    found: dict[str, list[str]] = {}
    for candidate in index.candidates(code="uri-collision"):
        found[str(candidate.path)] = [f.message for f in candidate.findings
                                      if f.code == "uri-collision"]
    return found


def plugin_tree(home: Path, db_url: str) -> Tree:
    """A plugin `kit` with the skill `kit:pdf`, beside a user skill `kit` holding pdf/SKILL.md."""
    plugins = home / "home" / ".claude" / "plugins"
    install = plugins / "cache" / "kit"
    tree = Tree(home, db_url, [Root("user", 100)])
    tree.skill("user", "kit", "kit")
    tree.file("user/kit/pdf/SKILL.md", b"# a file of kit\n")
    tree.file(str((install / "skills" / "pdf" / "SKILL.md").relative_to(home)),
              b"---\nname: pdf\ndescription: d\n---\n# the plugin's\n")
    tree.write()
    registry = {"version": 2, "plugins": {"kit@market": [{"installPath": str(install)}]}}
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "installed_plugins.json").write_text(json.dumps(registry))
    tree.config.write_text(tree.config.read_text().replace("presets = false", "presets = true"))
    return tree


def test_the_reindex_records_a_plugin_beside_a_skill_of_its_name_on_the_lower_only(
        home: Path, db_url: str) -> None:
    tree = plugin_tree(home, db_url)
    kit = home / "user" / "kit" / "SKILL.md"
    with tree.open() as index:
        index.reindex()
        found = collided(index)
        [plugin] = list(found)
        assert plugin != str(kit)
        assert all("skill://kit/pdf/" in m and "'kit:pdf'" in m
                   and "every surface withholds 'kit:pdf'" in m for m in found[plugin])
        # A warning: both still win their names; the URIs they share are the higher one's.
        assert {"kit", "kit:pdf"} <= {w.name for w in index.winners()}
        assert not index.rejections(code="uri-collision")
        [verdict] = index.explain("kit").verdicts
        assert [f.code for f in verdict.candidate.findings] == []
        assert index.read("skill://kit/pdf/SKILL.md").data == b"# a file of kit\n"
    runner = CliRunner()
    argv = ["--config", str(tree.config), "--db", db_url, "--cwd", str(home)]
    shown = runner.invoke(cli, [*argv, "explain", "kit:pdf"])
    assert shown.exit_code == 0, shown.output
    assert "warning uri-collision: the URIs under skill://kit/pdf/" in shown.output
    listed = runner.invoke(cli, [*argv, "--json", "candidates", "--code", "uri-collision"])
    assert listed.exit_code == 0, listed.output
    assert {item["path"] for item in json.loads(listed.output)} == {plugin}
    # Once `kit` is gone, the plugin's skill meets nothing: the next reindex takes it back.
    for rel in ("pdf/SKILL.md", "SKILL.md"):
        (kit.parent / rel).unlink()
    with tree.open() as index:
        index.reindex()
        assert collided(index) == {}


def test_the_reindex_records_keep_all_winners_on_each(home: Path) -> None:
    tree = Tree(home, str(home / "index.sqlite"), [Root("a", 200), Root("b", 100)], "keep-all")
    tree.skill("a", "pdf", "pdf", body="# a's\n")
    tree.skill("b", "pdf", "pdf", body="# b's\n")
    tree.skill("b", "other", "other")
    tree.index()
    with tree.open() as index:
        found = collided(index)
        assert set(found) == {str(home / "a/pdf/SKILL.md"), str(home / "b/pdf/SKILL.md")}
        assert all("2 skills win the name 'pdf'" in m for ms in found.values() for m in ms)
        explained = index.explain("pdf")
        assert len(explained.winners) == 2
        assert all([f.code for f in v.candidate.findings] == ["uri-collision"]
                   for v in explained.verdicts)
    # Another policy gives the name one winner: its reindex, with nothing changed on disk,
    # takes the findings back.
    tree.policy = "precedence"
    tree.write()
    with tree.open() as index:
        index.reindex()
        assert collided(index) == {}
        assert index.read("skill://pdf/SKILL.md").data.endswith(b"# a's\n")
    # Under quarantine no resolution is stored; the reindex resolves to record them all the same.
    tree.policy = "keep-all"
    tree.write()
    tree.config.write_text(tree.config.read_text().replace(
        "[skills]", '[skills]\nrisk_policy = "quarantine"'))
    with tree.open() as index:
        index.reindex()
        assert set(collided(index)) == set(found)


# -- Every URI any surface publishes, on random trees --------------------------------------

SEGMENTS = ["pdf", "user", "kit", "a", "SKILL.md", "forms.md", "test.user", "admin"]
# Paths that make the URIs of the names above meet: a folder named like a skill, SKILL.md in it.
PATHS = ["pdf/SKILL.md", "forms.md", "pdf/forms.md", "kit/pdf/SKILL.md", "user/pdf/SKILL.md"]
NAMES = ["pdf", "user", "kit", "a", "admin", "test.user", "pdf:forms.md", "user:pdf",
         "kit:pdf", "pdf:SKILL.md", "a:b", "test.user:pdf"]


@st.composite
def trees(draw: st.DrawFn) -> dict[str, Any]:
    roots = draw(st.lists(st.sampled_from([("admin", 200, "admin"), ("user", 100, "user"),
                                           ("project", 70, "project"), ("other", 100, "user")]),
                          min_size=1, max_size=3, unique=True))
    skills = []
    for number in range(draw(st.integers(1, 5))):
        root = draw(st.sampled_from(roots))[0]
        name = draw(st.sampled_from(NAMES))
        extra = draw(st.lists(st.one_of(
            st.sampled_from(PATHS),
            st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)),
            max_size=3))
        skills.append((root, f"s{number}", name, extra))
    policy = draw(st.sampled_from(["precedence", "qualify", "keep-all", "reject-ambiguous"]))
    return {"roots": roots, "skills": skills, "policy": policy}


def build(base: Path, drawn: dict[str, Any]) -> Tree:
    tree = Tree(base, str(base / "index.sqlite"),
                [Root(path, precedence, scope) for path, precedence, scope in drawn["roots"]],
                drawn["policy"])
    for root, folder, name, extra in drawn["skills"]:
        tree.skill(root, folder, name, body=f"# {folder}\n")
        for rel in extra:
            # A file and a folder of one name cannot both be: the first written wins.
            path = f"{root}/{folder}/{rel}"
            if not any(p.startswith(f"{path}/") or path.startswith(f"{p}/") for p in tree.files):
                tree.file(path, f"{folder}/{rel}\n".encode())
    tree.index()
    return tree


# The two trees of the review, drawn as the strategy would draw them: a project skill named
# `pdf:forms.md` beside the admin `pdf`; under qualify, a user `pdf` beside a user skill `user`
# holding the file pdf/SKILL.md.
TAKEOVER = {"roots": [("admin", 200, "admin"), ("project", 70, "project")],
            "skills": [("admin", "s0", "pdf", ["forms.md"]),
                       ("project", "s1", "pdf:forms.md", [])], "policy": "precedence"}
QUALIFIED = {"roots": [("admin", 200, "admin"), ("user", 100, "user")],
             "skills": [("admin", "s0", "pdf", []), ("user", "s1", "pdf", []),
                        ("user", "s2", "user", ["pdf/SKILL.md"])], "policy": "qualify"}
# Under qualify, a project skill `admin` holding pdf/SKILL.md beside the admin's and the user's
# `pdf`: the admin's keeps `admin:pdf`, whose URIs are its own; the project's `admin` is withheld.
LABELLED = {"roots": [("admin", 200, "admin"), ("user", 100, "user"), ("project", 70, "project")],
            "skills": [("admin", "s0", "pdf", []), ("user", "s1", "pdf", []),
                       ("project", "s2", "admin", ["pdf/SKILL.md", "forms.md"])],
            "policy": "qualify"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(drawn=LABELLED)
@example(drawn=TAKEOVER)
@example(drawn=QUALIFIED)
@given(drawn=trees())
def test_every_published_uri_reads_back_as_its_digest_on_every_surface(
        drawn: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        with pytest.MonkeyPatch.context() as patch:
            isolate_home(base, patch)
            tree = build(base, drawn)
            # Every file of every winner, by the URI of its catalog name, and its digest.
            # A URI two winners' files share is the higher one's: the first in catalog order.
            listed: dict[str, str] = {}
            with tree.open() as index:
                for m in index.manifests(index.winners()):
                    for f in m.files:
                        listed.setdefault(f"skill://{m.name.replace(':', '/')}/{f.rel_path}",
                                          f"sha256:{f.sha256}")
            served, seen = every_surface(tree, list(listed))
    refused = (f"{REFUSED}: AmbiguousUriError", WITHHELD)
    for uri, digest in served.digests.items():
        answers = seen[uri]
        for surface in ("library", "mcp", "fast"):
            data = answers[surface]
            if surface == "fast" and data is None:
                continue  # left to the library, whose answer is checked above
            assert isinstance(data, bytes) and sha256(data) == digest, (uri, surface, answers)
    for uri, digest in listed.items():
        answers = seen[uri]
        assert answers["fast"] in (None, answers["library"]), (uri, answers)
        if answers["library"] in refused:
            assert uri not in served.digests and answers["mcp"] == REFUSED, (uri, answers)
            continue
        assert sha256(answers["library"]) == digest, (uri, answers)
        assert answers["mcp"] in (REFUSED, answers["library"]), (uri, answers)
    for uri, got in served.entries.items():
        assert got == uri


# -- A rejected skill says so --------------------------------------------------------------


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
def test_reading_a_rejected_skill_says_it_was_rejected_and_why(home: Path, db_url: str) -> None:
    tree = Tree(home, db_url, [Root("r", 10)])
    tree.file("r/bad/SKILL.md", b"---\nname: bad\n---\n# no description\n")
    tree.index()
    text = tree.config.read_text().replace('validation = "lenient"', 'validation = "strict"')
    tree.config.write_text(text)
    with tree.open() as index:
        index.reindex()
        for uri in ("skill://bad", "skill://bad/SKILL.md"):
            with pytest.raises(SkillRejectedError) as rejected:
                index.read(uri)
            assert str(rejected.value) == (
                "skill bad was rejected (description-missing); `skillindex explain bad` says why")
        with pytest.raises(SkillRejectedError):
            index.skill_command("bad")
        served = mcp_messages(index, "skill://bad/SKILL.md", "bad")
        # Every attempt is on record: two reads, the command, MCP's read and its load_skill.
        assert [e.outcome for e in index.audit()] == ["not-found"] * 5
    assert all("skill bad was rejected (description-missing)" in m for m in served)


def mcp_messages(index: SkillIndex, uri: str, name: str) -> list[str]:
    """What MCP's resources/read of `uri` and its load_skill tool of `name` answer."""
    async def main() -> list[str]:
        async with Client(create_server(index)) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            tool = await client.call_tool("load_skill", {"name": name})
            assert tool.is_error
            text = tool.content[0]
            assert isinstance(text, types.TextContent)
            return [refused.value.error.message, text.text]
    return anyio.run(main)


def test_the_cli_says_a_rejected_skill_was_rejected(home: Path) -> None:
    tree = Tree(home, str(home / "index.sqlite"), [Root("r", 10)])
    long = "x" * 501
    tree.file("r/bad/SKILL.md", f"---\nname: bad\ndescription: d\ncompatibility: {long}\n"
              "license: [1]\n---\n# x\n".encode())
    tree.write()
    tree.config.write_text(tree.config.read_text().replace('"lenient"', '"strict"'))
    with tree.open() as index:
        index.reindex()
    result = CliRunner().invoke(cli, ["--config", str(tree.config), "--db", tree.db,
                                      "read", "skill://bad"])
    assert result.exit_code == 3
    assert result.stderr == ("skillindex: error: skill bad was rejected (field-type, "
                             "compatibility-too-long); `skillindex explain bad` says why\n")


def plugin_beside(home: Path, db_url: str, precedence: int) -> Tree:
    """A plugin `pdf` with the skill `pdf:forms` (precedence 70), beside a skill `pdf` of a
    root of `precedence` holding a file forms/SKILL.md."""
    plugins = home / "home" / ".claude" / "plugins"
    install = plugins / "cache" / "pdf"
    tree = Tree(home, db_url, [Root("admin", precedence, "admin")])
    tree.skill("admin", "pdf", "pdf", body="# admin's\n")
    tree.file("admin/pdf/forms/SKILL.md", b"# a file of the admin's pdf\n")
    tree.file(str((install / "skills" / "forms" / "SKILL.md").relative_to(home)),
              b"---\nname: forms\ndescription: d\n---\n# the plugin's\n")
    tree.write()
    registry = {"version": 2, "plugins": {"pdf@market": [{"installPath": str(install)}]}}
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "installed_plugins.json").write_text(json.dumps(registry))
    tree.config.write_text(tree.config.read_text().replace("presets = false", "presets = true"))
    return tree


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("precedence", "higher", "lower"),
                         [(200, "pdf", "pdf:forms"), (10, "pdf:forms", "pdf")],
                         ids=["admin-above-plugin", "plugin-above-custom"])
def test_the_lower_side_of_a_uri_collision_is_the_one_withheld(
        home: Path, db_url: str, precedence: int, higher: str, lower: str) -> None:
    """A plugin skill `pdf:forms` beside an admin `pdf` used to withhold both from MCP."""
    tree = plugin_beside(home, db_url, precedence)
    with tree.open() as index:
        index.reindex()
        assert {"pdf", "pdf:forms"} <= {w.name for w in index.winners()}
        found = collided(index)
        served = mcp_view(index, ["skill://pdf/forms/SKILL.md"])
        shared = index.read("skill://pdf/forms/SKILL.md").data
    [path] = found
    assert f"every surface withholds {lower!r}" in found[path][0]
    assert path.endswith("forms/SKILL.md" if lower == "pdf:forms" else "admin/pdf/SKILL.md")
    published = {uri.removeprefix("skill://").rsplit("/", 1)[0] for uri in served.entries}
    assert higher.replace(":", "/") in published
    assert lower.replace(":", "/") not in published
    expected = (b"# a file of the admin's pdf\n" if higher == "pdf"
                else (home / "home" / ".claude" / "plugins" / "cache" / "pdf" / "skills"
                      / "forms" / "SKILL.md").read_bytes())
    assert shared == expected
    assert served.reads["skill://pdf/forms/SKILL.md"] == expected


# The spellings of the lower side's URIs that no reading gives to the higher skill: the
# literal-colon `skill://pdf:forms` used to serve the plugin's skill that MCP withholds.
LOWER_URIS = {"pdf:forms": ["skill://pdf:forms", "skill://pdf:forms/SKILL.md"],
              "pdf": ["skill://pdf", "skill://pdf/SKILL.md"]}


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("precedence", "higher", "lower"),
                         [(200, "pdf", "pdf:forms"), (10, "pdf:forms", "pdf")],
                         ids=["admin-above-plugin", "plugin-above-custom"])
def test_every_surface_withholds_the_lower_side_of_a_uri_collision(
        home: Path, db_url: str, precedence: int, higher: str, lower: str) -> None:
    tree = plugin_beside(home, db_url, precedence)
    with tree.open() as index:
        index.reindex()
    uris = LOWER_URIS[lower]
    _, seen = every_surface(tree, uris)
    for uri in uris:
        assert seen[uri]["library"] == WITHHELD, (uri, seen[uri])
        assert seen[uri]["mcp"] == REFUSED, (uri, seen[uri])
        # The sqlite3 fast path answers it itself; on PostgreSQL it leaves it to the library.
        fast = (WITHHELD,) if db_url.startswith("sqlite") else (None, WITHHELD)
        assert seen[uri]["fast"] in fast, (uri, seen[uri])
    argv = ["--config", str(tree.config), "--db", db_url, "--cwd", str(home), "read"]
    for uri in uris:
        result = CliRunner().invoke(cli, [*argv, uri])
        assert result.exit_code == 4, result.output
        assert result.stderr.startswith(
            f"skillindex: error: skill {lower} is withheld (uri-collision): "), result.stderr
        assert f"they are the files of {higher!r}, which takes precedence" in result.stderr
        assert result.stderr.count("\n") == 1
    with tree.open() as index:
        assert [e.outcome for e in index.audit()][-1] == "refused"


def test_the_agentskills_provider_withholds_the_lower_side_of_a_uri_collision(
        home: Path) -> None:
    pytest.importorskip("agentskills_core", reason="agentskills-core needs Python 3.12 or newer")
    from agentskills_core import ResourceNotFoundError

    from skillindex.agentskills import IndexProvider

    tree = plugin_beside(home, str(home / "index.sqlite"), 200)
    with tree.open() as index:
        index.reindex()
        provider = IndexProvider(index)
        with pytest.raises(ResourceNotFoundError, match="withheld \\(uri-collision\\)"):
            anyio.run(provider.get_body, "pdf:forms")
        assert "admin's" in anyio.run(provider.get_body, "pdf")


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
def test_names_that_look_alike_get_a_warning_on_each(home: Path, db_url: str) -> None:
    """`pdf` and `\\u0440df` (a Cyrillic er), `caf\\u00e9` composed and decomposed: each is
    another skill, and each of them is warned that it looks like the other."""
    cyrillic, composed, decomposed = "\u0440df", "caf\u00e9", "cafe\u0301"
    tree = Tree(home, db_url, [Root("a", 200), Root("b", 100)])
    tree.skill("a", "pdf", "pdf")
    tree.skill("b", "pdf2", cyrillic)
    tree.skill("a", "cafe", composed)
    tree.skill("b", "cafe2", decomposed)
    tree.skill("b", "other", "other")
    tree.index()
    with tree.open() as index:
        index.reindex()  # with the resolution stored, the reindex finds them in SQL
        warned = {c.name: [f.message for f in c.findings if f.code == "name-confusable"]
                  for c in index.candidates(code="name-confusable")}
        names = {w.name for w in index.winners()}
    assert {"pdf", cyrillic, composed, decomposed, "other"} <= names
    assert set(warned) == {"pdf", cyrillic, composed, decomposed}
    assert warned["pdf"] == [f"the name 'pdf' looks like {cyrillic!a} (one name once Unicode-"
                             "normalized, look-alike letters read as Latin): a host or a "
                             "person may load one for the other; rename one of them"]
    assert f"looks like {decomposed!a}" in warned[composed][0]
