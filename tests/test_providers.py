"""The seed's provider presets: roots, priorities, toggles, plugins and their settings."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from skillindex.config import ALIASES, Environment, Settings, parse_settings
from skillindex.errors import ConfigError
from skillindex.model import RootSpec, Scope, Severity, Validation
from skillindex.providers import plan_roots, project_dirs
from tests.skilltrees import World, make_world, write_skill

PROJECT, USER, PLUGIN = Scope.PROJECT, Scope.USER, Scope.PLUGIN


def roots_of(provider: str, settings: Settings, env: Environment) -> list[RootSpec]:
    return [spec for spec in plan_roots(settings, env).roots if spec.provider == provider]


def where(specs: list[RootSpec]) -> list[tuple[Path, Scope]]:
    return [(spec.path, spec.scope) for spec in specs]


def winner_names(world: World, settings: Settings | None = None) -> dict[str, Path]:
    with world.opened(settings) as index:
        return {w.name: w.candidate.path for w in index.winners()}


# --- one test per row of the DESIGN provider table -------------------------------------------

def test_native_row_walks_project_dirs_nearest_first_then_the_user_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    native = roots_of("native", Settings(), w.env)
    assert where(native) == [
        (w.cwd / ".xcsh" / "skills", PROJECT),
        (w.repo / "src" / ".xcsh" / "skills", PROJECT),
        (w.repo / ".xcsh" / "skills", PROJECT),
        (w.home / ".xcsh" / "agent" / "skills", USER),
    ]
    assert {(s.precedence, s.require_description, s.validation) for s in native} == {
        (100, True, Validation.LENIENT)}


def test_native_nearest_project_dir_wins_over_the_repository_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_skill(w.repo / ".xcsh" / "skills", "pdf")
    nearest = write_skill(w.cwd / ".xcsh" / "skills", "pdf")
    write_skill(w.home / ".xcsh" / "agent" / "skills", "pdf")
    assert winner_names(w) == {"pdf": nearest}


def test_native_dir_is_configurable(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    native = roots_of("native", Settings(native_dir=".omp"), w.env)
    assert native[0].path == w.cwd / ".omp" / "skills"
    assert native[-1].path == w.home / ".omp" / "agent" / "skills"


def test_claude_row_walks_project_dirs_then_the_user_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    claude = roots_of("claude", Settings(), w.env)
    assert where(claude) == [
        (w.cwd / ".claude" / "skills", PROJECT),
        (w.repo / "src" / ".claude" / "skills", PROJECT),
        (w.repo / ".claude" / "skills", PROJECT),
        (w.home / ".claude" / "skills", USER),
    ]
    assert {(s.precedence, s.require_description, s.validation) for s in claude} == {
        (80, False, Validation.LENIENT)}


def write_plugins(home: Path, document: object) -> Path:
    registry = home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(document), encoding="utf-8")
    return registry


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_claude_plugins_row_names_skills_plugin_colon_name(tmp_path: Path, layout: str) -> None:
    w = make_world(tmp_path)
    install = tmp_path / "cache" / "acme" / "docs-kit" / "1.0.0"
    entry = {"installPath": str(install), "version": "1.0.0", "scope": "user"}
    write_plugins(w.home, {"version": 1 if layout == "v1" else 2,
                           "plugins": {"docs-kit@acme": entry if layout == "v1" else [entry]}})
    skill = write_skill(install / "skills", "pdf", description=None)
    plugins = roots_of("claude-plugins", Settings(), w.env)
    assert [(s.path, s.scope, s.precedence, s.name_prefix) for s in plugins] == [
        (install / "skills", PLUGIN, 70, "docs-kit:")]
    # No description is needed outside native and custom roots.
    assert winner_names(w) == {"docs-kit:pdf": skill}


def test_claude_plugins_take_the_name_before_the_last_at_and_home_relative_paths(
        tmp_path: Path) -> None:
    w = make_world(tmp_path)
    write_plugins(w.home, {"version": 2, "plugins": {
        "team@tools@acme": [{"installPath": "~/plugins/team"}],
        "broken@acme": [{"version": "1"}],
    }})
    plan = plan_roots(Settings(), w.env)
    plugins = [s for s in plan.roots if s.provider == "claude-plugins"]
    assert [(s.path, s.name_prefix) for s in plugins] == [
        (w.home / "plugins" / "team" / "skills", "team@tools:")]
    assert [p.code for p in plan.problems] == ["plugins-unreadable"]
    assert "broken@acme" in plan.problems[0].message


@pytest.mark.parametrize("content", ["{not json", "[]", '{"version": 2}'],
                         ids=["invalid-json", "not-an-object", "no-plugins-table"])
def test_an_unreadable_plugin_registry_is_a_problem_not_an_error(tmp_path: Path,
                                                                 content: str) -> None:
    w = make_world(tmp_path)
    registry = w.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(content, encoding="utf-8")
    plan = plan_roots(Settings(), w.env)
    assert [p.path for p in plan.problems] == [registry]
    assert not [s for s in plan.roots if s.provider == "claude-plugins"]


def test_agents_row_has_two_directory_spellings_per_level(tmp_path: Path) -> None:
    w = make_world(tmp_path, subdir="app")
    agents = roots_of("agents", Settings(), w.env)
    assert where(agents) == [
        (w.cwd / ".agents" / "skills", PROJECT),
        (w.cwd / ".agent" / "skills", PROJECT),
        (w.repo / ".agents" / "skills", PROJECT),
        (w.repo / ".agent" / "skills", PROJECT),
        (w.home / ".agents" / "skills", USER),
        (w.home / ".agent" / "skills", USER),
    ]
    assert {(s.precedence, s.require_description) for s in agents} == {(70, False)}


def test_codex_row_reads_cwd_only_and_the_user_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    codex = roots_of("codex", Settings(), w.env)
    assert where(codex) == [(w.cwd / ".codex" / "skills", PROJECT),
                            (w.home / ".codex" / "skills", USER)]
    assert {(s.precedence, s.require_description, s.max_depth) for s in codex} == {(70, False, 3)}


def test_codex_user_root_follows_codex_home(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    env = replace(w.env, codex_home=tmp_path / "codex-home")
    grouped = write_skill(tmp_path / "codex-home" / "skills" / "team", "lint")
    assert roots_of("codex", Settings(), env)[-1].path == tmp_path / "codex-home" / "skills"
    with w.opened(env=env) as index:
        assert [x.candidate.path for x in index.winners()] == [grouped]


def test_custom_row_comes_after_every_provider_and_is_not_recursive(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    settings = Settings(custom_directories=("~/my-skills",))
    plan = plan_roots(settings, w.env)
    custom = plan.roots[-1]
    assert (custom.path, custom.provider, custom.precedence, custom.require_description) == (
        w.home / "my-skills", "custom", 0, True)
    assert custom.position == max(spec.position for spec in plan.roots)
    top = write_skill(w.home / "my-skills", "pdf")
    write_skill(w.home / "my-skills" / "group", "nested")
    assert winner_names(w, settings) == {"pdf": top}


# --- precedence and registration order ------------------------------------------------------

def test_presets_register_in_the_seed_order(tmp_path: Path) -> None:
    w = make_world(tmp_path, subdir="")
    write_plugins(w.home, {"version": 2, "plugins": {"kit@m": [{"installPath": "/opt/kit"}]}})
    plan = plan_roots(Settings(custom_directories=("/srv/skills",)), w.env)
    assert [spec.position for spec in plan.roots] == list(range(len(plan.roots)))
    assert [(s.provider, s.scope, s.precedence) for s in plan.roots] == [
        ("native", PROJECT, 100), ("native", USER, 100),
        ("claude", PROJECT, 80), ("claude", USER, 80),
        ("claude-plugins", PLUGIN, 70),
        ("agents", PROJECT, 70), ("agents", PROJECT, 70), ("agents", USER, 70),
        ("agents", USER, 70),
        ("codex", PROJECT, 70), ("codex", USER, 70),
        ("custom", USER, 0),
    ]


@pytest.mark.parametrize(("first", "second"), [
    (".claude/skills", "~/.claude/skills"),
    ("~/.agents/skills", "~/.codex/skills"),
    ("~/.claude/skills", "~/.agents/skills"),
], ids=["project-outranks-user", "tie-goes-to-registration-order", "higher-priority-wins"])
def test_the_earlier_or_higher_root_wins(tmp_path: Path, first: str, second: str) -> None:
    w = make_world(tmp_path, subdir="")

    def place(spec: str) -> Path:
        return w.home / spec[2:] if spec.startswith("~/") else w.cwd / spec

    expected = write_skill(place(first), "pdf")
    write_skill(place(second), "pdf")
    assert winner_names(w) == {"pdf": expected}


# --- the ancestor walk ------------------------------------------------------------------------

@pytest.mark.parametrize(("git", "cwd", "expected"), [
    ("home/repo/.git", "home/repo/a/b", ["home/repo/a/b", "home/repo/a", "home/repo"]),
    ("home/repo/.git", "home/repo", ["home/repo"]),
    (None, "home/work/a", ["home/work/a", "home/work", "home"]),
    (None, "elsewhere/a", ["elsewhere/a"]),
    ("elsewhere/.git", "elsewhere/a", ["elsewhere/a", "elsewhere"]),
    ("home/.git", "home/repo/a", ["home/repo/a", "home/repo", "home"]),
], ids=["stops-at-repo-root", "cwd-is-repo-root", "no-repo-stops-at-home",
        "outside-home-without-repo-is-cwd-alone", "repo-outside-home", "home-is-the-repo"])
def test_project_dirs(tmp_path: Path, git: str | None, cwd: str, expected: list[str]) -> None:
    if git is not None:
        (tmp_path / git).mkdir(parents=True)
    (tmp_path / cwd).mkdir(parents=True, exist_ok=True)
    env = Environment(home=tmp_path / "home", cwd=tmp_path / cwd, config_home=tmp_path,
                      data_home=tmp_path)
    assert project_dirs(env) == [tmp_path / path for path in expected]


def test_a_git_file_marks_a_worktree_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    worktree = w.cwd / "wt"
    (worktree / "pkg").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: ../.git/worktrees/wt\n", encoding="utf-8")
    env = replace(w.env, cwd=worktree / "pkg")
    assert project_dirs(env) == [worktree / "pkg", worktree]


def test_a_root_that_is_both_project_and_user_belongs_to_the_user(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    env = replace(w.env, cwd=w.home)
    specs = {spec.path: spec for spec in plan_roots(Settings(), env).roots}
    for path in (".claude/skills", ".agents/skills", ".agent/skills", ".codex/skills"):
        assert specs[w.home / path].scope is USER, path
    assert specs[w.home / ".xcsh" / "skills"].scope is PROJECT
    off = plan_roots(Settings(enable_claude_user=False), env).roots
    assert [s.disabled_by for s in off if s.path == w.home / ".claude" / "skills"] == [
        "enable_claude_user = false"]


# --- toggles --------------------------------------------------------------------------------

TOGGLED = {
    "enable_native_project": ("native", PROJECT),
    "enable_native_user": ("native", USER),
    "enable_claude_project": ("claude", PROJECT),
    "enable_claude_user": ("claude", USER),
    "enable_codex_user": ("codex", USER),
}


@pytest.mark.parametrize("toggle", sorted(TOGGLED))
def test_each_toggle_switches_off_exactly_its_source(tmp_path: Path, toggle: str) -> None:
    w = make_world(tmp_path)
    write_plugins(w.home, {"version": 2, "plugins": {"kit@m": [{"installPath": "/opt/kit"}]}})
    plan = plan_roots(Settings(**{toggle: False}), w.env)  # type: ignore[arg-type]
    off = {(s.provider, s.scope) for s in plan.roots if s.disabled_by is not None}
    assert off == {TOGGLED[toggle]}
    assert {s.disabled_by for s in plan.roots} == {None, f"{toggle} = false"}


@pytest.mark.parametrize("kept_on", [None, *sorted(TOGGLED)])
def test_sources_without_a_toggle_follow_any_toggle_on(tmp_path: Path,
                                                       kept_on: str | None) -> None:
    w = make_world(tmp_path)
    write_plugins(w.home, {"version": 2, "plugins": {"kit@m": [{"installPath": "/opt/kit"}]}})
    toggles = {name: name == kept_on for name in TOGGLED}
    settings = Settings(custom_directories=("/srv/skills",), **toggles)  # type: ignore[arg-type]
    plan = plan_roots(settings, w.env)
    untoggled = [s for s in plan.roots if s.provider in ("agents", "claude-plugins")
                 or (s.provider == "codex" and s.scope is PROJECT)]
    assert len(untoggled) == 10  # 3 project dirs x 2 + 2 user + 1 plugin + codex project
    expected = None if kept_on else "every enable_* toggle is false"
    assert {s.disabled_by for s in untoggled} == {expected}
    assert [s.disabled_by for s in plan.roots if s.provider == "custom"] == [None]


# --- description requirement ------------------------------------------------------------------

@pytest.mark.parametrize(("root", "needs_description"), [
    (".xcsh/skills", True),
    ("~/.xcsh/agent/skills", True),
    (".claude/skills", False),
    ("~/.claude/skills", False),
    (".agents/skills", False),
    ("~/.agent/skills", False),
    (".codex/skills", False),
    ("~/.codex/skills", False),
    ("~/custom", True),
], ids=str)
def test_description_is_required_for_native_and_custom_roots_only(
        tmp_path: Path, root: str, needs_description: bool) -> None:
    w = make_world(tmp_path, subdir="")
    base = w.home / root[2:] if root.startswith("~/") else w.cwd / root
    write_skill(base, "pdf", description=None)
    with w.opened(Settings(custom_directories=("~/custom",))) as index:
        [candidate] = index.candidates()
    assert candidate.accepted is not needs_description
    [finding] = [f for f in candidate.findings if f.code == "description-missing"]
    assert finding.severity is (Severity.ERROR if needs_description else Severity.WARNING)


# --- settings -------------------------------------------------------------------------------

@pytest.mark.parametrize(("document", "key", "words"), [
    ({"skills": {"ignore_skills": []}}, "ignore_skills", "did you mean ignored_skills"),
    ({"skills": {"enableCodexUsr": False}}, "enableCodexUsr", "did you mean enableCodexUser"),
    ({"skills": {"colour": "red"}}, "colour", "skills.colour"),
    ({"skill": {}}, "skill", "'skill'"),
    ({"roots": [{"path": "/x", "priority": 1}]}, "priority", "roots[1].priority"),
], ids=["snake-typo", "camel-typo", "no-suggestion", "top-level", "root-key"])
def test_an_unknown_key_is_an_error_that_names_it(document: dict[str, object], key: str,
                                                  words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(document)
    assert caught.value.key == key
    assert words in caught.value.message


@pytest.mark.parametrize(("alias", "field"), sorted(ALIASES.items()))
def test_the_seed_camel_case_spellings_are_accepted(alias: str, field: str) -> None:
    default = getattr(Settings(), field)
    if isinstance(default, bool):
        value: object = not default
    elif isinstance(default, tuple):
        value = ["AGENTS.md"]
    elif field == "collision_policy":
        value = "keep-all"
    else:
        value = ".omp"
    settings = parse_settings({"skills": {alias: value}})
    assert getattr(settings, field) == (tuple(value) if isinstance(value, list) else value)


def test_two_spellings_of_one_setting_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"enablePiUser and skills\.enable_native_user"):
        parse_settings({"skills": {"enablePiUser": False, "enable_native_user": True}})


@pytest.mark.parametrize("name", ["", "docs/AGENTS.md", ".."], ids=["empty", "path", "dotdot"])
def test_context_files_must_be_file_names(name: str) -> None:
    with pytest.raises(ConfigError, match="context_files"):
        parse_settings({"skills": {"context_files": [name]}})


def test_allow_hardlinks_comes_from_the_root_or_else_from_skills(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    settings = parse_settings({"skills": {"allow_hardlinks": True, "presets": False},
                               "roots": [{"path": str(tmp_path / "a")},
                                         {"path": str(tmp_path / "b"), "allow_hardlinks": False}]})
    allowed = {spec.path.name: spec.allow_hardlinks for spec in plan_roots(settings, w.env).roots}
    assert allowed == {"a": True, "b": False}
    assert all(not spec.allow_hardlinks for spec in plan_roots(Settings(), w.env).roots)


def test_a_deeply_nested_plugin_registry_is_a_problem_in_every_command(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    registry = w.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    registry.write_text('{"plugins": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    write_skill(w.home / ".claude" / "skills", "pdf")
    plan = plan_roots(Settings(), w.env)
    assert [(p.code, p.message) for p in plan.problems] == [
        ("plugins-unreadable", "installed_plugins.json nests too deeply to read")]
    reindexed = w.run("reindex")
    assert reindexed.exit_code == 0, reindexed.output
    assert "nests too deeply" in reindexed.stderr
    for command in (["list"], ["roots"], ["catalog"], ["read", "skill://pdf"]):
        result = w.run(*command)
        assert result.exit_code == 0, (command, result.output)
    assert w.run("read", "skill://pdf").stdout == "# Body\n"


@pytest.mark.parametrize(
    ("plugins", "message"),
    [({"pd\u200bf@market": {"installPath": "/opt/p"}}, "control or invisible characters"),
     ({"a/b@market": {"installPath": "/opt/p"}}, "control or invisible characters"),
     ({"pdf@market": {"installPath": "/opt/\u0000p"}}, "without a usable installPath"),
     ({"pdf%2f@market": {"installPath": "/opt/p"}}, "'%', which skill:// URIs reserve"),
     ({"a?b@market": {"installPath": "/opt/p"}}, "'?', which skill:// URIs reserve"),
     ({"a:b@market": {"installPath": "/opt/p"}}, "':', which skill:// URIs reserve"),
     ({".hidden@market": {"installPath": "/opt/p"}}, "starts with '.'"),
     ({"admin@market": {"installPath": "/opt/p"}}, "scope label 'admin'"),
     ({"project@market": {"installPath": "/opt/p"}}, "scope label 'project'"),
     ({"custom.user@market": {"installPath": "/opt/p"}}, "scope label 'user'")],
    ids=["invisible-name", "slash-name", "nul-in-path", "percent", "question-mark", "colon",
         "leading-dot", "admin", "project", "provider-dot-scope"])
def test_plugins_with_unusable_names_or_paths_are_left_out(tmp_path: Path,
                                                          plugins: dict[str, object],
                                                          message: str) -> None:
    w = make_world(tmp_path)
    registry = w.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(json.dumps({"version": 1, "plugins": plugins}), encoding="utf-8")
    plan = plan_roots(Settings(), w.env)
    assert not [s for s in plan.roots if s.provider == "claude-plugins"]
    assert [p.code for p in plan.problems] == ["plugins-unreadable"]
    assert message in plan.problems[0].message
    assert w.run("reindex").exit_code == 0


def test_a_plugin_registry_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    registry = w.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    os.mkfifo(registry)
    plan = plan_roots(Settings(), w.env)  # reading it would block for ever
    assert [p.code for p in plan.problems] == ["plugins-unreadable"]


def test_a_plugin_named_like_a_scope_cannot_take_a_qualified_name(tmp_path: Path) -> None:
    """Under qualify, a plugin named `admin` would declare `admin:pdf` and push the admin's
    own `pdf` (higher precedence) to `custom.admin:pdf`: it is left out instead."""
    from skillindex.config import RootConfig

    w = make_world(tmp_path)
    install = tmp_path / "cache" / "admin"
    write_plugins(w.home, {"version": 2, "plugins": {
        "admin@acme": [{"installPath": str(install)}]}})
    write_skill(install / "skills", "pdf")
    admin = write_skill(tmp_path / "etc" / "skills", "pdf")
    user = write_skill(w.home / ".claude" / "skills", "pdf")
    settings = Settings(collision_policy="qualify", roots=(
        RootConfig(path=str(tmp_path / "etc" / "skills"), scope=Scope.ADMIN, precedence=90,
                   provider="custom"),))
    names = winner_names(w, settings)
    assert names == {"admin:pdf": admin, "user:pdf": user}
    plan = plan_roots(settings, w.env)
    assert [p.code for p in plan.problems] == ["plugins-unreadable"]
    assert "scope label 'admin'" in plan.problems[0].message
