"""Every option and argument of every command (found in the click tree, so a new one is fuzzed
the day it is added), and every settings key, each given hostile values in a process of its
own: no traceback, no `internal error`, an exit code from 0 to 4, and a failure told in one
line on stderr.

Short by default: every parameter with a value of each class, in forked processes, and a few
command lines run by a new interpreter with bytes that are not UTF-8. The long run,
`SKILLINDEX_FUZZ_CLI=long pytest tests/test_fuzz_cli.py`, gives every parameter every value of
`clifuzz.HOSTILE` (more than 30) and every setting every value of `clifuzz.SETTINGS_VALUES`, and
every parameter the bytes again in new interpreters (docs/development.md). A failing run
names each parameter and kind of failure once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import click
import pytest

from tests.clifuzz import (
    GOOD,
    HOSTILE,
    SETTINGS_VALUES,
    Parameter,
    Sandbox,
    Value,
    command_line,
    parameters,
    settings_keys,
)
from tests.clitree import commands

LONG = os.environ.get("SKILLINDEX_FUZZ_CLI", "") == "long"
# One value of each class: bytes that are not UTF-8, empty, a dash, huge and negative numbers,
# a control character, dates at the edges of time, a database URL and a revision the driver
# or Alembic would choke on, a number no float holds, very long text.
SHORT: list[Value] = [b"\xff", "", "-", "99999999999999999999", "-1", "a\nb",
                      "0001-01-01T00:00:00+01:00", "sqlite:///x.sqlite?timeout=abc",
                      "postgresql://u@h:abc/db", "base+99", "1" + "0" * 400, "a" * 100_000]
VALUES = HOSTILE if LONG else SHORT
ENVIRONMENT = ("SKILLINDEX_DB", "SKILLINDEX_CONFIG")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    made = Sandbox.make()
    yield made
    made.remove()


def _report(failures: dict[str, list[Value]]) -> str:
    kinds = sorted({key.split(": ", 1)[1] for key in failures})
    return (f"{len(failures)} parameters and kinds of failure ({len(kinds)} kinds: "
            f"{'; '.join(kinds)}):\n" + "\n".join(
                f"{key}\n    {[v[:80] for v in argv]!r}" for key, argv in sorted(failures.items())))


def _fuzz(sandbox: Sandbox, found: list[Parameter], values: list[Value], *,
          fork: bool) -> dict[str, list[Value]]:
    failures: dict[str, list[Value]] = {}
    for parameter in found:
        for value in ([None] if parameter.flag else values):
            argv = command_line(parameter, value)
            outcome = sandbox.run(argv, fork=fork)
            failure = outcome.failure()
            if failure is not None:
                failures.setdefault(f"{parameter.label}: {failure}", argv)
    return failures


def test_the_tree_is_walked_whole() -> None:
    found = {parameter.label for parameter in parameters()}
    for label in ("skillindex --db", "skillindex reindex --jobs", "skillindex read URI",
                  "skillindex db upgrade REVISION", "skillindex audit --since",
                  "skillindex audit verify --head", "skillindex serve --page-size",
                  "skillindex command ARGS"):
        assert label in found


def test_every_command_runs_with_good_values(sandbox: Sandbox) -> None:
    """Each command and group as it is, with good values for what it requires: the baseline
    every hostile value is measured against."""
    failures: dict[str, list[Value]] = {}
    for path, command in commands():
        required = [GOOD.get(param.name or "", "good") for param in command.params
                    if isinstance(param, click.Argument) and param.required]
        argv: list[Value] = [*path, *(["--", *required] if required else [])] or ["--help"]
        failure = sandbox.run(argv, fork=True).failure()
        if failure is not None:
            failures.setdefault(f"skillindex {' '.join(path)}: {failure}", argv)
    assert not failures, _report(failures)


def test_no_value_of_any_parameter_breaks_a_command(sandbox: Sandbox) -> None:
    failures = _fuzz(sandbox, parameters(), VALUES, fork=True)
    assert not failures, _report(failures)


def test_no_value_from_the_environment_breaks_a_command(sandbox: Sandbox) -> None:
    failures: dict[str, list[Value]] = {}
    for name in ENVIRONMENT:
        for value in VALUES:
            if isinstance(value, str) and len(value) > 1_000:
                continue  # an environment holds less than a command line
            for argv in (["list"], ["reindex"]):
                failure = sandbox.run(argv, fork=True, environ={name: value}).failure()
                if failure is not None:
                    failures.setdefault(f"${name} {argv[0]}: {failure}", [value])
    assert not failures, _report(failures)


def test_a_new_interpreter_reads_bytes_that_are_not_utf8(sandbox: Sandbox) -> None:
    """What the forked runs stand in for: arguments as the interpreter decodes them."""
    found = parameters()
    values: list[Value] = [b"\xff", "99999999999999999999"]
    if LONG:
        values = [v for v in HOSTILE if isinstance(v, bytes)] + ["", "-", "a\nb", "9" * 400]
    else:
        found = [p for p in found if p.label in {
            "skillindex --index", "skillindex candidates --code", "skillindex audit --session",
            "skillindex catalog --session", "skillindex search --limit",
            "skillindex read URI"}]
    failures = _fuzz(sandbox, found, values, fork=False)
    assert not failures, _report(failures)


def test_no_value_of_any_setting_breaks_a_command(sandbox: Sandbox) -> None:
    """Every key of the settings file (found in the settings' own dataclasses) with hostile
    TOML values: a settings error, never a crash."""
    failures: dict[str, list[Value]] = {}
    # A few of each kind in the short run: NUL, a number past every bound, NaN, the wrong kind,
    # empty, very long.
    values = SETTINGS_VALUES if LONG else [SETTINGS_VALUES[i] for i in (0, 1, 9, 17, 21, 28)]
    for key in settings_keys():
        for value in values:
            failure = sandbox.run(["reindex"], fork=True, settings={key: value}).failure()
            if failure is not None:
                failures.setdefault(f"{key}: {failure}", [value])
    assert not failures, _report(failures)
