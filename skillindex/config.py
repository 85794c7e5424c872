"""Settings from a TOML file and the environment; the only module that reads os.environ."""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from skillindex import inputs
from skillindex.errors import ConfigError
from skillindex.model import Limits, RiskPolicy, Scope, Validation

COLLISION_POLICIES = ("precedence", "reject-ambiguous", "qualify", "keep-all")
DEFAULT_INDEX = "default"
DEFAULT_REINDEX_TIMEOUT_S = 600.0
DEFAULT_AUDIT_LOCK_TIMEOUT_S = 10.0
# The longest wait PostgreSQL's lock_timeout (an int4 of milliseconds) can express, ~24.8 days.
MAX_REINDEX_TIMEOUT_S = (2**31 - 1) // 1000
INT32 = (-(2**31), 2**31 - 1)  # the store keeps precedence and max_depth in INTEGER columns
# The allowed range of every whole-number setting: what the store and the system calls can hold.
INTEGER_RANGES = {
    "precedence": INT32,
    "max_depth": (1, INT32[1]),
    "max_skill_files": (1, INT32[1]),
    "max_file_bytes": (1, 2**63 - 1),
    "max_skill_bytes": (1, 2**63 - 1),
    "catalog_usage_days": (1, 36_500),
    "catalog_entry_chars": (16, 1 << 20),
    "max_archive_files": (1, 1_000_000),
    "max_archive_bytes": (1, 2**63 - 1),
}
MIB = 1 << 20
# The settings whose strings are globs on skill names (compiled by inputs.compile_glob).
GLOB_SETTINGS = frozenset({"ignored_skills", "include_skills", "pinned", "names_only",
                           "manual_only"})
# URL roots rank below every local root unless their entry says otherwise.
REMOTE_PRECEDENCE = -100
# `[serve]`: the limits of `serve --http` per principal (0 in the file is no limit).
SERVE_RANGES: dict[str, tuple[float, float]] = {
    "requests_per_second": (0.0, 1e6), "bytes_per_minute": (0, 2**63 - 1),
    # The bounds before authentication (docs/serving.md, "Bounds"): these are never off.
    "peer_requests_per_second": (0.0, 1e6), "max_connections": (0, 1 << 20),
    "max_connections_per_peer": (0, 1 << 20), "header_timeout": (0.1, 3600.0),
    "body_timeout": (0.1, 3600.0), "max_body_bytes": (1024, 1 << 30),
    "max_json_depth": (2, 512), "refusals_per_minute": (1, 1_000_000),
    "introspection_concurrency": (1, 1024)}


@dataclass(frozen=True, slots=True)
class Environment:
    """Where home, the working directory and the XDG folders are; injectable for tests."""

    home: Path
    cwd: Path
    config_home: Path
    data_home: Path
    codex_home: Path | None = None
    config_file: str | None = None  # SKILLINDEX_CONFIG
    database: str | None = None  # SKILLINDEX_DB
    # SKILLINDEX_CLIENT_SECRET: `serve --introspect`'s secret at the authorization server,
    # kept out of the command line, which other users of the machine can read.
    client_secret: str | None = field(default=None, repr=False)

    @classmethod
    def from_os(cls, *, cwd: Path | str | None = None,
                environ: Mapping[str, str] | None = None) -> Environment:
        env = os.environ if environ is None else environ
        home = Path(env.get("HOME") or Path.home())
        codex = env.get("CODEX_HOME")
        return cls(
            home=home,
            cwd=Path(cwd).absolute() if cwd is not None else Path.cwd(),
            config_home=Path(env.get("XDG_CONFIG_HOME") or home / ".config"),
            data_home=Path(env.get("XDG_DATA_HOME") or home / ".local" / "share"),
            codex_home=Path(codex) if codex else None,
            config_file=env.get("SKILLINDEX_CONFIG") or None,
            database=env.get("SKILLINDEX_DB") or None,
            client_secret=env.get("SKILLINDEX_CLIENT_SECRET") or None,
        )


@dataclass(frozen=True, slots=True)
class RootConfig:
    """An explicit `[[roots]]` entry as written; paths are resolved by the providers module.
    A root with `url` is a publisher's `.well-known` index, indexed from its verified cache."""

    path: str
    scope: Scope = Scope.USER
    provider: str = "custom"
    precedence: int = 0
    max_depth: int = 1
    require_description: bool = True
    validation: Validation | None = None
    allow_hardlinks: bool | None = None  # None: the [skills] setting decides
    risk_policy: RiskPolicy | None = None  # None: the [skills] setting decides
    url: str | None = None
    # Plain http:// is refused off loopback unless the root says so.
    allow_http: bool = False
    # An archive entry may unpack to at most this many files and bytes.
    max_archive_files: int = 1000
    max_archive_bytes: int = 50 * MIB
    # `skill.oms.sig` (OpenSSF model signing): verified when present (record), also required
    # (require), or not looked at (off); by a public key or a certificate chain; and signers
    # outside `signers` (when not empty) fail.
    signatures: str = "record"
    signature_key: str | None = None
    signature_certificates: tuple[str, ...] = ()
    signers: tuple[str, ...] = ()


CATALOG_ORDERS = ("precedence", "usage")


@dataclass(frozen=True, slots=True)
class CatalogModes:
    """`[skills.catalog]`: globs on skill names that change how the catalog shows a skill."""

    pinned: tuple[str, ...] = ()  # always first, always in full
    names_only: tuple[str, ...] = ()  # never with a description
    manual_only: tuple[str, ...] = ()  # never in the catalog; `read` and `/skill:` still work


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """What one principal, and one peer before it is known, may ask of `serve --http`; None
    is no limit."""

    requests_per_second: float | None = 20.0
    bytes_per_minute: int | None = 64 * MIB
    peer_requests_per_second: float | None = 50.0
    max_connections: int | None = 1024
    max_connections_per_peer: int | None = 64
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_body_bytes: int = MIB
    max_json_depth: int = 64
    refusals_per_minute: int = 10  # audit rows of one peer's refused reads before a summary
    introspection_concurrency: int = 8


@dataclass(frozen=True, slots=True)
class Settings:
    enabled: bool = True
    custom_directories: tuple[str, ...] = ()
    enable_skill_commands: bool = True
    ignored_skills: tuple[str, ...] = ()
    include_skills: tuple[str, ...] = ()
    enable_codex_user: bool = True
    enable_claude_user: bool = True
    enable_claude_project: bool = True
    enable_native_user: bool = True
    enable_native_project: bool = True
    collision_policy: str = "precedence"
    validation: Validation | None = None  # overrides every root's default mode when set
    native_dir: str = ".xcsh"
    context_files: tuple[str, ...] = ("XCSH.md",)
    # Without a search text, the catalog lists winners by precedence or by recent use.
    catalog_order: str = "precedence"
    catalog_usage_days: int = 30
    # A catalog that leaves skills out ends with a line saying how many and what finds them.
    catalog_search_hint: bool = True
    catalog: CatalogModes = CatalogModes()
    # Other hosts' frontmatter and sidecars (when_to_use, paths, alwaysApply, user-invocable,
    # argument placeholders, Codex's agents/openai.yaml) steer the catalog and `/skill:`;
    # off, skillindex does what the seed system does with them: nothing.
    dialects: bool = False
    # With dialects, the most characters of one catalog entry's description and when_to_use,
    # counted as rendered (Claude Code caps the two at 1,536 characters a skill).
    catalog_entry_chars: int = 1536
    # Opt-in presets for the folders of hosts the seed system does not read.
    enable_gemini: bool = False
    enable_copilot: bool = False
    enable_cursor: bool = False
    enable_opencode: bool = False
    presets: bool = True
    roots: tuple[RootConfig, ...] = ()
    index_name: str = DEFAULT_INDEX
    # How long a reindex waits for another reindex of the same index before giving up.
    reindex_timeout: float = DEFAULT_REINDEX_TIMEOUT_S
    # How long an audited read waits for the audit chain's lock on PostgreSQL before it fails
    # (another transaction appending, or holding the lock); 0 does not wait.
    audit_lock_timeout: float = DEFAULT_AUDIT_LOCK_TIMEOUT_S
    # Bounded work, as the MCP skills extension bounds it: larger files are recorded by size and
    # never read; larger skills are rejected.
    max_file_bytes: int = 16 * MIB
    max_skill_files: int = 512
    max_skill_bytes: int = 16 * MIB
    # A hard-linked file may also be a file outside the skill: not disclosed unless allowed.
    allow_hardlinks: bool = False
    # Skills with risk findings: warned about, or withheld until `skillindex trust` approves.
    risk_policy: RiskPolicy = RiskPolicy.WARN
    # Advisory and revocation feeds (absolute paths or https URLs once parsed): a skill they
    # name is withheld everywhere. URLs are fetched only by `skillindex advisories update`.
    advisories: tuple[str, ...] = ()
    serve: ServeLimits = ServeLimits()
    source: Path | None = field(default=None, compare=False)

    @property
    def limits(self) -> Limits:
        return Limits(self.max_file_bytes, self.max_skill_files, self.max_skill_bytes)


# The seed system's camelCase spellings (and its `Pi` name for the native provider).
ALIASES = {
    "customDirectories": "custom_directories",
    "enableSkillCommands": "enable_skill_commands",
    "ignoredSkills": "ignored_skills",
    "includeSkills": "include_skills",
    "enableCodexUser": "enable_codex_user",
    "enableClaudeUser": "enable_claude_user",
    "enableClaudeProject": "enable_claude_project",
    "enableNativeUser": "enable_native_user",
    "enableNativeProject": "enable_native_project",
    "enablePiUser": "enable_native_user",
    "enablePiProject": "enable_native_project",
    "enable_pi_user": "enable_native_user",
    "enable_pi_project": "enable_native_project",
    "collisionPolicy": "collision_policy",
    "nativeDir": "native_dir",
    "contextFiles": "context_files",
}
_SKILL_KEYS = {f.name for f in fields(Settings)} - {"roots", "source", "index_name",
                                                    "reindex_timeout", "audit_lock_timeout",
                                                    "serve"}
_TOP_LEVEL_KEYS = {"skills", "roots", "index", "reindex_timeout", "audit_lock_timeout", "serve"}
_ROOT_KEYS = {f.name for f in fields(RootConfig)}


def default_config_path(env: Environment) -> Path:
    return env.config_home / "skillindex" / "config.toml"


def config_path(explicit: str | Path | None, env: Environment) -> tuple[Path | None, bool]:
    """The settings file to read and whether it must exist (it must when it was named)."""
    if explicit is not None:
        return Path(explicit).expanduser(), True
    if env.config_file:
        return Path(env.config_file).expanduser(), True
    return default_config_path(env), False


# What SQLAlchemy's SQLite driver converts from a URL's query, and to what: any other value of
# these (`?timeout=abc`, `?check_same_thread=maybe`) stops it with a ValueError.
_SQLITE_QUERY = {"timeout": "number", "detect_types": "integer", "cached_statements": "integer",
                 "check_same_thread": "boolean", "uri": "boolean", "isolation_level": "text"}
# What libpq takes as a whole number; the others it checks itself, with a message of its own.
_POSTGRESQL_QUERY = {"connect_timeout": "integer", "port": "integer", "keepalives": "integer",
                     "keepalives_idle": "integer", "keepalives_interval": "integer",
                     "keepalives_count": "integer", "tcp_user_timeout": "integer"}
_BOOLEANS = {"true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0"}


def check_database_url(value: str) -> None:
    """Refuse (ConfigError) a database URL its driver would choke on before connecting: bytes
    that are not UTF-8, a port that is not a number from 1 to 65535, a query key given twice,
    or a query value of the wrong kind for what the driver converts, NUL (itself or as `%00`,
    which the URL parser decodes) anywhere. A plain path is a SQLite file and any other path
    will do."""
    if "\0" in value or "%00" in value:
        raise ConfigError("the database URL or path holds NUL (or %00), which no file or "
                          "database name can hold")
    if "://" not in value:
        return
    scheme = value.split("://", 1)[0].lower()
    shown = f"database URL {scheme}://…"
    if scheme.split("+", 1)[0] not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(f"the {shown} is not one skillindex can use: only SQLite (a file "
                          "path or sqlite:///PATH) and PostgreSQL (postgresql://...) are "
                          "supported")
    try:
        value.encode("utf-8")
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except UnicodeEncodeError:
        raise ConfigError(f"the {shown} holds bytes that are not UTF-8") from None
    except ValueError as exc:
        raise ConfigError(f"the {shown} is malformed: {exc} (the port must be a number from "
                          "1 to 65535)") from None
    if port == 0:
        raise ConfigError(f"the {shown} names port 0; the port must be from 1 to 65535")
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    kinds = (_SQLITE_QUERY if scheme.startswith("sqlite") else
             _POSTGRESQL_QUERY if scheme.startswith("postgres") else {})
    for key, values in query.items():
        if len(values) > 1:
            raise ConfigError(f"the {shown} gives {key!r} {len(values)} times")
        kind = kinds.get(key)
        if kind is not None and not _of_kind(values[0], kind):
            raise ConfigError(f"the {shown} sets {key} to {values[0][:40]!r}, which is not "
                              f"{'an' if kind == 'integer' else 'a'} {kind}")


def _of_kind(text: str, kind: str) -> bool:
    if kind == "boolean":
        return text.strip().lower() in _BOOLEANS
    if kind == "integer":
        return text.strip().lstrip("+-").isdigit() and len(text) <= 19
    if kind == "number":
        try:
            return math.isfinite(float(text)) and float(text) >= 0
        except ValueError:
            return False
    return True


def database_url(explicit: str | None, env: Environment) -> str:
    """A URL, or a plain path meaning a SQLite file; else the default file under XDG_DATA_HOME."""
    if explicit is not None and not explicit.strip():
        # An empty --db is a mistake (an unset variable in a script), not a wish for the default.
        raise ConfigError("the database must be a URL or a file path, not empty")
    value = explicit or env.database
    if not value:
        return f"sqlite:///{env.data_home / 'skillindex' / 'index.sqlite'}"
    try:
        check_database_url(value)
    except ConfigError as exc:
        if explicit:
            raise
        raise ConfigError(f"$SKILLINDEX_DB: {exc.message}") from None
    if "://" in value:
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = env.cwd / path
    if path.is_dir():
        raise ConfigError(f"the database {path} is a folder: give a SQLite file (such as "
                          f"{path / 'index.sqlite'}) or a database URL")
    return f"sqlite:///{path}"


def load_settings(explicit: str | Path | None, env: Environment) -> Settings:
    path, required = config_path(explicit, env)
    if path is None:
        return Settings()
    if os.path.abspath(path) == os.devnull:
        # `--config /dev/null`: the usual way to say "no settings file", read as an empty one.
        return Settings(source=path)
    try:
        document = inputs.read_document(path, "toml", max_bytes=inputs.MAX_SETTINGS_BYTES,
                                        what="settings file")
    except FileNotFoundError:
        if required:
            raise ConfigError("settings file not found", source=str(path)) from None
        return Settings()
    return replace(parse_settings(document.data, source=str(path)), source=path)


def parse_settings(document: Mapping[str, Any], *, source: str = "<settings>") -> Settings:
    """Build Settings from a parsed TOML document; any unknown key is an error that names it."""
    _refuse_nul(document, source)
    unknown = set(document) - _TOP_LEVEL_KEYS
    if unknown:
        raise ConfigError(f"unknown top-level key {sorted(unknown)[0]!r} (expected [skills], "
                          "[[roots]], [serve], index, reindex_timeout or audit_lock_timeout)",
                          source=source,
                          key=sorted(unknown)[0])
    values: dict[str, Any] = {}
    skills = document.get("skills", {})
    if not isinstance(skills, Mapping):
        raise ConfigError("[skills] must be a table", source=source, key="skills")
    spelled: dict[str, str] = {}
    for key, value in skills.items():
        name = ALIASES.get(key, key)
        if name not in _SKILL_KEYS:
            raise ConfigError(f"unknown setting skills.{key}{_suggest(key)}", source=source,
                              key=key)
        if name in spelled:
            # Two spellings of one setting: which one wins would depend on the order in the file.
            raise ConfigError(f"skills.{spelled[name]} and skills.{key} are the same setting; "
                              "keep one", source=source, key=key)
        spelled[name] = key
        if name == "catalog":
            values[name] = _catalog_modes(value, source)
            continue
        values[name] = _convert(name, value, Settings.__dataclass_fields__[name].default,
                                source, f"skills.{key}")
    if "index" in document:
        values["index_name"] = check_index_name(document["index"], source=source)
    for key in ("reindex_timeout", "audit_lock_timeout"):
        if key in document:
            values[key] = _seconds(document[key], source, key)
    if "serve" in document:
        values["serve"] = _serve_limits(document["serve"], source)
    roots = document.get("roots", [])
    if not isinstance(roots, list):
        raise ConfigError("roots must be an array of tables ([[roots]])", source=source,
                          key="roots")
    values["roots"] = tuple(_root(entry, number, source) for number, entry in enumerate(roots, 1))
    settings = Settings(**values)
    if settings.collision_policy not in COLLISION_POLICIES:
        raise ConfigError(
            f"skills.collision_policy must be one of {', '.join(COLLISION_POLICIES)}, not "
            f"{settings.collision_policy!r}", source=source, key="collision_policy")
    if not settings.native_dir or "/" in settings.native_dir:
        raise ConfigError("skills.native_dir must be a single directory name", source=source,
                          key="native_dir")
    if settings.catalog_order not in CATALOG_ORDERS:
        raise ConfigError(
            f"skills.catalog_order must be one of {', '.join(CATALOG_ORDERS)}, not "
            f"{settings.catalog_order!r}", source=source, key="catalog_order")
    for file_name in settings.context_files:
        if not file_name or "/" in file_name or file_name in (".", ".."):
            raise ConfigError(f"skills.context_files holds {file_name!r}; each entry must be a "
                              "file name such as AGENTS.md", source=source, key="context_files")
    if settings.advisories:
        settings = replace(settings, advisories=tuple(
            _feed_source(entry, source) for entry in settings.advisories))
    return settings


SIGNATURE_POLICIES = ("off", "record", "require")


def _beside(entry: str, source: str) -> str:
    """A path from the settings made absolute: `~` expanded, relative to the file's folder."""
    path = Path(entry).expanduser()
    if not path.is_absolute():
        folder = Path(source).parent if not source.startswith("<") else Path.cwd()
        path = folder / path
    return str(path)


def _feed_source(entry: str, source: str) -> str:
    """A feed as the store names it: a URL as given, a path made absolute (relative to the
    settings file's folder, `~` expanded)."""
    if "://" in entry:
        if not entry.startswith(("https://", "http://")):
            raise ConfigError(f"skills.advisories holds {entry!r}; a feed is a path or an "
                              "http(s) URL", source=source, key="advisories")
        return entry
    if not entry.strip():
        raise ConfigError("skills.advisories holds an empty entry", source=source,
                          key="advisories")
    return _beside(entry, source)


def _refuse_nul(document: Mapping[str, Any], source: str) -> None:
    """No setting may hold NUL (U+0000), in a key or a value at any depth: no path, name or
    glob can (the system calls and PostgreSQL refuse it), and it would only cut text short."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                label = f"{where}.{key}" if where else str(key)
                if "\0" in str(key):
                    raise ConfigError(f"setting {label!r} holds NUL (U+0000)", source=source,
                                      key=str(key))
                stack.append((label, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{number}]", item) for number, item in enumerate(value, 1))
        elif isinstance(value, str) and "\0" in value:
            raise ConfigError(f"{where} holds NUL (U+0000), which no path or name can hold",
                              source=source, key=where.rsplit(".", 1)[-1])


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, sorted(_SKILL_KEYS | set(ALIASES)), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def check_index_name(value: Any, *, source: str | None = None) -> str:
    """An index name as stored (a shared database keeps at most 100 characters of it)."""
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > 100:
        raise ConfigError("index must be a non-empty name of at most 100 characters",
                          source=source, key="index")
    return value.strip()


def _seconds(value: Any, source: str, key: str) -> float:
    # `not 0 <= value <= MAX` also refuses NaN; infinity and huge numbers exceed MAX.
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 <= value <= MAX_REINDEX_TIMEOUT_S):
        raise ConfigError(f"{key} must be a number of seconds from 0 to "
                          f"{MAX_REINDEX_TIMEOUT_S}", source=source, key=key)
    return float(value)


def _integer(value: Any, name: str, source: str, label: str) -> int:
    low, high = INTEGER_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{label} must be a whole number from {low} to {high}",
                          source=source, key=name)
    return value


def _convert(name: str, value: Any, default: Any, source: str, label: str) -> Any:
    if name == "validation":
        return _enum(Validation, value, source, label)
    if name == "risk_policy":
        return _enum(RiskPolicy, value, source, label)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{label} must be true or false", source=source, key=name)
        return value
    if isinstance(default, int):
        return _integer(value, name, source, label)
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{label} must be a list of strings", source=source, key=name)
        if name in GLOB_SETTINGS:
            for pattern in value:
                inputs.check_glob(pattern, source=source, key=label)
        return tuple(value)
    if not isinstance(value, str):
        raise ConfigError(f"{label} must be a string", source=source, key=name)
    return value


def _serve_limits(value: Any, source: str) -> ServeLimits:
    if not isinstance(value, Mapping):
        raise ConfigError("[serve] must be a table", source=source, key="serve")
    limits: dict[str, Any] = {}
    for key, number in value.items():
        if key not in SERVE_RANGES:
            raise ConfigError(f"unknown setting serve.{key} (expected "
                              f"{', '.join(SERVE_RANGES)})", source=source, key=key)
        low, high = SERVE_RANGES[key]
        whole = isinstance(low, int)
        kinds = int if whole else int | float
        if isinstance(number, bool) or not isinstance(number, kinds) or not (
                low <= number <= high):
            raise ConfigError(f"serve.{key} must be a {'whole ' if whole else ''}number from "
                              f"{low:g} to {high:g}{' (0: no limit)' if low == 0 else ''}",
                              source=source, key=key)
        limits[key] = (int(number) if whole else float(number)) or None
    return ServeLimits(**limits)


def _catalog_modes(value: Any, source: str) -> CatalogModes:
    if not isinstance(value, Mapping):
        raise ConfigError("[skills.catalog] must be a table", source=source, key="catalog")
    known = {f.name for f in fields(CatalogModes)}
    globs: dict[str, tuple[str, ...]] = {}
    for key, item in value.items():
        if key not in known:
            raise ConfigError(f"unknown setting skills.catalog.{key} (expected "
                              f"{', '.join(sorted(known))})", source=source, key=key)
        globs[key] = _convert(key, item, (), source, f"skills.catalog.{key}")
    return CatalogModes(**globs)


def _enum(kind: Any, value: Any, source: str, label: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(member) for member in kind)
        raise ConfigError(f"{label} must be one of {allowed}, not {value!r}", source=source,
                          key=label.rsplit(".", 1)[-1]) from None


def _root(entry: Any, number: int, source: str) -> RootConfig:
    label = f"roots[{number}]"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{label} must be a table", source=source, key="roots")
    unknown = set(entry) - _ROOT_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"unknown setting {label}.{key}", source=source, key=key)
    if "url" in entry:
        if "path" in entry:
            raise ConfigError(f"{label} names both a path and a url: a root is one or the other",
                              source=source, key="url")
        values: dict[str, Any] = {"path": "", "url": _root_url(entry, label, source),
                                  "precedence": REMOTE_PRECEDENCE}
    elif not isinstance(entry.get("path"), str) or not entry["path"]:
        raise ConfigError(f"{label}.path (or url) is required and must be a string",
                          source=source, key="path")
    else:
        values = {"path": entry["path"]}
    if "scope" in entry:
        values["scope"] = _enum(Scope, entry["scope"], source, f"{label}.scope")
    if "validation" in entry:
        values["validation"] = _enum(Validation, entry["validation"], source,
                                     f"{label}.validation")
    if "risk_policy" in entry:
        values["risk_policy"] = _enum(RiskPolicy, entry["risk_policy"], source,
                                      f"{label}.risk_policy")
    for key in ("provider",):
        if key in entry:
            if not isinstance(entry[key], str) or not entry[key]:
                raise ConfigError(f"{label}.{key} must be a non-empty string", source=source,
                                  key=key)
            values[key] = entry[key]
    for key in ("precedence", "max_depth", "max_archive_files", "max_archive_bytes"):
        if key in entry:
            values[key] = _integer(entry[key], key, source, f"{label}.{key}")
    if "signatures" in entry:
        if entry["signatures"] not in SIGNATURE_POLICIES:
            raise ConfigError(f"{label}.signatures must be one of "
                              f"{', '.join(SIGNATURE_POLICIES)}", source=source,
                              key="signatures")
        values["signatures"] = entry["signatures"]
    if "signature_key" in entry:
        if not isinstance(entry["signature_key"], str) or not entry["signature_key"]:
            raise ConfigError(f"{label}.signature_key must be a path", source=source,
                              key="signature_key")
        values["signature_key"] = _beside(entry["signature_key"], source)
    for key in ("signature_certificates", "signers"):
        if key in entry:
            items = entry[key]
            if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
                raise ConfigError(f"{label}.{key} must be a list of strings", source=source,
                                  key=key)
            values[key] = tuple(_beside(i, source) for i in items) \
                if key == "signature_certificates" else tuple(items)
    for key in ("require_description", "allow_hardlinks", "allow_http"):
        if key in entry:
            if not isinstance(entry[key], bool):
                raise ConfigError(f"{label}.{key} must be true or false", source=source, key=key)
            values[key] = entry[key]
    return RootConfig(**values)


def _root_url(entry: Mapping[str, Any], label: str, source: str) -> str:
    """The origin a URL root fetches from: https, or http on loopback (anywhere with
    `allow_http`); no credentials, query or fragment, which an index URL never needs."""
    url = entry["url"]
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{label}.url must be a non-empty string", source=source, key="url")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"{label}.url must be an https:// URL, not {url!r}", source=source,
                          key="url")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError(f"{label}.url must not hold credentials, a query or a fragment",
                          source=source, key="url")
    allow_http = entry.get("allow_http", False)
    if parts.scheme == "http" and not allow_http and not is_loopback(parts.hostname):
        raise ConfigError(f"{label}.url: plain http:// is allowed only on loopback "
                          "(set allow_http = true to fetch it anyway)", source=source, key="url")
    return url.rstrip("/")


def is_loopback(host: str) -> bool:
    """Whether a host names this machine: `localhost` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name may resolve anywhere: treated as reaching the network
