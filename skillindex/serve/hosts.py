"""How agent hosts start `skillindex serve`: each host's file and format, and a merge of the
skillindex entry into that file that keeps everything else the file holds."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shlex
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from skillindex import fsio, inputs
from skillindex import text as escape
from skillindex.config import Environment, database_url
from skillindex.errors import ConfigError, RefusedError

SERVER_NAME = "skillindex"


@dataclass(frozen=True, slots=True)
class Host:
    """An agent host: where it reads its MCP servers from and in which shape."""

    key: str
    title: str
    file: str  # relative to the project, or to the Codex home for Codex
    servers_key: str  # the object of the file that maps server names to servers
    typed: bool  # whether a stdio entry says `"type": "stdio"`
    docs: str  # where the host documents the format
    check: str  # how to see in the host that it starts the server

    @property
    def toml(self) -> bool:
        return self.file.endswith(".toml")

    def base(self, env: Environment) -> Path:
        """The directory the host's file belongs to: the Codex home, else the project."""
        if self.key == "codex":
            return env.codex_home or env.home / ".codex"
        return env.cwd

    def path(self, env: Environment) -> Path:
        return self.base(env) / self.file


HOSTS = {host.key: host for host in (
    Host("claude", "Claude Code", ".mcp.json", "mcpServers", True,
         "https://code.claude.com/docs/en/mcp",
         "run `claude mcp list`, or /mcp in a session (approve the project's server when "
         "asked)"),
    Host("codex", "Codex", "config.toml", "mcp_servers", False,
         "https://developers.openai.com/codex/mcp",
         "run `codex mcp list`, or /mcp in a session"),
    Host("cursor", "Cursor", ".cursor/mcp.json", "mcpServers", False,
         "https://cursor.com/docs/mcp",
         "open Cursor Settings, MCP: the server is listed with its tools (switch it on if it "
         "is off)"),
    Host("vscode", "VS Code", ".vscode/mcp.json", "servers", True,
         "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
         "run the command MCP: List Servers (trust the server when asked), then pick its "
         "tools in the chat"),
    Host("gemini", "Gemini CLI", ".gemini/settings.json", "mcpServers", False,
         "https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md",
         "run `gemini mcp list`, or /mcp in a session (in a trusted folder)"),
)}


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """The absolute command line a host runs to start `skillindex serve`."""

    command: str
    args: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


class Status(StrEnum):
    NO_FILE = "no file"
    NOT_CONFIGURED = "not configured"
    CONFIGURED = "configured"
    DIFFERENT = "differs"  # an entry of that name starts something else
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class HostState:
    host: Host
    path: Path
    status: Status
    detail: str | None = None  # what the entry starts now, or why the file cannot be read

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host.key, "title": self.host.title, "path": str(self.path),
                "status": str(self.status), "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    action: Literal["created", "added", "updated", "unchanged"]


class HostFileError(RefusedError):
    """A host's file that cannot be merged into without losing or misreading what it holds."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot add {SERVER_NAME} to {path}: {reason}", path=str(path))
        self.reason = reason


def installed_program(argv0: str | None = None) -> tuple[str, ...]:
    """The absolute command that starts this installation of skillindex: the script running
    now, else the one installed beside this interpreter, else this interpreter with `-m`."""
    names = ("skillindex", "skillindex.exe")
    argv0 = sys.argv[0] if argv0 is None else argv0
    # The path as it was run, symlinks kept: a link that a tool manager keeps current (pipx,
    # uv tool) should go on working after an upgrade.
    if argv0 and Path(argv0).name in names and Path(argv0).is_file():
        return (os.path.abspath(argv0),)
    scripts = Path(sysconfig.get_path("scripts"))
    for name in names:
        if (scripts / name).is_file():
            return (os.path.abspath(scripts / name),)
    return (os.path.abspath(sys.executable), "-m", "skillindex")


def serve_available() -> bool:
    """Whether the `mcp` extra that `skillindex serve` needs is installed."""
    return importlib.util.find_spec("mcp") is not None


def missing_index(env: Environment, db: str | None) -> Path | None:
    """The SQLite file the server would open, when it does not exist yet (nothing to serve)."""
    url = database_url(db, env)
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return None if path.exists() else path
    return None


def server_command(env: Environment, program: Sequence[str], *, config: str | None = None,
                   db: str | None = None, index: str | None = None) -> ServerCommand:
    """`serve` with the options that choose this index, each made absolute: a host starts the
    server from a directory of its own and often without the shell's environment, so the
    settings file and database that $SKILLINDEX_CONFIG and $SKILLINDEX_DB name are pinned too."""
    args = [*program[1:], "--cwd", str(env.cwd)]
    settings = config or env.config_file
    if settings:
        args += ["--config", os.path.abspath(Path(settings).expanduser())]
    database = db or env.database
    if database:
        args += ["--db", _absolute_database(database, env)]
    if index is not None:
        args += ["--index", index]
    args.append("serve")
    command = ServerCommand(program[0], tuple(args))
    for arg in command.argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{arg.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8, "
                              "which a host's configuration file cannot hold") from None
    return command


# The query parameters of a database URL that hold a password or say where one is kept (a
# passfile's path tells whoever reads the host's file where to look).
_PASSWORD_PARAMETERS = frozenset({"password", "passfile", "sslpassword"})


def _absolute_database(value: str, env: Environment) -> str:
    if "://" not in value:
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else env.cwd / path)
    url = urlsplit(value)
    named = {key.lower() for key, _ in parse_qsl(url.query, keep_blank_values=True)}
    if url.password or named & _PASSWORD_PARAMETERS:
        raise RefusedError("the database URL holds a password, which the host's configuration "
                           "would keep in plain text: put it in a libpq password file "
                           "(~/.pgpass or $PGPASSFILE) and give the URL without it")
    prefix, separator, rest = value.partition(":///")
    if url.scheme.split("+", 1)[0] == "sqlite" and separator and rest[:1] not in ("", "/"):
        # SQLAlchemy reads sqlite:///name relative to the process's directory: the host's.
        return f"{prefix}:///{os.path.abspath(rest)}"
    return value


def entry(host: Host, server: ServerCommand) -> dict[str, Any]:
    """The host's entry for the server, in the host's own keys."""
    return {**({"type": "stdio"} if host.typed else {}),
            "command": server.command, "args": list(server.args)}


def snippet(host: Host, server: ServerCommand) -> str:
    """A whole file for the host holding the entry alone, as `write` makes a new one."""
    if host.toml:
        return _toml_table(server)
    return _json_text({host.servers_key: {SERVER_NAME: entry(host, server)}}, "  ") + "\n"


def claude_command(server: ServerCommand) -> str:
    """The `claude mcp add` line that writes the same project entry as `write`."""
    return shlex.join(["claude", "mcp", "add", "--scope", "project", "--transport", "stdio",
                       SERVER_NAME, "--", *server.argv])


def state(host: Host, path: Path, server: ServerCommand) -> HostState:
    """Whether the host's file already starts this server."""
    try:
        read = _read(path)
        if read is None:
            return HostState(host, path, Status.NO_FILE)
        data, _ = _parse(host, path, read[0])
        servers = _servers(host, path, data)
    except HostFileError as exc:
        return HostState(host, path, Status.UNREADABLE, exc.reason)
    current = servers.get(SERVER_NAME)
    if current is None:
        return HostState(host, path, Status.NOT_CONFIGURED)
    if _matches(current, server):
        return HostState(host, path, Status.CONFIGURED)
    return HostState(host, path, Status.DIFFERENT, _describe(current))


def write(host: Host, path: Path, server: ServerCommand, *, named: bool,
          within: Path | None) -> Written:
    """Add the entry to the host's file, or bring an entry of that name up to date, keeping
    every other server, key and (in TOML) comment; a file already right is not touched.

    `named` and `within` are `fsio.target`'s: a link at a path the user did not name (a
    repository's `.mcp.json` leading to the user's own settings) is refused before it is read."""
    def replace(text: str) -> None:
        fsio.write(path, text, what=f"the {host.title} file", named=named, within=within,
                   private=False)

    path = fsio.target(path, what=f"the {host.title} file", named=named, within=within)
    read = _read(path)
    if read is None or not read[0].strip():
        replace(snippet(host, server))
        return Written(path, "created")
    text, bom = read
    data, strict = _parse(host, path, text)
    servers = _servers(host, path, data)
    current = servers.get(SERVER_NAME)
    if current is not None and _matches(current, server):
        return Written(path, "unchanged")
    if current is not None and not isinstance(current, dict):
        raise HostFileError(path, f"its {SERVER_NAME!r} server is not a table of settings")
    if not strict:
        raise HostFileError(path, "it holds comments or trailing commas, which rewriting it "
                            f"would lose; add the entry that `skillindex hosts {host.key}` "
                            "prints by hand")
    if host.toml:
        updated = _toml_merge(path, text, data, current, server)
    else:
        updated = _json_merge(host, path, text, data, server)
    replace(("\ufeff" if bom else "") + updated)
    return Written(path, "added" if SERVER_NAME not in servers else "updated")


def _matches(current: Any, server: ServerCommand) -> bool:
    """The entry starts this command as a stdio server (other keys of it are the user's)."""
    return (isinstance(current, dict) and current.get("command") == server.command
            and current.get("args") == list(server.args)
            and current.get("type", "stdio") == "stdio")


def _describe(current: Any) -> str:
    if isinstance(current, dict) and isinstance(current.get("command"), str):
        args = current.get("args")
        words = [str(word) for word in args] if isinstance(args, list) else []
        return shlex.join([current["command"], *words])
    return "an entry that starts no command"


def _read(path: Path) -> tuple[str, bool] | None:
    """The file's text and whether it began with a byte order mark; None when there is none."""
    try:
        return inputs.read_text(path, max_bytes=inputs.MAX_HOST_FILE_BYTES, what="host file")
    except FileNotFoundError:
        return None
    except inputs.InputError as exc:
        raise HostFileError(path, exc.reason) from None


def _parse(host: Host, path: Path, text: str) -> tuple[dict[str, Any], bool]:
    """The document, and whether it is strict JSON or TOML that can be written back whole
    (a JSON file with comments, which VS Code and Gemini CLI accept, can only be read).
    NaN and infinite numbers are refused: a host reads them differently or not at all, and
    a rewrite could not give them back as they were written."""
    fmt: inputs.Format = "toml" if host.toml else "json"
    if not host.toml and not text.strip():
        return {}, True
    strict = True
    try:
        data = inputs.parse(text, fmt, what="host file", finite=True)
    except inputs.InputError as exc:
        if host.toml or exc.code != "invalid":
            raise HostFileError(path, f"{exc.reason}; fix it first") from None
        try:
            data = inputs.load_json(_strip_jsonc(text), what="host file", finite=True)
        except inputs.InputError as again:
            raise HostFileError(path, f"{(exc if again.code == 'invalid' else again).reason}; "
                                "fix it first") from None
        strict = False
    if not isinstance(data, dict):
        raise HostFileError(path, "it does not hold a JSON object")
    return data, strict


def _servers(host: Host, path: Path, data: dict[str, Any]) -> dict[str, Any]:
    servers = data.get(host.servers_key, {})
    if not isinstance(servers, dict):
        raise HostFileError(path, f"its {host.servers_key!r} is not a table of servers")
    return servers


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (JSONC) as plain JSON; strings are kept whole.
    One pass, each character looked at once: text left unterminated (a string, a block
    comment) is kept as it is and fails as JSON."""
    out: list[str] = []
    position, size = 0, len(text)
    while position < size:
        found = _JSONC_MARKS.search(text, position)
        if found is None:
            out.append(text[position:])
            break
        out.append(text[position:found.start()])
        mark, position = found.group(), found.end()
        if mark == '"':
            end = _STRING_END.match(text, position)
            stop = size if end is None else end.end()
            out.append(text[found.start():stop])
            position = stop
        elif mark == "//":
            end_of_line = text.find("\n", position)
            position = size if end_of_line < 0 else end_of_line
        elif mark == "/*":
            close = text.find("*/", position)
            if close < 0:
                out.append(text[found.start():])
                break
            position = close + 2
        else:  # a comma: dropped when only blanks and comments stand before `}` or `]`
            following = _strip_jsonc_head(text, position)
            if following not in ("}", "]"):
                out.append(mark)
    return "".join(out)


_JSONC_MARKS = re.compile(r'"|//|/\*|,')
_STRING_END = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BLANKS = re.compile(r"\s*")


def _strip_jsonc_head(text: str, position: int) -> str:
    """The first character after `position` that is not a blank or inside a comment."""
    while True:
        position = _BLANKS.match(text, position).end()  # type: ignore[union-attr]
        if text.startswith("//", position):
            end_of_line = text.find("\n", position)
            if end_of_line < 0:
                return ""
            position = end_of_line
        elif text.startswith("/*", position):
            close = text.find("*/", position + 2)
            if close < 0:
                return ""
            position = close + 2
        else:
            return text[position:position + 1]


# The keys of an entry that choose another transport than stdio: a rewrite to our command
# drops them, or the host would go on starting (or calling) what they name.
_OTHER_TRANSPORT = frozenset({"type", "url", "httpUrl", "serverUrl", "headers", "transport"})


def _merged_entry(host: Host, current: Any, server: ServerCommand) -> dict[str, Any]:
    """Our entry, keeping the keys of the one it replaces that choose no transport (env,
    cwd, timeouts: the user's)."""
    kept = {key: value for key, value in current.items() if key not in _OTHER_TRANSPORT} \
        if isinstance(current, dict) else {}
    return {**kept, **entry(host, server)}


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class _Member:
    key: str
    start: int  # where the member's key begins
    value_start: int
    value_end: int


def _members(text: str, opening: int) -> tuple[list[_Member], int]:
    """The members of the JSON object whose `{` is at `opening` (in text already parsed
    whole), and the index of its `}`."""
    members: list[_Member] = []
    position = _skip(text, opening + 1)
    if text[position] == "}":
        return members, position
    while True:
        key, after = _DECODER.raw_decode(text, position)
        value_start = _skip(text, _skip(text, after) + 1)  # past the colon
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, position, value_start, value_end))
        position = _skip(text, value_end)
        if text[position] == "}":
            return members, position
        position = _skip(text, position + 1)  # past the comma


def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]


def _json_merge(host: Host, path: Path, text: str, data: dict[str, Any],
                server: ServerCommand) -> str:
    """The file's text with our entry set: inserted as the last member of the servers object
    (made if missing), or written over the value of the entry of that name. Every other byte
    stays as it was; the result is read back and must equal the old document plus that
    change alone, or nothing is written."""
    indent_found = re.search(r"^\{[ \t]*\r?\n([ \t]+)\S", text)
    indent = indent_found.group(1) if indent_found else "  "
    newline = "\r\n" if "\r\n" in text else "\n"
    servers = data.get(host.servers_key)
    merged = _merged_entry(host, (servers or {}).get(SERVER_NAME), server)
    expected = copy.deepcopy(data)
    expected.setdefault(host.servers_key, {})[SERVER_NAME] = merged

    def laid_out(value: Any, depth: int) -> str:
        return _json_text(value, indent, depth).replace("\n", newline)

    opening = _skip(text, 0)
    top, top_close = _members(text, opening)
    holder = next((m for m in top if m.key == host.servers_key), None)
    if holder is None:
        updated = _insert(text, top, opening, top_close, host.servers_key,
                          laid_out({SERVER_NAME: merged}, 1), indent, newline)
    else:
        inner, inner_close = _members(text, holder.value_start)
        ours = next((m for m in inner if m.key == SERVER_NAME), None)
        if ours is None:
            updated = _insert(text, inner, holder.value_start, inner_close, SERVER_NAME,
                              laid_out(merged, 2), indent * 2, newline, indent)
        else:
            updated = text[:ours.value_start] + laid_out(merged, 2) + text[ours.value_end:]
    try:
        reread = inputs.load_json(updated, what="host file", finite=True)
    except inputs.InputError:
        reread = None
    if reread != expected:
        raise HostFileError(path, f"its {host.servers_key!r} is written in a form that cannot "
                            f"be extended in place; add the entry that `skillindex hosts "
                            f"{host.key}` prints by hand")
    return updated


def _insert(text: str, members: list[_Member], opening: int, closing: int, key: str,
            value: str, indent: str, newline: str, outer: str = "") -> str:
    """`text` with the member `key: value` added last to the object at `opening`."""
    member = f"{newline}{indent}{_json_text(key, indent)}: {value}"
    if members:
        return text[:members[-1].value_end] + "," + member + text[members[-1].value_end:]
    return text[:opening + 1] + member + newline + outer + text[closing:]


def _json_text(value: Any, indent: str, depth: int = 0) -> str:
    """JSON laid out as people write these files: an object a member a line, an array of
    strings and numbers on one line (a command's arguments read as a command line)."""
    if isinstance(value, dict) and value:
        inner = indent * (depth + 1)
        members = (f"{inner}{_json_text(str(key), indent)}: {_json_text(item, indent, depth + 1)}"
                   for key, item in value.items())
        return "{\n" + ",\n".join(members) + "\n" + indent * depth + "}"
    if isinstance(value, list) and value and any(isinstance(i, dict | list) for i in value):
        inner = indent * (depth + 1)
        items = (inner + _json_text(item, indent, depth + 1) for item in value)
        return "[\n" + ",\n".join(items) + "\n" + indent * depth + "]"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(item, indent) for item in value) + "]"
    return escape.json_safe(json.dumps(value, ensure_ascii=False))


def _toml_merge(path: Path, text: str, data: dict[str, Any], current: dict[str, Any] | None,
                server: ServerCommand) -> str:
    """The file's text with the entry appended as a table, or with `command` and `args` of the
    existing table replaced in place; every other line stays as it was. The result is read back
    and must equal the old document plus that change alone, or nothing is written."""
    newline = "\r\n" if "\r\n" in text else "\n"
    expected = copy.deepcopy(data)
    servers = expected.setdefault("mcp_servers", {})
    if current is None:
        servers[SERVER_NAME] = {"command": server.command, "args": list(server.args)}
        ending = "" if text.endswith("\n") else newline
        updated = text + ending + newline + _toml_table(server).replace("\n", newline)
    else:
        servers[SERVER_NAME] = {**current, "command": server.command, "args": list(server.args)}
        updated = _toml_edit(path, text, server, newline)
    try:
        reread = inputs.load_toml(updated, what="host file", finite=True)
    except inputs.InputError:
        reread = None
    if reread != expected:
        raise HostFileError(path, f"its [mcp_servers] (or [mcp_servers.{SERVER_NAME}]) is "
                            "written in a form that cannot be extended without rewriting it; "
                            f"add the table that `skillindex hosts codex` prints by hand")
    return updated


_TOML_HEADER = re.compile(r"\s*\[")
_OUR_HEADER = re.compile(rf"""\s*\[\s*mcp_servers\s*\.\s*(?:{SERVER_NAME}|"{SERVER_NAME}"|
                         '{SERVER_NAME}')\s*\]\s*(?:\#.*)?$""", re.VERBOSE)


def _toml_edit(path: Path, text: str, server: ServerCommand, newline: str) -> str:
    """`command` and `args` of `[mcp_servers.skillindex]` replaced (or added under its header)."""
    lines = text.splitlines(keepends=True)
    start = next((n for n, line in enumerate(lines) if _OUR_HEADER.match(line)), None)
    if start is None:
        raise HostFileError(path, f"its {SERVER_NAME!r} server is not a [mcp_servers."
                            f"{SERVER_NAME}] table (an inline table or dotted keys); change "
                            "its command and args by hand")
    end = next((n for n in range(start + 1, len(lines)) if _TOML_HEADER.match(lines[n])),
               len(lines))
    values = {"command": _toml_string(server.command), "args": _toml_array(server.args)}
    for key in ("args", "command"):  # command first in the end, as an added table has it
        span = _toml_key_span(lines, start + 1, end, key)
        line = f"{key} = {values[key]}{newline}"
        if span is None:
            lines.insert(start + 1, line)
            end += 1
        else:
            indent = re.match(r"[ \t]*", lines[span[0]])
            lines[span[0]:span[1]] = [(indent.group() if indent else "") + line]
            end -= span[1] - span[0] - 1
    return "".join(lines)


_MAX_VALUE_LINES = 1_000


def _toml_key_span(lines: list[str], start: int, end: int, key: str) -> tuple[int, int] | None:
    """The lines [first, last + 1) holding `key = value` in a table's body: the shortest run
    of lines from the key's that reads as TOML (a value may span lines, as arrays do)."""
    pattern = re.compile(rf"""\s*(?:{key}|"{key}"|'{key}')\s*=""")
    for first in range(start, end):
        if not pattern.match(lines[first]):
            continue
        # A value of more lines than this is not a command line: the search stays linear.
        for last in range(first, min(end, first + _MAX_VALUE_LINES)):
            try:
                if key in inputs.load_toml("".join(lines[first:last + 1]), what="host file"):
                    return first, last + 1
            except inputs.InputError:
                continue
    return None


def _toml_table(server: ServerCommand) -> str:
    return (f"[mcp_servers.{SERVER_NAME}]\ncommand = {_toml_string(server.command)}\n"
            f"args = {_toml_array(server.args)}\n")


def _toml_array(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_toml_string, values)) + "]"


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                 "\r": "\\r"}


def _toml_escape(char: str) -> str:
    if char in _TOML_ESCAPES:
        return _TOML_ESCAPES[char]
    code = ord(char)
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _toml_string(value: str) -> str:
    """A TOML basic string: quote, backslash and every character that is not printable (the
    controls TOML forbids raw, and what a terminal must not receive) escaped."""
    if value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return '"' + "".join(char if char.isprintable() and char not in '"\\'
                         else _toml_escape(char) for char in value) + '"'
