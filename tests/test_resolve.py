"""Resolution: source filters, globs, realpath dedup, collision policies and explain reasons."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from skillindex.api import SkillIndex
from skillindex.config import RootConfig, Settings
from skillindex.errors import SkillNotFoundError
from skillindex.model import Candidate, RootSpec, Scope, Status
from skillindex.query.resolve import Outcome, Rules, explain, resolve, uri_collisions
from tests.skilltrees import World, make_world, symlink, write_skill


def explicit(world: World, *roots: tuple[str, int, Scope], **skills: object) -> Settings:
    """Presets off; one `[[roots]]` entry per (directory under tmp, precedence, scope)."""
    entries = tuple(RootConfig(path=str(world.tmp / path), precedence=precedence, scope=scope,
                               provider=f"test-{path}")
                    for path, precedence, scope in roots)
    return Settings(presets=False, roots=entries, **skills)  # type: ignore[arg-type]


def outcomes(world: World, settings: Settings, name: str) -> list[tuple[Path, str, str]]:
    with world.opened(settings) as index:
        explanation = index.explain(name)
    return [(v.candidate.path, str(v.outcome), v.reason) for v in explanation.verdicts]


def winners(world: World, settings: Settings) -> list[tuple[str, Path]]:
    with world.opened(settings) as index:
        return [(w.name, w.candidate.path) for w in index.winners()]


USER, PROJECT = Scope.USER, Scope.PROJECT


# --- the disabled-source fallback (the seed dropped the name instead) ------------------------

def test_switching_a_source_off_lets_the_next_skill_of_that_name_win(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    project = write_skill(w.repo / ".claude" / "skills", "pdf")
    user = write_skill(w.home / ".claude" / "skills", "pdf")
    assert winners(w, Settings()) == [("pdf", project)]
    off = Settings(enable_claude_project=False)
    assert winners(w, off) == [("pdf", user)]
    assert outcomes(w, off, "pdf") == [
        (project, "filtered", "source switched off (enable_claude_project = false)"),
        (user, "winner", "the only usable candidate (user claude root, precedence 80)"),
    ]


def test_every_toggle_off_leaves_custom_directories(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".agents" / "skills", "pdf")
    custom = write_skill(w.home / "mine", "pdf")
    settings = Settings(enable_codex_user=False, enable_claude_user=False,
                        enable_claude_project=False, enable_native_user=False,
                        enable_native_project=False, custom_directories=("~/mine",))
    assert winners(w, settings) == [("pdf", custom)]


# --- filters and their order -------------------------------------------------------------------

@pytest.mark.parametrize(("skills", "outcome", "reason"), [
    ({}, "winner", "the only usable candidate"),
    ({"ignored_skills": ("p*",)}, "filtered", "name matches ignored_skills pattern 'p*'"),
    ({"include_skills": ("docx",)}, "filtered", "name matches no include_skills pattern ('docx')"),
    ({"include_skills": ("docx", "pdf")}, "winner", "the only usable candidate"),
    ({"ignored_skills": ("pdf",), "include_skills": ("pdf",)}, "filtered",
     "ignored_skills pattern 'pdf'"),
    ({"enable_claude_user": False, "ignored_skills": ("pdf",)}, "filtered",
     "source switched off (enable_claude_user = false)"),
    ({"enable_claude_user": False, "include_skills": ("docx",)}, "filtered",
     "source switched off"),
    ({"enabled": False, "enable_claude_user": False}, "filtered",
     "skills are switched off ([skills] enabled = false)"),
], ids=["no-filter", "ignored", "not-included", "included", "ignore-before-include",
        "source-before-ignore", "source-before-include", "global-switch-first"])
def test_filter_order(tmp_path: Path, skills: dict[str, object], outcome: str,
                      reason: str) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".claude" / "skills", "pdf")
    [(_, got, why)] = outcomes(w, Settings(**skills), "pdf")  # type: ignore[arg-type]
    assert (got, reason in why) == (outcome, True), why


@pytest.mark.parametrize(("pattern", "matches"), [
    ("pdf", True), ("p*", True), ("*", True), ("?df", True), ("[op]df", True),
    ("[!p]df", False), ("PDF", False), ("pd", False), ("pdf-*", False), ("*f", True),
], ids=str)
def test_globs_match_the_whole_name_case_sensitively(tmp_path: Path, pattern: str,
                                                     matches: bool) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".claude" / "skills", "pdf")
    assert bool(winners(w, Settings(ignored_skills=(pattern,)))) is not matches
    assert bool(winners(w, Settings(include_skills=(pattern,)))) is matches


def test_ignoring_a_name_filters_every_candidate_of_it(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.repo / ".claude" / "skills", "pdf")
    write_skill(w.home / ".claude" / "skills", "pdf")
    docx = write_skill(w.home / ".claude" / "skills", "docx")
    settings = Settings(ignored_skills=("pdf",))
    assert winners(w, settings) == [("docx", docx)]
    assert [o for _, o, _ in outcomes(w, settings, "pdf")] == ["filtered", "filtered"]


def test_plugin_names_are_filtered_with_their_prefix(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    registry = w.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    registry.write_text('{"version": 2, "plugins": {"kit@m": [{"installPath": "%s"}]}}'
                        % (tmp_path / "kit"), encoding="utf-8")
    write_skill(tmp_path / "kit" / "skills", "pdf")
    assert [n for n, _ in winners(w, Settings(include_skills=("kit:*",)))] == ["kit:pdf"]
    assert winners(w, Settings(ignored_skills=("kit:*",))) == []


# --- enabled: false and the global switch ------------------------------------------------------

def test_enabled_false_keeps_a_skill_out_and_lets_the_next_one_win(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    off = write_skill(w.repo / ".claude" / "skills", "pdf", extra="enabled: false")
    user = write_skill(w.home / ".claude" / "skills", "pdf")
    assert winners(w, Settings()) == [("pdf", user)]
    assert outcomes(w, Settings(), "pdf")[0] == (
        off, "disabled", "its frontmatter says enabled: false")


def test_a_disabled_skill_alone_has_no_winner_but_is_explained(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".claude" / "skills", "pdf", extra="enabled: false")
    with w.opened() as index:
        assert index.winners() == []
        assert index.explain("pdf").winner is None


def test_skills_enabled_false_empties_the_catalog(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".claude" / "skills", "pdf")
    write_skill(w.repo / ".xcsh" / "skills", "docx")
    with w.opened(Settings(enabled=False)) as index:
        assert len(index.candidates()) == 2
        assert index.winners() == []
        assert [str(v.outcome) for v in index.explain("docx").verdicts] == ["filtered"]


# --- realpath dedup -----------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["precedence", "reject-ambiguous", "qualify", "keep-all"])
def test_a_symlinked_copy_is_one_skill_not_a_collision(tmp_path: Path, policy: str) -> None:
    w = make_world(tmp_path)
    real = write_skill(tmp_path / "a", "pdf")
    symlink(real.parent, tmp_path / "b" / "pdf")
    settings = explicit(w, ("a", 100, USER), ("b", 100, USER), collision_policy=policy)
    with w.opened(settings) as index:
        resolution = index.resolution()
    assert [(x.name, x.candidate.path) for x in resolution.winners] == [("pdf", real)]
    assert resolution.collisions == ()
    duplicate = resolution.verdicts[1]
    assert duplicate.outcome is Outcome.DUPLICATE
    assert f"same skill directory as {real}" in duplicate.reason


def test_dedup_runs_after_the_source_filter(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    real = write_skill(w.repo / ".claude" / "skills", "pdf")
    link = w.home / ".claude" / "skills" / "pdf"
    symlink(real.parent, link)
    # The kept copy is switched off, so the other path to the same files must stand in.
    assert winners(w, Settings(enable_claude_project=False)) == [("pdf", link / "SKILL.md")]


# --- collision policies -------------------------------------------------------------------------

def two_files(w: World) -> tuple[Path, Path]:
    return write_skill(w.tmp / "a", "pdf"), write_skill(w.tmp / "b", "pdf")


@pytest.mark.parametrize(("high", "low", "reason"), [
    (200, 100, "precedence 200 > 100"),
    (100, 100, "same precedence 100; its root {a} is registered before {b}"),
], ids=["higher-wins", "tie-goes-to-registration-order"])
def test_precedence_policy(tmp_path: Path, high: int, low: int, reason: str) -> None:
    w = make_world(tmp_path)
    first, second = two_files(w)
    settings = explicit(w, ("a", high, USER), ("b", low, USER))
    with w.opened(settings) as index:
        resolution = index.resolution()
        explained = index.explain("pdf")
    assert [(x.name, x.candidate.path) for x in resolution.winners] == [("pdf", first)]
    [collision] = resolution.collisions
    assert (collision.paths, collision.kept) == ((first, second), (first,))
    assert str(first) in collision.message and str(second) in collision.message
    reason = reason.format(a=w.tmp / "a", b=w.tmp / "b")
    assert [(str(v.outcome), v.reason) for v in explained.verdicts][1] == (
        "shadowed", f"shadowed by {first} ({reason})")
    assert explained.winners[0].collision == collision


def test_reject_ambiguous_refuses_a_tie_at_the_top(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    first, second = two_files(w)
    lower = write_skill(w.tmp / "c", "pdf")
    docx = write_skill(w.tmp / "c", "docx")
    settings = explicit(w, ("a", 100, USER), ("b", 100, USER), ("c", 50, USER),
                        collision_policy="reject-ambiguous")
    with w.opened(settings) as index:
        resolution = index.resolution()
        explained = index.explain("pdf")
    assert [(x.name, x.candidate.path) for x in resolution.winners] == [("docx", docx)]
    assert explained.winner is None
    assert [(v.candidate.path, str(v.outcome)) for v in explained.verdicts] == [
        (first, "rejected"), (second, "rejected"), (lower, "shadowed")]
    assert explained.verdicts[0].reason.startswith(f"ambiguous: {second} declares the same")
    assert explained.collision is not None and explained.collision.kept == ()
    assert "kept none of them" in explained.collision.message


def test_reject_ambiguous_keeps_a_clear_winner(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    first, _ = two_files(w)
    write_skill(w.tmp / "c", "pdf")
    settings = explicit(w, ("a", 200, USER), ("b", 100, USER), ("c", 100, USER),
                        collision_policy="reject-ambiguous")
    assert winners(w, settings) == [("pdf", first)]


def test_reject_ambiguous_respects_the_order_inside_a_preset(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    project = write_skill(w.repo / ".claude" / "skills", "pdf")
    write_skill(w.home / ".claude" / "skills", "pdf")
    write_skill(w.home / ".agents" / "skills", "docx")
    write_skill(w.home / ".codex" / "skills", "docx")
    settings = Settings(collision_policy="reject-ambiguous")
    # Project before user is declared; agents against codex at 70 is only registration order.
    assert winners(w, settings) == [("pdf", project)]
    assert [outcome for _, outcome, _ in outcomes(w, settings, "docx")] == [
        "rejected", "rejected"]


def test_keep_all_keeps_every_file_under_its_name(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    first, second = two_files(w)
    settings = explicit(w, ("a", 200, USER), ("b", 100, USER), collision_policy="keep-all")
    with w.opened(settings) as index:
        resolution = index.resolution()
    assert [(x.name, x.candidate.path) for x in resolution.winners] == [
        ("pdf", first), ("pdf", second)]
    [collision] = resolution.collisions
    assert collision.kept == (first, second)


@pytest.mark.parametrize(("roots", "names"), [
    ([("a", 200, PROJECT), ("b", 100, USER)], ["project:pdf", "user:pdf"]),
    ([("a", 200, USER), ("b", 100, USER)], ["test-a.user:pdf", "test-b.user:pdf"]),
    ([("a", 200, USER), ("b", 150, USER), ("c", 100, PROJECT)],
     ["test-a.user:pdf", "test-b.user:pdf", "project:pdf"]),
], ids=["by-scope", "by-provider-and-scope", "mixed"])
def test_qualify_names_every_colliding_file_by_its_source(
        tmp_path: Path, roots: list[tuple[str, int, Scope]], names: list[str]) -> None:
    w = make_world(tmp_path)
    for path, _, _ in roots:
        write_skill(w.tmp / path, "pdf")
    alone = write_skill(w.tmp / "a", "docx")
    settings = explicit(w, *roots, collision_policy="qualify")
    with w.opened(settings) as index:
        got = [(x.name, x.candidate.path) for x in index.winners()]
        by_qualified = index.explain(names[-1])
    assert [name for name, _ in got if name != "docx"] == names
    assert ("docx", alone) in got
    assert by_qualified.name == "pdf" and len(by_qualified.winners) == len(names)


def test_qualify_counts_roots_of_one_provider_and_scope_nearest_first(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    near = write_skill(w.cwd / ".agents" / "skills", "pdf")
    far = write_skill(w.repo / ".agents" / "skills", "pdf")
    with w.opened(Settings(collision_policy="qualify")) as index:
        got = [(x.name, x.candidate.path) for x in index.winners()]
    assert got == [("agents.project.1:pdf", near), ("agents.project.2:pdf", far)]


def candidate(root: str, name: str, scope: Scope, precedence: int, position: int) -> Candidate:
    directory = Path(root) / name.rsplit(":", 1)[-1]
    return Candidate(name=name, description="d", path=directory / "SKILL.md",
                     directory=directory, real_path=directory, root=Path(root), scope=scope,
                     provider=root.strip("/"), precedence=precedence, position=position,
                     status=Status.ACCEPTED, enabled=True)


def test_a_qualified_name_never_takes_a_name_that_is_declared() -> None:
    # A plugin called "user" declares `user:pdf`; the user-scope `pdf` must not become that too.
    found = [candidate("/plug", "user:pdf", Scope.PLUGIN, 90, 0),
             candidate("/a", "pdf", Scope.USER, 80, 1),
             candidate("/b", "pdf", Scope.PROJECT, 70, 2)]
    roots = [RootSpec(path=c.root, scope=c.scope, provider=c.provider,
                      precedence=c.precedence, position=c.position) for c in found]
    rules = Rules(enabled=True, ignored=(), included=(), policy="qualify")
    names = [w.name for w in resolve(found, roots, rules).winners]
    assert names == ["user:pdf", "a.user:pdf", "project:pdf"]


@pytest.mark.parametrize("label", ["admin", "user"])
def test_a_lower_skill_named_like_a_scope_does_not_push_a_higher_qualification(
        label: str) -> None:
    # A project skill named `admin` (or `user`) used to make the admin's `pdf` give up
    # `admin:pdf` for `custom.admin:pdf`: the lower side is the one that loses, and the skill
    # named like the scope is left to `uri_collisions`.
    found = [candidate("/custom", "pdf", Scope.ADMIN, 200, 0),
             candidate("/home", "pdf", Scope.USER, 100, 1),
             candidate("/project", label, Scope.PROJECT, 70, 2)]
    roots = [RootSpec(path=c.root, scope=c.scope, provider=c.provider,
                      precedence=c.precedence, position=c.position) for c in found]
    rules = Rules(enabled=True, ignored=(), included=(), policy="qualify")
    winners = resolve(found, roots, rules).winners
    assert [w.name for w in winners] == ["admin:pdf", "user:pdf", label]
    collided = uri_collisions((w.name, index) for index, w in enumerate(winners))
    assert list(collided) == [2]
    assert f"they are the files of '{label}:pdf', which takes precedence" in collided[2][0]


def test_a_tie_inside_one_root_is_decided_by_path_order() -> None:
    # Lenient roots accept a name that differs from its directory: two folders, one name.
    first = candidate("/skills", "pdf", Scope.USER, 80, 0)
    second = replace(first, path=Path("/skills/pdf-v2/SKILL.md"),
                     directory=Path("/skills/pdf-v2"), real_path=Path("/skills/pdf-v2"))
    roots = [RootSpec(path=Path("/skills"), scope=Scope.USER, provider="skills", precedence=80,
                      position=0)]
    rules = Rules(enabled=True, ignored=(), included=(), policy="precedence")
    explained = explain(resolve([first, second], roots, rules), "pdf")
    assert explained is not None
    winner, loser = explained.verdicts
    assert winner.candidate.path == second.path  # "pdf-v2/" sorts before "pdf/": '-' < '/'
    assert "same root, where the first in path order wins" in winner.reason
    assert "registered" not in winner.reason + loser.reason
    assert loser.reason == ("shadowed by /skills/pdf-v2/SKILL.md (same root /skills; of files in "
                            "one root the first in path order wins (pdf-v2/SKILL.md before "
                            "pdf/SKILL.md))")


# --- the plan, not the stored root, decides precedence -------------------------------------------

def test_changed_precedence_applies_without_a_reindex(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    _, second = two_files(w)
    with w.opened(explicit(w, ("a", 200, USER), ("b", 100, USER))):
        pass
    with SkillIndex.open(explicit(w, ("a", 100, USER), ("b", 200, USER)), db=w.db,
                         env=w.env) as index:
        assert [x.candidate.path for x in index.winners()] == [second]


# --- explain --------------------------------------------------------------------------------------

def test_explain_finds_a_rejected_skill_by_its_directory_name(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    broken = w.home / ".xcsh" / "agent" / "skills" / "pdf"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no frontmatter here\n", encoding="utf-8")
    [(path, outcome, reason)] = outcomes(w, Settings(), "pdf")
    assert (path, outcome) == (broken / "SKILL.md", "rejected")
    assert reason.startswith("invalid: frontmatter-missing")


def test_explain_gives_the_validation_errors_of_a_rejected_skill(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".xcsh" / "agent" / "skills", "pdf", description=None)
    user = write_skill(w.home / ".claude" / "skills", "pdf")
    assert outcomes(w, Settings(), "pdf") == [
        (w.home / ".xcsh" / "agent" / "skills" / "pdf" / "SKILL.md", "rejected",
         "invalid: description-missing: description is missing or empty"),
        (user, "winner", "the only usable candidate (user claude root, precedence 80)"),
    ]


def test_explain_of_an_unknown_name_is_not_found(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.home / ".claude" / "skills", "pdf")
    with w.opened() as index, pytest.raises(SkillNotFoundError):
        index.explain("docx")


def test_explain_on_no_resolution_returns_none() -> None:
    rules = Rules(enabled=True, ignored=(), included=(), policy="precedence")
    assert explain(resolve([], [], rules), "pdf") is None


@pytest.mark.parametrize("policy", ["precedence", "reject-ambiguous", "qualify", "keep-all"])
def test_winner_of_one_name_agrees_with_the_full_resolution(tmp_path: Path, policy: str) -> None:
    # `winner(name)` resolves only the candidates that bear on the name; it must pick the same
    # file the whole resolution (and so the catalog) shows under that name.
    w = make_world(tmp_path)
    for root in ("a", "b"):
        write_skill(w.tmp / root, "pdf")
        write_skill(w.tmp / root, f"only-{root}")
    write_skill(w.tmp / "c", "pdf", extra="enabled: false")
    settings = explicit(w, ("a", 200, PROJECT), ("b", 100, USER), ("c", 300, USER),
                        collision_policy=policy)
    with w.opened(settings) as index:
        full: dict[str, Path] = {}
        for x in index.winners():
            full.setdefault(x.name, x.candidate.path)  # keep-all: a name's first file wins reads
        assert full
        for name, path in full.items():
            assert index.winner(name).candidate.path == path
        with pytest.raises(SkillNotFoundError):
            index.winner("nowhere")


def test_reads_follow_the_policy(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.tmp / "a", "pdf", body="# from a\n")
    write_skill(w.tmp / "b", "pdf", body="# from b\n")
    settings = explicit(w, ("a", 100, USER), ("b", 200, USER))
    with w.opened(settings) as index:
        assert index.read("skill://pdf", reason="test").text == "# from b\n"
    ignored = explicit(w, ("a", 100, USER), ("b", 200, USER), ignored_skills=("pdf",))
    with w.opened(ignored) as index, pytest.raises(SkillNotFoundError):
        index.read("skill://pdf", reason="test")
