from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from skillindex.config import (
    Environment,
    ServeLimits,
    Settings,
    database_url,
    load_settings,
    parse_settings,
)
from skillindex.errors import ConfigError
from skillindex.model import Limits, Scope, Validation


def test_defaults_without_a_file(env: Environment) -> None:
    assert load_settings(None, env) == Settings()


def test_file_from_the_environment_variable(tmp_path: Path, env: Environment) -> None:
    path = tmp_path / "s.toml"
    path.write_text("[skills]\nenable_claude_user = false\n")
    settings = load_settings(None, replace(env, config_file=str(path)))
    assert settings.enable_claude_user is False
    assert settings.source == path


def test_named_file_must_exist(tmp_path: Path, env: Environment) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml", env)


def test_default_file_is_read_when_present(env: Environment) -> None:
    path = env.config_home / "skillindex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[skills]\nignored_skills = ['tmp-*']\n")
    assert load_settings(None, env).ignored_skills == ("tmp-*",)


def test_roots_and_aliases() -> None:
    settings = parse_settings({
        "skills": {"enablePiUser": False, "ignoredSkills": ["x"], "collision_policy": "qualify",
                   "validation": "lenient"},
        "roots": [{"path": "~/skills", "scope": "admin", "precedence": 200, "max_depth": 2,
                   "validation": "strict", "require_description": False}],
    })
    assert settings.enable_native_user is False
    assert settings.ignored_skills == ("x",)
    assert settings.validation is Validation.LENIENT
    [root] = settings.roots
    assert (root.scope, root.precedence, root.max_depth, root.validation,
            root.require_description) == (Scope.ADMIN, 200, 2, Validation.STRICT, False)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"skills": {"enable_everything": True}}, "skills.enable_everything"),
        ({"skillz": {}}, "'skillz'"),
        ({"roots": [{"path": "/x", "colour": "red"}]}, "roots[1].colour"),
        ({"roots": [{"scope": "user"}]}, "roots[1].path"),
        ({"roots": [{"path": "/x", "scope": "galaxy"}]}, "galaxy"),
        ({"roots": [{"path": "/x", "precedence": "high"}]},
         "roots[1].precedence must be a whole number from -2147483648 to 2147483647"),
        ({"roots": [{"path": "/x", "max_depth": 0}]},
         "roots[1].max_depth must be a whole number from 1 to 2147483647"),
        ({"skills": {"enabled": "yes"}}, "skills.enabled must be true or false"),
        ({"skills": {"ignored_skills": "x"}}, "list of strings"),
        ({"skills": {"collision_policy": "random"}}, "collision_policy must be one of"),
        ({"index": "x" * 101}, "index must be a non-empty name"),
        ({"reindex_timeout": -1}, "reindex_timeout must be a number of seconds from 0 to"),
        ({"reindex_timeout": "10m"}, "reindex_timeout must be a number of seconds"),
        ({"audit_lock_timeout": -1}, "audit_lock_timeout must be a number of seconds from 0"),
        ({"skills": {"audit_lock_timeout": 5}}, "unknown setting skills.audit_lock_timeout"),
    ],
    ids=["unknown-skill-key", "unknown-table", "unknown-root-key", "root-without-path",
         "bad-scope", "bad-precedence", "bad-depth", "bad-bool", "bad-list", "bad-policy",
         "long-index", "negative-timeout", "text-timeout", "negative-audit-wait",
         "audit-wait-in-skills"],
)
def test_bad_settings_name_the_key(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(document, source="cfg.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("cfg.toml: ")


def test_index_and_reindex_timeout_are_top_level_keys() -> None:
    settings = parse_settings({"index": " team ", "reindex_timeout": 30})
    assert (settings.index_name, settings.reindex_timeout) == ("team", 30.0)
    assert Settings().reindex_timeout == 600.0
    assert parse_settings({"audit_lock_timeout": 0.5}).audit_lock_timeout == 0.5
    assert Settings().audit_lock_timeout == 10.0


def test_serve_limits_are_a_table_and_zero_is_no_limit() -> None:
    assert Settings().serve == ServeLimits(20.0, 64 * 2**20)
    settings = parse_settings({"serve": {"requests_per_second": 2.5, "bytes_per_minute": 0}})
    assert settings.serve == ServeLimits(requests_per_second=2.5, bytes_per_minute=None)


@pytest.mark.parametrize(("document", "message"), [
    ({"serve": 5}, "[serve] must be a table"),
    ({"serve": {"rps": 5}}, "unknown setting serve.rps"),
    ({"serve": {"requests_per_second": -1}}, "serve.requests_per_second must be a number"),
    ({"serve": {"requests_per_second": float("nan")}}, "must be a number from 0"),
    ({"serve": {"requests_per_second": True}}, "must be a number from 0"),
    ({"serve": {"bytes_per_minute": 1.5}}, "serve.bytes_per_minute must be a whole number"),
    ({"serve": {"bytes_per_minute": 2**63}}, "must be a whole number from 0"),
], ids=["not-a-table", "unknown-key", "negative", "nan", "bool", "fraction", "huge"])
def test_bad_serve_limits_name_the_key(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_settings(document, source="cfg.toml")


def test_invalid_toml_is_a_config_error(tmp_path: Path, env: Environment) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[skills\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(path, env)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "sqlite:///{data}/skillindex/index.sqlite"),
        ("rel.sqlite", "sqlite:///{cwd}/rel.sqlite"),
        ("/abs/i.db", "sqlite:////abs/i.db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ],
    ids=["default", "relative-path", "absolute-path", "url"],
)
def test_database_url(env: Environment, value: str | None, expected: str) -> None:
    assert database_url(value, env) == expected.format(data=env.data_home, cwd=env.cwd)


def test_environment_reads_xdg_and_skillindex_variables(tmp_path: Path) -> None:
    env = Environment.from_os(cwd=tmp_path, environ={
        "HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d", "SKILLINDEX_DB": "x.db",
        "SKILLINDEX_CONFIG": "/s.toml", "CODEX_HOME": "/codex"})
    assert (env.home, env.config_home, env.data_home, env.codex_home) == (
        Path("/h"), Path("/c"), Path("/d"), Path("/codex"))
    assert (env.database, env.config_file, env.cwd) == ("x.db", "/s.toml", tmp_path)


def test_size_limits_and_hard_links_are_settings(tmp_path: Path) -> None:
    settings = parse_settings({
        "skills": {"max_file_bytes": 1024, "max_skill_files": 8, "max_skill_bytes": 4096,
                   "allow_hardlinks": True},
        "roots": [{"path": "/x", "allow_hardlinks": False}, {"path": "/y"}]})
    assert (settings.limits.max_file_bytes, settings.limits.max_skill_files,
            settings.limits.max_skill_bytes) == (1024, 8, 4096)
    assert [r.allow_hardlinks for r in settings.roots] == [False, None]
    assert Settings().limits == Limits(16 << 20, 512, 16 << 20)
    assert Settings().allow_hardlinks is False


@pytest.mark.parametrize("document", [
    {"skills": {"max_file_bytes": 0}}, {"skills": {"max_skill_files": True}},
    {"skills": {"max_skill_bytes": "16M"}}, {"roots": [{"path": "/x", "allow_hardlinks": 1}]},
], ids=["zero", "bool", "text", "root-not-bool"])
def test_bad_limits_are_settings_errors(document: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        parse_settings(document, source="cfg.toml")


@pytest.mark.parametrize(
    ("document", "key", "message"),
    [
        ({"roots": [{"path": "/x", "precedence": 99999999999999999999999}]}, "precedence",
         "roots[1].precedence must be a whole number from -2147483648 to 2147483647"),
        ({"roots": [{"path": "/x", "precedence": -(2**31) - 1}]}, "precedence",
         "roots[1].precedence must be a whole number from -2147483648 to 2147483647"),
        ({"roots": [{"path": "/x", "max_depth": 2**31}]}, "max_depth",
         "roots[1].max_depth must be a whole number from 1 to 2147483647"),
        ({"reindex_timeout": float("inf")}, "reindex_timeout",
         "reindex_timeout must be a number of seconds from 0 to 2147483"),
        ({"reindex_timeout": float("nan")}, "reindex_timeout", "from 0 to 2147483"),
        ({"reindex_timeout": -0.5}, "reindex_timeout", "from 0 to 2147483"),
        ({"reindex_timeout": 10**400}, "reindex_timeout", "from 0 to 2147483"),
        ({"skills": {"max_skill_files": 2**31}}, "max_skill_files",
         "skills.max_skill_files must be a whole number from 1 to 2147483647"),
        ({"skills": {"max_file_bytes": 2**63}}, "max_file_bytes",
         "skills.max_file_bytes must be a whole number from 1 to 9223372036854775807"),
        ({"skills": {"max_skill_bytes": 0}}, "max_skill_bytes", "from 1 to"),
    ],
    ids=["huge-precedence", "precedence-below-int32", "huge-depth", "infinite-timeout",
         "nan-timeout", "negative-timeout", "huge-integer-timeout", "huge-file-count",
         "huge-file-bytes", "zero-skill-bytes"])
def test_numbers_out_of_range_are_settings_errors_naming_key_and_range(
        document: dict[str, object], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(document, source="cfg.toml")
    assert message in str(caught.value)
    assert caught.value.key == key


def test_the_extremes_of_each_range_are_accepted() -> None:
    settings = parse_settings({
        "reindex_timeout": 2147483,
        "roots": [{"path": "/x", "precedence": 2**31 - 1, "max_depth": 2**31 - 1},
                  {"path": "/y", "precedence": -(2**31)}]})
    assert settings.reindex_timeout == 2147483.0
    assert [root.precedence for root in settings.roots] == [2**31 - 1, -(2**31)]


@pytest.mark.parametrize(("line", "key"), [
    ("precedence = 99999999999999999999999", "roots[1].precedence"),
    ("max_depth = 99999999999999999999999", "roots[1].max_depth")])
def test_the_command_line_reports_an_out_of_range_number_as_a_settings_error(
        tmp_path: Path, line: str, key: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{tmp_path}"\n{line}\n')
    for timeout in ("inf", "nan"):
        (tmp_path / "timeout.toml").write_text(f"reindex_timeout = {timeout}\n")
        result = CliRunner().invoke(cli, ["--config", str(tmp_path / "timeout.toml"), "--db",
                                          str(tmp_path / "db.sqlite"), "reindex"])
        assert result.exit_code == 2, result.output
        assert "reindex_timeout must be a number of seconds from 0 to" in result.stderr
    result = CliRunner().invoke(cli, ["--config", str(config), "--db",
                                      str(tmp_path / "db.sqlite"), "reindex"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{key} must be a whole number from" in result.stderr
