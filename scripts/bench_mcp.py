"""Benchmark of `skillindex serve` over stdio, beside agentskills-mcp-server on the same skills.

Times, through the MCP SDK's own client over stdio: start-up to the first answer (process start,
handshake and the first `skills/list` page), a full `skills/list` of every skill (all pages),
and one `resources/read`. The same calls go to agentskills-mcp-server, serving the same skill
directories, when a Python >= 3.12 with it installed is found (--agentskills-python,
$SKILLINDEX_AGENTSKILLS_PYTHON, or the repository's .venv312).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PAGE_SIZE = 500
PROBE = "import agentskills_mcp_server, agentskills_fs"


def agentskills_python(given: str | None) -> str | None:
    repo = Path(__file__).resolve().parent.parent
    for candidate in (given, os.environ.get("SKILLINDEX_AGENTSKILLS_PYTHON"),
                      str(repo / ".venv312" / "bin" / "python")):
        if candidate and shutil.which(candidate) and subprocess.run(
                [candidate, "-c", PROBE], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def agentskills_config(base: Path, skill_dirs: list[Path]) -> Path:
    """agentskills-mcp-server's settings for the same skill directories (the winners)."""
    config = base / "agentskills.json"
    config.write_text(json.dumps({
        "name": "agentskills", "page_size": PAGE_SIZE, "max_skills": len(skill_dirs) + 1,
        "max_total_bytes": 2**40,
        "skills": [{"id": d.name, "provider": "fs", "options": {"root": str(d.parent)}}
                   for d in skill_dirs]}))
    return config


def measure(command: list[str], *, repeat: int, cwd: Path) -> dict[str, Any]:
    """Start-up, a full listing and one read against the server `command` starts."""
    import anyio
    from mcp import Client, StdioServerParameters, types
    from pydantic import BaseModel, ConfigDict

    class Raw(BaseModel):
        model_config = ConfigDict(extra="allow")

    server = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd),
                                   env=dict(os.environ))

    async def call(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request = types.Request[dict[str, Any] | None, str](method=method, params=params)
        return (await client.session.send_request(request, Raw)).model_dump()

    async def list_all(client: Client) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = await call(client, "skills/list", params)
            entries.extend(page["skills"])
            if "nextCursor" not in page:
                return entries
            params = {"cursor": page["nextCursor"]}

    async def run() -> dict[str, Any]:
        starts, listings, reads = [], [], []
        skills = 0
        for attempt in range(repeat):
            started = time.perf_counter()
            async with Client(server, read_timeout_seconds=3600) as client:
                await call(client, "skills/list", {})
                starts.append(time.perf_counter() - started)
                if attempt:
                    continue
                for _ in range(repeat):
                    began = time.perf_counter()
                    entries = await list_all(client)
                    listings.append(time.perf_counter() - began)
                skills = len(entries)
                uri = entries[len(entries) // 2]["resources"][-1]["uri"]
                await client.read_resource(uri)
                for _ in range(max(repeat, 20)):
                    began = time.perf_counter()
                    await client.read_resource(uri)
                    reads.append(time.perf_counter() - began)
        return {"start_s": statistics.median(starts), "list_all_s": statistics.median(listings),
                "read_s": statistics.median(reads), "listed": skills}

    return anyio.run(run)


def bench_mcp(base: Path, *, config: Path, db: Path, cwd: Path, skill_dirs: list[Path],
              repeat: int, agentskills: str | None) -> dict[str, Any]:
    """The serve figures, and agentskills-mcp-server's beside them when it can be run."""
    ours = measure([sys.executable, "-m", "skillindex", "--config", str(config), "--db", str(db),
                    "serve", "--page-size", str(PAGE_SIZE)], repeat=repeat, cwd=cwd)
    results = {f"mcp_{key}": value for key, value in ours.items()}
    if agentskills is not None:
        reference = agentskills_config(base, skill_dirs)
        theirs = measure([agentskills, "-m", "agentskills_mcp_server", "--config",
                          str(reference)], repeat=repeat, cwd=cwd)
        results.update({f"agentskills_{key}": value for key, value in theirs.items()})
    return results
