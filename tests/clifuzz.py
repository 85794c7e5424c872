"""A command-line fuzzer: every parameter of every command, found in the click tree, called in a
process of its own with hostile values, and what a user must never see.

Two ways to run a command line: `forked` (this process, with everything imported, forks; the
child runs the command line as `python -m skillindex` would, with its own descriptors, working
directory and environment) and `executed` (a new interpreter, arguments passed as bytes).
"""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import click
from click.testing import CliRunner

from skillindex.cli import cli, main
from skillindex.cli.common import COMMAND_MODULES
from skillindex.config import CatalogModes, RootConfig, Settings
from tests.clitree import commands

Value = str | bytes

# At least 30 of every kind a user (or a script gone wrong) can type. Bytes are not UTF-8.
HOSTILE: list[Value] = [
    b"\xff", b"a\xffb", b"\xc3", b"\xed\xa0\x80", b"skill://\xff", b"\xff/x",
    "", " ", "-", "--", "0", "-1", "1", "-0", "1.5", "0x10", "nan", "inf", "1e999",
    "99999999999999999999", "-99999999999999999999", str(2**63), str(2**63 - 1), str(2**64),
    str(2**31), "9" * 400, "a" * 100_000, "\x01\x1b[31m", "a\nb", "\t", "\u202e", "\u0085",
    "\U0010ffff", "\u200b", "%00", "a\x7fb", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00", "0001-01-01", "9999-12-31", "0000-00-00", "2026-13-45",
    "2026-01-01T25:61:61", "1970-01-01T00:00:00+99:00",
    "sqlite:///x.sqlite?timeout=abc", "sqlite:///x.sqlite?check_same_thread=maybe",
    "sqlite:///x.sqlite?timeout=1e999", "sqlite:///x.sqlite?uri=true&mode=nope",
    "sqlite:///x.sqlite?foo=bar", "postgresql://u@h:abc/db", "postgresql://u@127.0.0.1:99999/db",
    "postgresql://u@127.0.0.1:1/db?connect_timeout=abc", "postgresql://u@[::1/db",
    "mysql://u@h/db", "sqlite://", "://", "sqlite:////nonexistent/dir/x.sqlite",
    "skill://", "skill://../x", "skill://good/../../etc/passwd", "skill://good/%2e%2e/x",
    "/dev/null", "/", ".", "..", "~", "$HOME", "base+99", "head-999", "head+1", "base",
    "head+99", "0001-01-01T00:00:00", "1" + "0" * 400, "-" + "9" * 40,
    "@", "*", "?", "[", "{", "x:y", "::", "127.0.0.1:0", ":99999", "[::1]:80",
]
# TOML values for every setting: strings with NUL, control and odd characters, numbers past
# every bound, the wrong kind.
SETTINGS_VALUES = [
    '"a\\u0000b"', '""', '" "', '"\\u001b[31m"', '"~"', '"/"', '"."', '".."', '"-"',
    '"' + "a" * 5_000 + '"', '"*"', '"[!"', '"\\u202e"', '"x/y"', "0", "-1", "1",
    str(2**63), str(-(2**63) - 1), str(2**31), "1e999", "nan", "inf", "-inf", "0.5", "true",
    "false", "[]", '["a\\u0000"]', '[""]', "[1, 2]", "{}", '{ path = "x" }',
    "1979-05-27T07:32:00Z", "0001-01-01T00:00:00+01:00",
]
# What a command line needs besides the parameter under test, by the parameter's name; any
# other required argument gets "good".
GOOD = {"uri": "skill://good", "name": "good", "query": "good", "revision": "head",
        "args": "x"}
# Commands that run until stopped once their values are accepted (a timeout is not a failure).
TIMEOUT_S = 5.0
# What `serve` reads on stdin: a client that starts a session, lists and reads, and leaves, so
# that the values of its options are used before it stops.
MCP_SESSION = b"".join(json.dumps(message).encode() + b"\n" for message in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "clifuzz", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "resources/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 4, "method": "resources/read",
     "params": {"uri": "skill://good"}},
))


@dataclass(frozen=True, slots=True)
class Parameter:
    path: tuple[str, ...]  # the command's path under `skillindex` (empty: the group's own)
    name: str  # the option's longest spelling, or the argument's name
    option: bool
    flag: bool
    command: click.Command

    @property
    def label(self) -> str:
        return " ".join(("skillindex", *self.path, self.name if self.option
                         else self.name.upper()))


def parameters() -> list[Parameter]:
    """Every option and argument of every command, as the click tree declares them."""
    found = []
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option):
                if param.hidden or "--help" in param.opts or param.name == "version":
                    continue
                spelled = max(param.opts, key=len)
                found.append(Parameter(path, spelled, True, param.is_flag or param.count,
                                       command))
            elif isinstance(param, click.Argument):
                found.append(Parameter(path, param.name or "arg", False, False, command))
    return found


def command_line(parameter: Parameter, value: Value | None) -> list[Value]:
    """The command line that gives `parameter` this value (a flag: just the flag), with good
    values for the command's other required arguments; the group's own options come with
    `list`."""
    options: list[Value] = []
    arguments: list[Value] = []
    for param in parameter.command.params:
        if isinstance(param, click.Argument):
            if not parameter.option and param.name == parameter.name:
                arguments.append(value if value is not None else "")
            elif param.required:
                arguments.append(GOOD.get(param.name or "", "good"))
    if parameter.option:
        options = [parameter.name] if parameter.flag else [parameter.name, value or ""]
    if not parameter.path:
        return [*options, "list"]
    if isinstance(parameter.command, click.Group) and not arguments:
        return [*parameter.path, *options]
    # `--` ends the options: an argument such as "-1" is taken as an argument.
    return [*parameter.path, *options, "--", *arguments] if arguments else \
        [*parameter.path, *options]


def settings_keys() -> list[str]:
    """Every key a settings file may hold, as `table.key` (`roots.` for a `[[roots]]` entry),
    read from the settings' own dataclasses: a setting added later is fuzzed too."""
    skills = [f"skills.{f.name}" for f in fields(Settings)
              if f.name not in ("roots", "source", "index_name", "reindex_timeout", "catalog")]
    catalog = [f"skills.catalog.{f.name}" for f in fields(CatalogModes)]
    roots = [f"roots.{f.name}" for f in fields(RootConfig)]
    return ["index", "reindex_timeout", *skills, *catalog, *roots]


def settings_text(root: Path, overrides: Mapping[str, str]) -> str:
    """The sandbox's settings file with `overrides` (TOML values by `settings_keys` key)."""
    top = [f"{key} = {value}" for key, value in overrides.items() if "." not in key]
    skills = {"presets": "false"}
    skills.update({key.split(".", 1)[1]: value for key, value in overrides.items()
                   if key.startswith("skills.") and key.count(".") == 1})
    catalog = [f"{key.rsplit('.', 1)[1]} = {value}" for key, value in overrides.items()
               if key.startswith("skills.catalog.")]
    root_lines = {"path": f'"{root}"', "precedence": "10"}
    root_lines.update({key.split(".", 1)[1]: value for key, value in overrides.items()
                       if key.startswith("roots.")})
    return "\n".join([*top, "[skills]", *(f"{k} = {v}" for k, v in skills.items()),
                      "[skills.catalog]",
                      *catalog, "[[roots]]", *(f"{k} = {v}" for k, v in root_lines.items()),
                      ""])


@dataclass(slots=True)
class Outcome:
    argv: list[Value]
    code: int | None  # None: still running at the timeout (killed)
    stdout: bytes
    stderr: bytes

    def failure(self) -> str | None:
        """What a user must never see, named by its kind (so that a class counts once)."""
        err = self.stderr.decode("utf-8", "replace")
        for marker in ("Traceback", "internal error"):
            if marker in err:
                line = next((line for line in err.splitlines() if marker in line or
                             line.startswith(("ValueError", "TypeError"))), marker)
                kind = line.split("internal error: ", 1)[-1].split(":", 1)[0].strip()
                return f"{marker.lower()}: {kind}"
        if self.code is None:
            return None
        if not 0 <= self.code <= 4:
            return f"exit {self.code}"
        if self.code != 0:
            lines = err.splitlines()
            errors = [line for line in lines if line.startswith("skillindex: error: ")]
            if lines and (len(lines) != 1 or len(errors) != 1):
                return f"exit {self.code} with {len(lines)} lines on stderr"
        return None


@dataclass
class Sandbox:
    """A folder with a settings file, two good skills and a broken one, and a migrated,
    indexed SQLite database with an audit event; each run gets a copy of the database."""

    folder: Path
    environ: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls) -> Sandbox:
        folder = Path(tempfile.mkdtemp(prefix="skillindex-clifuzz-"))
        root = folder / "skills"
        for name in ("good", "other"):
            (root / name).mkdir(parents=True)
            (root / name / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: A good skill.\n---\n# {name}\n",
                encoding="utf-8")
        (root / "broken").mkdir()
        (root / "broken" / "SKILL.md").write_text("---\nname: [\n---\n", encoding="utf-8")
        home = folder / "home"
        home.mkdir()
        (folder / "config.toml").write_text(
            f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\nprecedence = 10\n',
            encoding="utf-8")
        sandbox = cls(folder)
        sandbox.environ = {
            "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".data"), "PATH": os.environ.get("PATH", ""),
            "SKILLINDEX_CONFIG": str(folder / "config.toml"),
            "SKILLINDEX_DB": str(folder / "index.sqlite"), "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        for argv in (["reindex"], ["read", "skill://good", "--session", "s-1"],
                     ["lock", "--output", str(folder / "skills-lock.json")]):
            outcome = sandbox.run(argv, fork=True, fresh=False, timeout=600)
            assert outcome.code == 0, outcome
        sandbox.warm()
        return sandbox

    def warm(self) -> None:
        """Import what the commands import and run the common ones here once, so that a
        forked child starts with it done (an interpreter would spend most of a run on it)."""
        for module in sorted(set(COMMAND_MODULES.values())):
            importlib.import_module(f"skillindex.cli.{module}")
        importlib.import_module("skillindex.serve.mcp")  # what `serve` imports when it starts
        runner = CliRunner()
        for argv in (["list"], ["--json", "list"], ["candidates"], ["catalog"], ["audit"],
                     ["explain", "good"], ["verify"], ["search", "good"], ["db", "current"]):
            runner.invoke(cli, argv, env=self.environ)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, argv: Sequence[Value], *, fork: bool, fresh: bool = True,
            environ: Mapping[str, Value] | None = None,
            settings: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S) -> Outcome:
        """Run one command line in a scratch folder holding a copy of the database (and a
        settings file of its own with `settings`)."""
        scratch = Path(tempfile.mkdtemp(prefix="run-", dir=self.folder)) if fresh \
            else self.folder
        try:
            env: dict[str, Value] = {**self.environ}
            if fresh:
                shutil.copy(self.folder / "index.sqlite", scratch / "index.sqlite")
                shutil.copy(self.folder / "skills-lock.json", scratch / "skills-lock.json")
                env["SKILLINDEX_DB"] = str(scratch / "index.sqlite")
            if settings is not None:
                config = scratch / "config.toml"
                config.write_text(settings_text(self.folder / "skills", settings),
                                  encoding="utf-8")
                env["SKILLINDEX_CONFIG"] = str(config)
            env.update(environ or {})
            stdin = MCP_SESSION if "serve" in argv else b""
            if fork:
                return _forked(list(argv), env, scratch, stdin, timeout)
            return _executed(list(argv), env, scratch, stdin, timeout)
        finally:
            if fresh:
                shutil.rmtree(scratch, ignore_errors=True)


def _text(value: Value) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else value


def _executed(argv: list[Value], env: dict[str, Value], cwd: Path, stdin: bytes,
              timeout: float) -> Outcome:
    command = [os.fsencode(sys.executable), b"-m", b"skillindex",
               *(os.fsencode(value) for value in argv)]
    environ = {os.fsencode(key): os.fsencode(value) for key, value in env.items()}
    try:
        done = subprocess.run(command, env=environ, cwd=cwd, input=stdin,
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        return Outcome(argv, None, exc.stdout or b"", exc.stderr or b"")
    return Outcome(argv, done.returncode, done.stdout, done.stderr)


def _forked(argv: list[Value], env: dict[str, Value], cwd: Path, stdin: bytes,
            timeout: float) -> Outcome:
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        given.write(stdin)
        given.seek(0)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            _child(argv, env, cwd, given.fileno(), out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout
        code: int | None = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                try:  # the child and the workers it started, in its own process group
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:  # not its own group yet
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        out.seek(0)
        err.seek(0)
        return Outcome(argv, code, out.read(), err.read())


def _child(argv: list[Value], env: dict[str, Value], cwd: Path, given: int, out: int,
           err: int) -> None:  # pragma: no cover (the child)
    code = 70
    try:
        os.setpgid(0, 0)  # its own workers are killed with it at a timeout
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update({_text(key): _text(value) for key, value in env.items()})
        os.dup2(given, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # What the interpreter gives a command: streams on the descriptors (not a test's
        # capture), UTF-8, arguments that are not UTF-8 decoded with surrogateescape.
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8",
                                     errors="surrogateescape")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      errors="strict", line_buffering=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        args = [_text(value) for value in argv]
        sys.argv = ["skillindex", *args]
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # what the interpreter would print
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
    finally:
        os._exit(code)
