"""The pip command that adds an optional extra to skillindex as this copy of it was installed."""

from __future__ import annotations

import json
import shlex
from importlib import metadata
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

# skillindex is not on a public package index: `pip install 'skillindex[mcp]'` would find
# nothing (or a project of that name someone else registered). The command names the clone,
# the wheel or the repository this copy came from, as pip recorded it (PEP 610).
_DISTRIBUTION = "skillindex"


def install_command(extra: str, *, path: list[str] | None = None) -> str:
    """`pip install ...` adding `extra` to the installed skillindex, from where it came (as
    found on `path`, by default sys.path)."""
    origin = _origin(path)
    if origin is None:
        # Not installed at all (run from a checkout on sys.path): the checkout is the source.
        return f"pip install -e {shlex.quote(f'.[{extra}]')}"
    url, info = origin
    if url is None:
        return f"pip install {shlex.quote(f'{_DISTRIBUTION}[{extra}]')}"
    parsed = urlparse(url)
    if parsed.scheme == "file":
        local = url2pathname(unquote(parsed.path))
        editable = "-e " if info.get("dir_info", {}).get("editable") else ""
        return f"pip install {editable}{shlex.quote(f'{local}[{extra}]')}"
    vcs = info.get("vcs_info", {}).get("vcs")
    source = f"{vcs}+{url}" if vcs and not url.startswith(f"{vcs}+") else url
    return f"pip install {shlex.quote(f'{_DISTRIBUTION}[{extra}] @ {source}')}"


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
