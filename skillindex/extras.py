"""The command that adds an optional extra to skillindex as this copy of it was installed."""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from skillindex import inputs

# skillindex is not on a public package index: `pip install 'skillindex[mcp]'` would find
# nothing (or a project of that name someone else registered). The command names the clone,
# the wheel or the repository this copy came from, as pip recorded it (PEP 610).
_DISTRIBUTION = "skillindex"
_RECORD_BYTES = 1 << 20  # larger than any record pipx or uv writes of one tool


def install_command(extra: str, *, path: list[str] | None = None,
                    prefix: str | None = None) -> str:
    """The command adding `extra` to the installed skillindex, from where it came (as found on
    `path`, by default sys.path), with the tool that made its environment (`prefix`, by
    default sys.prefix): pipx and `uv tool` install a tool again with the extra, pip adds it."""
    environment = Path(sys.prefix if prefix is None else prefix)
    installer = _installer(environment)
    if installer != "pip install":  # the tool installs again: with the extras it had too
        extra = ",".join(sorted({extra, *_tool_extras(environment)}))
    origin = _origin(path)
    if origin is None:
        # Not installed at all (run from a checkout on sys.path): the checkout is the source.
        return f"{installer} -e {shlex.quote(f'.[{extra}]')}"
    url, info = origin
    if url is None:
        return f"{installer} {shlex.quote(f'{_DISTRIBUTION}[{extra}]')}"
    parsed = urlparse(url)
    if parsed.scheme == "file":
        local = url2pathname(unquote(parsed.path))
        editable = "-e " if info.get("dir_info", {}).get("editable") else ""
        return f"{installer} {editable}{shlex.quote(f'{local}[{extra}]')}"
    vcs = info.get("vcs_info", {}).get("vcs")
    source = f"{vcs}+{url}" if vcs and not url.startswith(f"{vcs}+") else url
    return f"{installer} {shlex.quote(f'{_DISTRIBUTION}[{extra}] @ {source}')}"


def _tool_extras(prefix: Path) -> set[str]:
    """The extras pipx or `uv tool` installed skillindex with, as their records say (small
    files the tool wrote; anything unexpected in them counts as none)."""
    found: set[str] = set()
    try:
        pipx = prefix / "pipx_metadata.json"
        if pipx.is_file() and pipx.stat().st_size < _RECORD_BYTES:
            spec = json.loads(pipx.read_text(encoding="utf-8"))["main_package"]["package_or_url"]
            if isinstance(spec, str) and spec.endswith("]") and "[" in spec:
                found.update(spec[spec.rindex("[") + 1:-1].split(","))
        receipt = prefix / "uv-receipt.toml"
        if receipt.is_file() and receipt.stat().st_size < _RECORD_BYTES:
            receipt_text = receipt.read_text(encoding="utf-8")
            for requirement in inputs.load_toml(receipt_text, what="uv receipt")["tool"][
                    "requirements"]:
                if requirement.get("name") == _DISTRIBUTION:
                    found.update(requirement.get("extras", ()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, inputs.InputError):
        return set()
    return {name.strip() for name in found if isinstance(name, str) and name.strip()}


def _installer(prefix: Path) -> str:
    """pipx and `uv tool` leave a record in the environment they made; else pip's command."""
    if (prefix / "pipx_metadata.json").is_file():
        return "pipx install --force"
    if (prefix / "uv-receipt.toml").is_file():
        return "uv tool install --force"
    return "pip install"


def hint(extra: str) -> str:
    """What a message says after naming the missing extra."""
    return f"install it with: {install_command(extra)}"


def _origin(path: list[str] | None) -> tuple[str | None, dict[str, dict[str, object]]] | None:
    """The URL skillindex was installed from and its PEP 610 details; no URL when it came from
    an index; None when it is not installed."""
    found = list(metadata.distributions(name=_DISTRIBUTION) if path is None
                 else metadata.distributions(name=_DISTRIBUTION, path=path))
    if not found:
        return None
    # A checkout's own egg-info (on sys.path under `python -m`) records no origin: the
    # installed copy's record is the one that says where it came from.
    texts = [text for distribution in found if (text := distribution.read_text("direct_url.json"))]
    if not texts:
        return None, {}
    text = texts[0]
    try:
        recorded = json.loads(text)
    except ValueError:
        return None, {}
    if not isinstance(recorded, dict) or not isinstance(recorded.get("url"), str):
        return None, {}
    return recorded["url"], {key: value for key, value in recorded.items()
                             if isinstance(value, dict)}
