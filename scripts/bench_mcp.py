"""Benchmark of `skillindex serve` over stdio, beside agentskills-mcp-server on the same skills.

Times start-up to the first answer (process start, handshake and the first `skills/list` page),
a full `skills/list` of every skill (all pages), and one `resources/read`, each with two
clients over stdio:

  sdk   the MCP SDK's own `Client` (what most Python hosts use): its validation of each
        message is part of every figure, and at 10,000 skills the larger part of a listing;
  raw   JSON-RPC lines written and read with `json` alone (protocol 2026-07-28): what the
        server itself costs, with as little client as a host can have.

Beside them, the floor a Python MCP server cannot go below: a process importing the SDK's
server package (`python -c "import mcp.server"`). The same calls go to agentskills-mcp-server,
serving the same skill directories, when a Python >= 3.12 with it installed is found
(--agentskills-python, $SKILLINDEX_AGENTSKILLS_PYTHON, or the repository's .venv312).

Run alone on an indexed tree (`python -m scripts.bench_mcp --config C --db D --cwd W`), or
through scripts/bench.py, which generates the trees.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from scripts.benchkit import cpu_seconds

PAGE_SIZE = 500
PROBE = "import agentskills_mcp_server, agentskills_fs"
PROTOCOL_VERSION = "2026-07-28"  # the revision the extension is defined for
# What a 2026-07-28 client says with every request, in `_meta` (there is no handshake).
CLIENT_META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
               "io.modelcontextprotocol/clientInfo": {"name": "bench-raw", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}


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
        # It refuses a linked skill folder: it is given the folder the link points at.
        "skills": [{"id": d.resolve().name, "provider": "fs",
                    "options": {"root": str(d.resolve().parent)}} for d in skill_dirs]}))
    return config


def import_floor(python: str, repeat: int) -> tuple[float, float]:
    """Wall time and CPU seconds of a process that imports the MCP SDK's server package and
    exits (medians)."""
    times, cpu = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([python, "-c", "import mcp.server"], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu)


def _middle_uri(entries: list[dict[str, Any]]) -> str:
    return str(entries[len(entries) // 2]["resources"][-1]["uri"])


def measure(command: list[str], *, repeat: int, cwd: Path) -> dict[str, Any]:
    """Start-up, a full listing and one read with the SDK's client."""
    import anyio
    from mcp import Client, StdioServerParameters, types
    from pydantic import BaseModel, ConfigDict

    class Raw(BaseModel):
        model_config = ConfigDict(extra="allow")

    server = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd),
                                   env=dict(os.environ))

    async def call(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request = types.Request[dict[str, Any] | None, str](method=method, params=params)
        # The fields as the client parsed them: a host reads them, it need not copy them.
        return (await client.session.send_request(request, Raw)).model_extra or {}

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
                uri = _middle_uri(entries)
                await client.read_resource(uri)
                for _ in range(max(repeat, 20)):
                    began = time.perf_counter()
                    await client.read_resource(uri)
                    reads.append(time.perf_counter() - began)
        return {"start_s": statistics.median(starts), "list_all_s": statistics.median(listings),
                "read_s": statistics.median(reads), "listed": skills}

    return anyio.run(run)


class _Lines:
    """A JSON-RPC session over a child's stdin and stdout, one message a line."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin: IO[bytes] = process.stdin
        self.stdout: IO[bytes] = process.stdout
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             notify: bool = False) -> None:
        """One 2026-07-28 message: the client's identity rides in each request's `_meta`."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method,
                                   "params": {**(params or {}), "_meta": CLIENT_META}}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send(method, params)
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed its output during {method}")
            message = json.loads(line)
            if message.get("id") != self.next_id:
                continue  # a notification, or a request of the server's: not ours to time
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return dict(message["result"])


def vmhwm_kib(pid: int) -> int:
    """A process's peak resident memory so far (VmHWM)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmHWM")))


def measure_raw(command: list[str], *, repeat: int, cwd: Path) -> dict[str, Any]:
    """Start-up, a full listing and one read with a client that only parses JSON; beside the
    wall times, the CPU seconds the server process spent on each (start-up and listing from
    the first attempt; a read as the mean over the reads, the clock ticking in 10 ms)."""

    def list_all(session: _Lines) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = session.call("skills/list", params)
            entries.extend(page["skills"])
            if "nextCursor" not in page:
                return entries
            params = {"cursor": page["nextCursor"]}

    starts, listings, reads = [], [], []
    cpu: dict[str, float] = {}
    peak_mb = 0.0
    skills = 0
    for attempt in range(repeat):
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            session = _Lines(process)
            session.call("server/discover")
            session.call("skills/list", {})
            starts.append(time.perf_counter() - started)
            if attempt:
                continue
            cpu["start"] = cpu_seconds(process.pid)
            for _ in range(repeat):
                began = time.perf_counter()
                before = cpu_seconds(process.pid)
                entries = list_all(session)
                listings.append(time.perf_counter() - began)
                cpu.setdefault("list_all", cpu_seconds(process.pid) - before)
            skills = len(entries)
            uri = _middle_uri(entries)
            session.call("resources/read", {"uri": uri})
            count = max(repeat, 20) * 5
            before = cpu_seconds(process.pid)
            for _ in range(count):
                began = time.perf_counter()
                session.call("resources/read", {"uri": uri})
                reads.append(time.perf_counter() - began)
            cpu["read"] = (cpu_seconds(process.pid) - before) / count
            peak_mb = vmhwm_kib(process.pid) / 1024
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return {"start_s": statistics.median(starts), "list_all_s": statistics.median(listings),
            "read_s": statistics.median(reads), "listed": skills, "server_peak_mb": peak_mb,
            **{f"server_cpu_{key}_s": value for key, value in cpu.items()}}


CLIENTS = ("sdk", "raw")


def _measured(prefix: str, command: list[str], *, repeat: int, cwd: Path,
              clients: tuple[str, ...] = CLIENTS) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if "sdk" in clients:
        results.update({f"{prefix}_{key}": value
                        for key, value in measure(command, repeat=repeat, cwd=cwd).items()})
    if "raw" in clients:
        results.update({f"{prefix}_raw_{key}": value for key, value in
                        measure_raw(command, repeat=repeat, cwd=cwd).items()})
    results[f"{prefix}_import_floor_s"], results[f"{prefix}_import_floor_cpu_s"] = (
        import_floor(command[0], max(repeat, 3)))
    return results


def bench_mcp(base: Path, *, config: Path, db: Path, cwd: Path, skill_dirs: list[Path],
              repeat: int, agentskills: str | None, agentskills_repeat: int | None = None,
              serve: bool = True, clients: tuple[str, ...] = CLIENTS,
              agentskills_clients: tuple[str, ...] = CLIENTS) -> dict[str, Any]:
    """The serve figures, and agentskills-mcp-server's beside them when it can be run."""
    results: dict[str, Any] = {"load_average": os.getloadavg()[0]}
    if serve:
        results.update(_measured(
            "mcp", [sys.executable, "-m", "skillindex", "--config", str(config), "--db",
                    str(db), "serve", "--page-size", str(PAGE_SIZE)],
            repeat=repeat, cwd=cwd, clients=clients))
    if agentskills is not None:
        reference = agentskills_config(base, skill_dirs)
        results.update(_measured(
            "agentskills", [agentskills, "-m", "agentskills_mcp_server", "--config",
                            str(reference)],
            repeat=agentskills_repeat or repeat, cwd=cwd, clients=agentskills_clients))
    return results


def ratios(result: dict[str, Any]) -> dict[str, float]:
    """serve against its floor, and against agentskills-mcp-server, figure by figure."""
    out: dict[str, float] = {}
    for prefix, label in (("mcp", "serve"), ("agentskills", "agentskills-mcp-server")):
        if f"{prefix}_import_floor_s" not in result:
            continue
        for client in ("", "raw_"):
            if f"{prefix}_{client}start_s" in result:
                out[f"{label} start-up ({client or 'sdk_'}client) / import mcp.server"] = (
                    result[f"{prefix}_{client}start_s"] / result[f"{prefix}_import_floor_s"])
        if (f"{prefix}_raw_server_cpu_start_s" in result
                and result.get(f"{prefix}_import_floor_cpu_s")):
            out[f"{label} start-up CPU / import mcp.server CPU"] = (
                result[f"{prefix}_raw_server_cpu_start_s"]
                / result[f"{prefix}_import_floor_cpu_s"])
    for client in ("", "raw_"):
        for figure in ("start", "list_all", "read", "server_cpu_start", "server_cpu_list_all",
                       "server_cpu_read"):
            ours, theirs = f"mcp_{client}{figure}_s", f"agentskills_{client}{figure}_s"
            # CPU is counted in clock ticks (10 ms): a figure below one tick has no ratio.
            if ours in result and result.get(theirs):
                out[f"serve / agentskills-mcp-server, {figure} ({client or 'sdk_'}client)"] = (
                    result[ours] / result[theirs])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True, help="an indexed SQLite file")
    parser.add_argument("--cwd", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--agentskills-python", metavar="PYTHON")
    parser.add_argument("--agentskills-repeat", type=int, default=1,
                        help="repetitions for agentskills-mcp-server (its start-up is slow)")
    parser.add_argument("--no-agentskills", action="store_true")
    parser.add_argument("--no-serve", action="store_true",
                        help="measure agentskills-mcp-server alone (e.g. once, it is slow)")
    parser.add_argument("--clients", default="sdk,raw", help="sdk, raw or both (default)")
    parser.add_argument("--agentskills-clients", default="sdk,raw")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from skillindex import SkillIndex

    with SkillIndex.open(args.config, db=str(args.db), cwd=args.cwd, create=False) as index:
        skill_dirs = [winner.candidate.directory for winner in index.winners()]
    agentskills = None if args.no_agentskills else agentskills_python(args.agentskills_python)
    print(f"measuring {len(skill_dirs)} skills ...", file=sys.stderr, flush=True)
    results = bench_mcp(args.db.parent, config=args.config, db=args.db, cwd=args.cwd,
                        skill_dirs=skill_dirs, repeat=args.repeat, agentskills=agentskills,
                        agentskills_repeat=args.agentskills_repeat, serve=not args.no_serve,
                        clients=tuple(args.clients.split(",")),
                        agentskills_clients=tuple(args.agentskills_clients.split(",")))
    results["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({**results, "ratios": ratios(results)}, indent=2))


if __name__ == "__main__":
    main()
