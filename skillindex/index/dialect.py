"""What the frontmatter fields and sidecar files of other agent hosts say about a skill (pure)."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillindex import inputs
from skillindex.inputs import compile_glob
from skillindex.model import Finding, Severity

# Codex reads a skill's interface and policy from this file beside SKILL.md.
CODEX_SIDECAR = "agents/openai.yaml"
# A sidecar larger than this is not a policy file; it is not parsed (it is still hashed).
MAX_SIDECAR_BYTES = 64 * 1024
# The fields this module reads, by the host convention that defines them.
FIELDS = frozenset({"when_to_use", "paths", "user-invocable", "argument-hint", "arguments",
                    "globs", "alwaysApply", "disable-model-invocation"})


@dataclass(frozen=True, slots=True)
class HostFields:
    """A skill's fields from other hosts' conventions, as skillindex uses them."""

    when_to_use: str | None = None
    paths: tuple[str, ...] = ()  # Claude Code's `paths` and the seed's `globs`, in that order
    always_apply: bool = False
    user_invocable: bool = True
    argument_hint: str | None = None
    arguments: tuple[str, ...] = ()
    implicit: bool = True  # Codex: policy.allow_implicit_invocation

    @property
    def conditional(self) -> bool:
        return bool(self.paths)

    def to_json(self) -> str | None:
        """The stored form: only what differs from a skill that uses no such field."""
        data: dict[str, Any] = {}
        if self.when_to_use:
            data["when_to_use"] = self.when_to_use
        if self.paths:
            data["paths"] = list(self.paths)
        if self.always_apply:
            data["always_apply"] = True
        if not self.user_invocable:
            data["user_invocable"] = False
        if self.argument_hint:
            data["argument_hint"] = self.argument_hint
        if self.arguments:
            data["arguments"] = list(self.arguments)
        if not self.implicit:
            data["implicit"] = False
        return json.dumps(data, ensure_ascii=False, sort_keys=True) if data else None

    @classmethod
    def from_json(cls, text: str | None) -> HostFields:
        if not text:
            return NONE
        try:
            data = json.loads(text)
        except ValueError:
            return NONE
        if not isinstance(data, dict):
            return NONE
        return cls(when_to_use=_text(data.get("when_to_use")),
                   paths=tuple(p for p in data.get("paths", ()) if isinstance(p, str)),
                   always_apply=data.get("always_apply") is True,
                   user_invocable=data.get("user_invocable") is not False,
                   argument_hint=_text(data.get("argument_hint")),
                   arguments=tuple(a for a in data.get("arguments", ()) if isinstance(a, str)),
                   implicit=data.get("implicit") is not False)


NONE = HostFields()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def argument_hints(stored: Mapping[int, str | None]) -> dict[int, str]:
    """The `argument-hint` of each candidate whose stored host fields (JSON) declare one."""
    found = {cid: HostFields.from_json(text).argument_hint for cid, text in stored.items()}
    return {cid: hint for cid, hint in found.items() if hint}


def host_fields(fields: Mapping[str, Any] | None, sidecar: bytes | None = None,
                ) -> tuple[HostFields, list[Finding]]:
    """The host fields of a parsed frontmatter and of the Codex sidecar's bytes (None when the
    skill has none), and a `field-type` or `sidecar-invalid` warning for each unusable one."""
    fields = fields or {}
    findings: list[Finding] = []

    def wrong(key: str, expected: str) -> None:
        findings.append(Finding("field-type", Severity.WARNING,
                                f"{key} must be {expected}, not {type(fields[key]).__name__}; "
                                "ignored"))

    when = fields.get("when_to_use")
    if when is not None and not isinstance(when, str):
        wrong("when_to_use", "a string")
    paths: list[str] = []
    for key in ("paths", "globs"):
        if key in fields and fields[key] is not None:
            globs = _globs(fields[key])
            if globs is None:
                wrong(key, "a string or a list of strings")
            else:
                paths.extend(g for g in globs if g not in paths)
    always = _flag(fields, "alwaysApply", False, wrong)
    invocable = _flag(fields, "user-invocable", True, wrong)
    hint = fields.get("argument-hint")
    if isinstance(hint, list) and all(isinstance(item, str) for item in hint):
        # `argument-hint: [file]` is a YAML list; the author meant the brackets.
        hint = " ".join(f"[{item}]" for item in hint)
    elif hint is not None and not isinstance(hint, str):
        wrong("argument-hint", "a string")
        hint = None
    arguments = fields.get("arguments")
    names: tuple[str, ...] = ()
    if isinstance(arguments, str):
        names = tuple(arguments.split())
    elif isinstance(arguments, list) and all(isinstance(item, str) for item in arguments):
        names = tuple(item.strip() for item in arguments if item.strip())
    elif arguments is not None:
        wrong("arguments", "a string or a list of strings")
    implicit = True
    if sidecar is not None:
        implicit = _implicit(sidecar, findings)
    return HostFields(
        when_to_use=when.strip() or None if isinstance(when, str) else None,
        paths=tuple(paths), always_apply=always, user_invocable=invocable,
        argument_hint=hint.strip() or None if isinstance(hint, str) else None,
        arguments=names, implicit=implicit), findings


def _globs(value: Any) -> list[str] | None:
    """Claude Code reads `paths` as a list or as one comma-separated string."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    return None


def _flag(fields: Mapping[str, Any], key: str, default: bool, wrong: Any) -> bool:
    value = fields.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"  # a repaired frontmatter's text
    wrong(key, "true or false")
    return default


def _implicit(data: bytes, findings: list[Finding]) -> bool:
    """Codex's `policy.allow_implicit_invocation` (true when absent)."""
    def invalid(why: str) -> bool:
        findings.append(Finding("sidecar-invalid", Severity.WARNING,
                                f"{CODEX_SIDECAR}: {why}; its policy is not applied"))
        return True

    if len(data) > MAX_SIDECAR_BYTES:
        return invalid(f"larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        document = inputs.load_yaml(data.decode("utf-8"), what="sidecar")
    except UnicodeDecodeError:
        return invalid("not UTF-8")
    except inputs.InputError as exc:
        return invalid("nests too deeply" if exc.code == "too-deep" else "not valid YAML")
    if document is None:
        return True
    if not isinstance(document, dict):
        return invalid("not a mapping")
    policy = document.get("policy")
    if policy is None:
        return True
    if not isinstance(policy, dict):
        return invalid("policy is not a mapping")
    value = policy.get("allow_implicit_invocation")
    if value is None:
        return True
    if not isinstance(value, bool):
        return invalid("policy.allow_implicit_invocation is not true or false")
    return value


# -- Arguments of a `/skill:` command, as Claude Code substitutes them ------------------------

# One pass, left to right: `$ARGUMENTS[N]` before `$ARGUMENTS`, braces before bare names.
_PLACEHOLDER = re.compile(
    r"\$ARGUMENTS\[(?P<index>\d+)\]|\$ARGUMENTS(?![A-Za-z0-9_\[])|\$\{(?P<dir>CLAUDE_SKILL_DIR|"
    r"SKILL_DIR)\}|\$(?P<number>\d+)(?![0-9])|\$(?P<name>[A-Za-z_][A-Za-z0-9_]*)")


def split_arguments(text: str) -> list[str]:
    """The words of an argument text as a POSIX shell splits them (quotes group words and are
    removed); unbalanced quotes fall back to splitting at blanks."""
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def substitute(body: str, args: str | None, words: Sequence[str], *, names: Sequence[str],
               skill_dir: str) -> tuple[str, bool]:
    """The body with `$ARGUMENTS`, `$ARGUMENTS[N]`, `$N`, the named `$name`s of `arguments`
    and `${CLAUDE_SKILL_DIR}` / `${SKILL_DIR}` replaced, and whether any placeholder took the
    arguments. A position past the last argument, like an unknown `$name`, stays as written and
    takes nothing: when no placeholder took a word, the caller appends the input."""
    taken = False
    named = {name: number for number, name in enumerate(names)}

    def replaced(match: re.Match[str]) -> str:
        nonlocal taken
        if match.group("dir"):
            return skill_dir
        name = match.group("name")
        if name is not None and name not in named:
            return match.group(0)
        if match.group(0) == "$ARGUMENTS":
            taken = True
            return args or ""
        index = match.group("index") or match.group("number")
        number = named[name] if name is not None else int(index or 0)
        if number >= len(words):
            return match.group(0)  # ("costs $5" takes no input: the input is then appended)
        taken = True
        return words[number]

    return _PLACEHOLDER.sub(replaced, body), taken


# -- Conditional skills: `paths` and `globs` against the files in play ------------------------

# Bounds on what an author's globs may cost: each is matched segment by segment, in time
# proportional to its segments times the path's.
MAX_GLOB_CHARS = inputs.MAX_GLOB_CHARS
MAX_GLOBS = 64


def glob_matches(glob: str, path: str) -> bool:
    """Whether a relative `path` (forward slashes) matches a `paths` glob: `*` and `?` stay
    within a segment, `**` spans any number of them, and a glob without `/` matches the
    file's name at any depth (as .gitignore reads one)."""
    glob = glob.strip().lstrip("/") if len(glob) <= MAX_GLOB_CHARS else ""
    if not glob:
        return False
    if glob.startswith("./"):
        glob = glob[2:]
    if glob.endswith("/"):
        glob += "**"
    parts = glob.split("/")
    if len(parts) == 1:
        parts = ["**", parts[0]]
    names = [segment for segment in path.split("/") if segment and segment != "."]
    # reach[j]: the glob's segments so far can match the path's first j segments.
    reach = [True] + [False] * len(names)
    for part in parts:
        if part == "**":
            for j in range(1, len(reach)):
                reach[j] = reach[j] or reach[j - 1]
            continue
        matches = compile_glob(part)
        reach = [False] + [reach[j - 1] and matches(names[j - 1]) for j in range(1, len(reach))]
    return reach[-1]


def in_play(host: HostFields, files: Sequence[str]) -> bool:
    """Whether a conditional skill applies to the files in play (any of them matches any of
    its globs); a skill without globs always does."""
    if not host.paths:
        return True
    globs = host.paths[:MAX_GLOBS]
    return any(glob_matches(glob, path) for path in files for glob in globs)


def files_in_play(files: Sequence[str], cwd: Path, top: Path) -> tuple[str, ...]:
    """The files as the globs read them: a file given relative to the working directory, or
    absolute, made relative to the project's top (the repository root), forward slashes; a
    file outside the project keeps its absolute path (only an absolute glob matches it)."""
    found: list[str] = []
    base = os.path.normpath(top)
    for given in files:
        path = os.path.normpath(os.path.join(cwd, os.path.expanduser(given)))
        relative = os.path.relpath(path, base) if path.startswith(base + os.sep) else path
        found.append(relative.replace(os.sep, "/"))
    return tuple(dict.fromkeys(found))
