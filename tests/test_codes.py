"""Every finding code the rules can produce has a title and help text for authors."""

from __future__ import annotations

import ast
from pathlib import Path

import skillindex
from skillindex.index import risk
from skillindex.index.codes import CODES, explained

PACKAGE = Path(skillindex.__file__).parent
# Calls that make a finding, and the position of the code among their arguments.
MAKERS = {"Finding": 0, "_warn": 0, "error": 0, "_error": 0, "FileFinding": 0,
          "ScanProblem": 2, "problem": 1}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _strings(node: ast.AST, assigned: dict[str, list[ast.AST]]) -> set[str]:
    """The string constants an argument can be: literal, either branch of a conditional, or
    what the name it reads was assigned in its function."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body, assigned) | _strings(node.orelse, assigned)
    if isinstance(node, ast.Name):
        return set().union(*(_strings(value, {}) for value in assigned.get(node.id, [])))
    return set()


def emitted_codes() -> dict[str, str]:
    """Every code a call in the package makes a finding with, and where."""
    found: dict[str, str] = {}
    for module in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                continue
            assigned: dict[str, list[ast.AST]] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            assigned.setdefault(target.id, []).append(node.value)
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _called(node) in MAKERS:
                    position = MAKERS[_called(node)]
                    if len(node.args) > position:
                        for code in _strings(node.args[position], assigned):
                            found.setdefault(code, f"{module.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_the_scan_finds_the_codes_it_should() -> None:
    found = emitted_codes()

    # One of each kind of call: policy, the parser, the walk inside a skill and above it.
    assert {"name-dir-mismatch", "yaml-invalid", "frontmatter-missing", "hard-link",
            "symlink-loop", "not-a-directory", "name-collision", "internal-error"} <= set(found)


def test_every_code_has_help() -> None:
    codes = {**emitted_codes(), **{code: "index/risk.py" for code in risk.CODES}}

    missing = sorted(f"{code} ({where})" for code, where in codes.items() if code not in CODES)

    assert missing == []


def test_help_reads_as_sentences() -> None:
    for code, explanation in CODES.items():
        assert explanation.title[0].isupper() and not explanation.title.endswith("."), code
        assert explanation.help.endswith("."), code


def test_an_unknown_code_is_still_explained() -> None:
    assert "some-new-code" in explained("some-new-code").help
