"""Turns settings into the ordered roots that apply to a working directory (the seed's presets)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillindex import inputs
from skillindex.config import Environment, RootConfig, Settings
from skillindex.index.policy import reserved_in, unsafe_name
from skillindex.model import (
    RemoteSource,
    RootSpec,
    ScanProblem,
    Scope,
    SigningPolicy,
    Validation,
)

NATIVE, CLAUDE, CLAUDE_PLUGINS, AGENTS, CODEX, CUSTOM = (
    "native", "claude", "claude-plugins", "agents", "codex", "custom")
REMOTE = "url"  # a `[[roots]] url = ...` root: a publisher's .well-known index
# Opt-in presets for hosts the seed system does not read (named as `skillindex hosts` names
# them; copilot is the folders of VS Code's and the Copilot CLI's agent).
GEMINI, COPILOT, CURSOR, OPENCODE = "gemini", "copilot", "cursor", "opencode"
# Below every preset of the seed: switching one on never changes which of the seed's roots
# wins a name, it only adds skills (and a skill kept in several hosts' folders is one winner).
HOST_PRIORITY = 60
PRIORITY = {NATIVE: 100, CLAUDE: 80, CLAUDE_PLUGINS: 70, AGENTS: 70, CODEX: 70,
            GEMINI: HOST_PRIORITY, COPILOT: HOST_PRIORITY, CURSOR: HOST_PRIORITY,
            OPENCODE: HOST_PRIORITY, CUSTOM: 0}
HOST_TOGGLES = {GEMINI: "enable_gemini", COPILOT: "enable_copilot", CURSOR: "enable_cursor",
                OPENCODE: "enable_opencode"}
# Presets whose roots share one precedence but are ordered by rule (project before user,
# nearest directory first), so two of their roots never tie with each other.
ORDERED_PROVIDERS = frozenset({NATIVE, CLAUDE, CLAUDE_PLUGINS, AGENTS, CODEX, *HOST_TOGGLES})
# Codex nests skills in groups (`skills/.system/...` aside, `skills/<group>/<skill>`).
CODEX_MAX_DEPTH = 3
# The seed walks at most this many ancestors when it looks for context files.
MAX_ANCESTORS = 20
# What collision_policy = qualify puts before a name; no plugin may be named so.
SCOPE_LABELS = frozenset(str(scope) for scope in Scope)
# installed_plugins.json lists a few dozen plugins; anything this large is not that file.
MAX_REGISTRY_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class RootPlan:
    """The roots for one working directory, in registration order, what could not be read,
    and the files whose content decides which roots there are (the plugin registry)."""

    roots: tuple[RootSpec, ...]
    problems: tuple[ScanProblem, ...] = ()
    sources: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class _Source:
    path: Path
    scope: Scope
    provider: str
    toggle: str | None  # the setting that switches it, None when it follows "any toggle on"
    name_prefix: str = ""


def normalize(path: str | Path, env: Environment) -> Path:
    """Absolute and normalized, `~` meaning the injected home; symlinks are kept as written."""
    text = str(path)
    if text == "~" or text.startswith("~/"):
        expanded = env.home / text[2:]
    else:
        expanded = Path(os.path.expanduser(text))
    if not expanded.is_absolute():
        expanded = env.cwd / expanded
    return Path(os.path.normpath(expanded))


def project_dirs(env: Environment) -> list[Path]:
    """cwd and its ancestors, nearest first, up to and including the repository root (the first
    directory holding `.git`) or home, whichever comes first; outside home and any repository,
    cwd alone (walking on to `/` would pick up whatever other users left in `/tmp` or `/srv`)."""
    cwd = Path(os.path.normpath(env.cwd))
    home = Path(os.path.normpath(env.home))
    walked: list[Path] = []
    for directory in (cwd, *cwd.parents):
        walked.append(directory)
        if directory == home or (directory / ".git").exists():
            return walked
        if len(walked) >= MAX_ANCESTORS:
            break
    return walked if home in cwd.parents else [cwd]


def environment(env: Environment | None, cwd: str | Path | None) -> Environment:
    """The environment a caller gave, else this process's; `cwd`, if given, in place of its
    working directory."""
    if env is None:
        return Environment.from_os(cwd=cwd)
    return env if cwd is None else replace(env, cwd=Path(cwd).absolute())


def project_top(env: Environment) -> Path:
    """The directory the globs of conditional skills are relative to: the repository root
    (the nearest ancestor holding `.git`), else the working directory."""
    top = project_dirs(env)[-1]
    return top if (top / ".git").exists() else Path(os.path.normpath(env.cwd))


def context_dirs(env: Environment) -> list[tuple[int, Path]]:
    """Where the seed looks for standalone context files, as (distance from cwd, directory):
    cwd and up to 19 ancestors, nearest first, leaving out directories whose own name is hidden
    (a `.codex/AGENTS.md` belongs to that tool's configuration, not to the project)."""
    cwd = Path(os.path.normpath(env.cwd))
    return [(depth, directory)
            for depth, directory in enumerate((cwd, *cwd.parents)[:MAX_ANCESTORS])
            if not directory.name.startswith(".")]


def _preset_sources(settings: Settings, env: Environment,
                    problems: list[ScanProblem]) -> Iterable[_Source]:
    home = env.home
    projects = project_dirs(env)
    native = settings.native_dir
    for directory in projects:
        yield _Source(directory / native / "skills", Scope.PROJECT, NATIVE,
                      "enable_native_project")
    yield _Source(home / native / "agent" / "skills", Scope.USER, NATIVE, "enable_native_user")
    for directory in projects:
        yield _Source(directory / ".claude" / "skills", Scope.PROJECT, CLAUDE,
                      "enable_claude_project")
    yield _Source(home / ".claude" / "skills", Scope.USER, CLAUDE, "enable_claude_user")
    for plugin, install_path in _installed_plugins(env, problems):
        yield _Source(install_path / "skills", Scope.PLUGIN, CLAUDE_PLUGINS, None, f"{plugin}:")
    for directory in projects:
        for name in (".agents", ".agent"):
            yield _Source(directory / name / "skills", Scope.PROJECT, AGENTS, None)
    for name in (".agents", ".agent"):
        yield _Source(home / name / "skills", Scope.USER, AGENTS, None)
    # Codex reads project skills from cwd only, and has no toggle for them (the seed's rule:
    # a source without a toggle of its own follows "any toggle on").
    yield _Source(env.cwd / ".codex" / "skills", Scope.PROJECT, CODEX, None)
    codex_home = env.codex_home or home / ".codex"
    yield _Source(codex_home / "skills", Scope.USER, CODEX, "enable_codex_user")
    yield from _host_sources(settings, env, projects)


def _host_sources(settings: Settings, env: Environment,
                  projects: list[Path]) -> Iterable[_Source]:
    """The opt-in presets, each where its host documents it; a preset that is off adds no
    root at all, so the seed's roots are exactly the seed's."""
    home = env.home
    if settings.enable_gemini:  # the workspace is the directory Gemini CLI runs in
        yield _Source(env.cwd / ".gemini" / "skills", Scope.PROJECT, GEMINI, None)
        yield _Source(home / ".gemini" / "skills", Scope.USER, GEMINI, None)
    if settings.enable_copilot:  # the repository's .github, and the user's ~/.copilot
        yield _Source(project_top(env) / ".github" / "skills", Scope.PROJECT, COPILOT, None)
        yield _Source(home / ".copilot" / "skills", Scope.USER, COPILOT, None)
    if settings.enable_cursor:
        yield _Source(env.cwd / ".cursor" / "skills", Scope.PROJECT, CURSOR, None)
        yield _Source(home / ".cursor" / "skills", Scope.USER, CURSOR, None)
    if settings.enable_opencode:  # OpenCode walks up to the repository, as the seed does
        for directory in projects:
            yield _Source(directory / ".opencode" / "skills", Scope.PROJECT, OPENCODE, None)
        yield _Source(env.config_home / "opencode" / "skills", Scope.USER, OPENCODE, None)


def plugin_registry(env: Environment) -> Path:
    """Claude Code's list of installed plugins, whose entries are plugin roots."""
    return env.home / ".claude" / "plugins" / "installed_plugins.json"


def plugin_name_problem(plugin: str) -> str | None:
    """Why `plugin` cannot prefix skill names (`<plugin>:<name>`); None when it can.

    It obeys the rules of a name (no `/`, control or invisible characters, none of the
    characters skill:// URIs reserve, no leading `.`), and it is not a qualifier: a scope label
    (`project`, `user`, `admin`, `plugin`, `builtin`), alone or as a dot-separated part (as in
    `custom.admin`), is what collision_policy = qualify puts before a name, so a plugin named
    so would take the qualified name of a skill of higher precedence."""
    if unsafe_name(plugin):
        return "has a name with '/', control or invisible characters"
    reserved = reserved_in(plugin)
    if reserved is not None:
        where = "starts with" if reserved == "." and plugin.startswith(".") else "holds"
        return f"has a name that {where} {reserved!r}, which skill:// URIs reserve"
    labels = sorted(set(plugin.split(".")) & SCOPE_LABELS)
    if labels:
        return (f"has a name that is or holds the scope label {labels[0]!r}, which qualified "
                "names reserve (collision_policy = qualify)")
    return None


def _installed_plugins(env: Environment, problems: list[ScanProblem]) -> list[tuple[str, Path]]:
    """(plugin name, install path) of every entry of Claude Code's installed_plugins.json:
    version 1 maps `name@marketplace` to one entry, version 2 to a list of entries."""
    registry = plugin_registry(env)

    def problem(message: str) -> None:
        problems.append(ScanProblem(registry.parent, registry, "plugins-unreadable", message))

    try:
        document = inputs.read_document(registry, "json", max_bytes=MAX_REGISTRY_BYTES,
                                        what="installed plugins file").data
    except FileNotFoundError:
        return []
    except inputs.InputError as exc:  # every command plans its roots: none may stop here
        problem("installed_plugins.json nests too deeply to read" if exc.code == "too-deep"
                else f"cannot read installed plugins: {exc.reason}")
        return []
    plugins = document.get("plugins") if isinstance(document, dict) else None
    if not isinstance(plugins, dict):
        problems.append(ScanProblem(registry.parent, registry, "plugins-unreadable",
                                    "installed_plugins.json has no 'plugins' table"))
        return []
    found: list[tuple[str, Path]] = []
    for key, entries in sorted(plugins.items()):
        # A plugin id is `name@marketplace`; a name may itself hold `@`, the marketplace not.
        plugin = str(key).rpartition("@")[0] or str(key)
        refused = plugin_name_problem(plugin)
        if refused is not None:
            problem(f"plugin {key!r} {refused}; its skills are left out")
            continue
        for entry in entries if isinstance(entries, list) else [entries]:
            install = entry.get("installPath") if isinstance(entry, dict) else None
            if not isinstance(install, str) or not install or "\x00" in install:
                problem(f"plugin {key!r} has an entry without a usable installPath")
                continue
            path = Path(install)
            if install == "~" or install.startswith("~/"):
                path = normalize(install, env)
            elif not path.is_absolute():
                path = registry.parent / path
            found.append((plugin, Path(os.path.normpath(path))))
    return found


def remote_root(env: Environment, url: str) -> Path:
    """The folder a URL root's verified skills are kept in and indexed from: one a URL,
    beside the default index."""
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    return env.data_home / "skillindex" / "remote" / key / "skills"


def missing_configured(specs: Sequence[RootSpec]) -> list[Path]:
    """The roots the settings name (`custom_directories`, `[[roots]]`) that do not exist: a
    typing error or a folder not made yet, where a preset's folder is often absent. A stat each."""
    return [spec.path for spec in specs
            if spec.provider not in PRIORITY or spec.provider == CUSTOM
            if spec.remote is None and spec.disabled_by is None and not spec.path.exists()]


def plan_roots(settings: Settings, env: Environment) -> RootPlan:
    """Presets in the seed's order (native, claude, claude-plugins, agents, codex), then
    `custom_directories`, then `[[roots]]`; a path already registered keeps its first entry."""
    problems: list[ScanProblem] = []
    toggles = {
        "enable_native_project": settings.enable_native_project,
        "enable_native_user": settings.enable_native_user,
        "enable_claude_project": settings.enable_claude_project,
        "enable_claude_user": settings.enable_claude_user,
        "enable_codex_user": settings.enable_codex_user,
    }
    any_toggle = any(toggles.values())
    specs: list[RootSpec] = []
    seen: set[Path] = set()

    def add(spec: RootSpec) -> None:
        if spec.path in seen:
            return
        seen.add(spec.path)
        specs.append(RootSpec(
            path=spec.path, scope=spec.scope, provider=spec.provider,
            precedence=spec.precedence, position=len(specs), max_depth=spec.max_depth,
            require_description=spec.require_description, validation=spec.validation,
            name_prefix=spec.name_prefix, disabled_by=spec.disabled_by,
            allow_hardlinks=spec.allow_hardlinks, risk_policy=spec.risk_policy,
            remote=spec.remote, signing=spec.signing))

    if settings.presets:
        sources = list(_preset_sources(settings, env, problems))
        # When cwd is home, `~/.claude/skills` is both a project and a user root; it is the
        # user's, so that enable_claude_user (not enable_claude_project) switches it.
        user_paths = {normalize(s.path, env) for s in sources if s.scope is not Scope.PROJECT}
        for source in sources:
            provider = source.provider
            if source.scope is Scope.PROJECT and normalize(source.path, env) in user_paths:
                continue
            if provider in HOST_TOGGLES:
                disabled_by = None  # planned only when its own setting is on
            elif source.toggle is None:
                disabled_by = None if any_toggle else "every enable_* toggle is false"
            else:
                disabled_by = None if toggles[source.toggle] else f"{source.toggle} = false"
            add(RootSpec(
                path=normalize(source.path, env), scope=source.scope, provider=provider,
                precedence=PRIORITY[provider],
                max_depth=CODEX_MAX_DEPTH if provider == CODEX else 1,
                require_description=provider == NATIVE,
                validation=settings.validation or Validation.LENIENT,
                name_prefix=source.name_prefix, disabled_by=disabled_by,
                allow_hardlinks=settings.allow_hardlinks, risk_policy=settings.risk_policy))
    for directory in settings.custom_directories:
        add(RootSpec(path=normalize(directory, env), scope=Scope.USER, provider=CUSTOM,
                     precedence=PRIORITY[CUSTOM], require_description=True,
                     validation=settings.validation or Validation.LENIENT,
                     allow_hardlinks=settings.allow_hardlinks, risk_policy=settings.risk_policy))
    for root in settings.roots:
        remote = None if root.url is None else RemoteSource(
            url=root.url, allow_http=root.allow_http, max_archive_files=root.max_archive_files,
            max_archive_bytes=root.max_archive_bytes)
        path = normalize(root.path, env) if remote is None else remote_root(env, remote.url)
        provider = root.provider if remote is None or root.provider != CUSTOM else REMOTE
        add(RootSpec(path=path, scope=root.scope, provider=provider, remote=remote,
                     precedence=root.precedence, max_depth=root.max_depth,
                     require_description=root.require_description,
                     validation=root.validation or settings.validation or Validation.LENIENT,
                     allow_hardlinks=settings.allow_hardlinks if root.allow_hardlinks is None
                     else root.allow_hardlinks,
                     risk_policy=root.risk_policy or settings.risk_policy,
                     signing=_signing(root)))
    problems.extend(ScanProblem(path, path, "root-missing", "the configured root does not exist")
                    for path in missing_configured(specs))
    return RootPlan(tuple(specs), tuple(problems),
                    (plugin_registry(env),) if settings.presets else ())


def _signing(root: RootConfig) -> SigningPolicy | None:
    if root.signatures == "off":
        return None
    return SigningPolicy(require=root.signatures == "require", key=root.signature_key,
                         certificates=root.signature_certificates, signers=root.signers)
