"""Load on `skillindex serve --http`: N authenticated clients read skill bodies at once.

One server process (`skillindex serve --http PORT --tokens FILE`, limits off so that they do
not decide the figures) serves a generated tree indexed on SQLite, then the same tree on
PostgreSQL. N clients of the MCP SDK's own `Client`, each with a bearer token of its own
principal, read `SKILL.md` bodies (`resources/read`, each a verified and audited disclosure)
in a loop for a bounded time, all from one asyncio process. Reported: reads a second, p50 and
p99 latency, errors, the server's CPU seconds, and the load average of the machine before and
after (the clients share its cores with the server). The baseline, measured in the same run
on each backend: the same clients against the same server on loopback without tokens; the
ratios say what the bearer authentication and the limits' gate cost.

Run alone (`python -m scripts.bench_http --clients 20 --seconds 10`) or through
`scripts/bench.py --http-load`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.benchkit import cpu_seconds, generate, settings_file

SKILLS = 200


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(config: Path, db: str, cwd: Path, token_file: Path | None,
                 port: int) -> subprocess.Popen[bytes]:
    """`serve --http` on loopback, with `token_file`'s tokens (None: without auth)."""
    auth = [] if token_file is None else ["--tokens", str(token_file)]
    process = subprocess.Popen(
        [sys.executable, "-m", "skillindex", "--config", str(config), "--db", db, "serve",
         "--http", f"127.0.0.1:{port}", *auth,
         "--requests-per-second", "0", "--bytes-per-minute", "0"],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not listen within 300 s")


def load(url: str, tokens: list[str | None], uris: list[str], seconds: float, *,
         mode: str = "auto") -> dict[str, Any]:
    """Each token's client (None: one without a token) reads random bodies until `seconds`
    have passed."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    latencies: list[float] = []
    errors: list[str] = []

    async def client(number: int, token: str | None, ready: anyio.Event,
                     go: anyio.Event) -> None:
        chooser = random.Random(number)
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        async with (httpx2.AsyncClient(headers=headers) as web,
                    Client(streamable_http_client(url, http_client=web), mode=mode,
                           client_info=Implementation(name=f"bench-{number}",
                                                      version="1")) as session):
            await session.read_resource(uris[0])  # connected and warm before the clock runs
            ready.set()
            await go.wait()
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                try:
                    await session.read_resource(chooser.choice(uris))
                except Exception as exc:  # every failure is a figure, not a stop
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                latencies.append(time.perf_counter() - began)

    async def main() -> float:
        go = anyio.Event()
        readies = [anyio.Event() for _ in tokens]
        async with anyio.create_task_group() as group:
            for number, token in enumerate(tokens):
                group.start_soon(client, number, token, readies[number], go)
            for ready in readies:
                await ready.wait()
            started = time.perf_counter()
            go.set()
        return time.perf_counter() - started

    before = resource.getrusage(resource.RUSAGE_SELF)
    elapsed = anyio.run(main)
    after = resource.getrusage(resource.RUSAGE_SELF)
    ordered = sorted(latencies)
    return {"reads": len(ordered), "errors": len(errors), "error_kinds": sorted(set(errors))[:3],
            "reads_per_s": len(ordered) / elapsed,
            # The clients' CPU over the whole run, connecting included.
            "client_cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "p50_ms": 1000 * statistics.median(ordered) if ordered else None,
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            if ordered else None}


def measure(backend: str, db: str, *, base: Path, config: Path, clients: int,
            seconds: float, mode: str = "auto") -> list[dict[str, Any]]:
    """The baseline (no auth) and then the authenticated run, on one backend."""
    from skillindex import SkillIndex
    from skillindex.serve import tokens

    with SkillIndex.open(config, db=db, cwd=base) as index:
        index.reindex()
        uris = [f"skill://{winner.name}/SKILL.md" for winner in index.winners()]
    token_file = base / f"tokens-{backend}.json"
    issued = [tokens.add(token_file, f"client-{n}")[0] for n in range(clients)]
    results = []
    runs: list[tuple[str, Path | None, list[str | None]]] = [
        ("none", None, [None] * clients), ("tokens", token_file, [*issued])]
    for auth, file, sent in runs:
        port = free_port()
        server = start_server(config, db, base, file, port)
        try:
            before_load, before_cpu = os.getloadavg()[0], cpu_seconds(server.pid)
            figures = load(f"http://127.0.0.1:{port}/mcp", sent, uris, seconds, mode=mode)
            figures["server_cpu_s"] = cpu_seconds(server.pid) - before_cpu
        finally:
            server.terminate()
            server.wait(timeout=30)
        results.append({"backend": backend, "auth": auth, "mode": mode, "clients": clients,
                        "seconds": seconds, "skills": len(uris), "load_before": before_load,
                        "load_after": os.getloadavg()[0], **figures})
    return results


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """Each backend's authenticated figures over its baseline's of the same run."""
    out: dict[str, float] = {}
    for backend in dict.fromkeys(r["backend"] for r in results):
        runs = {r["auth"]: r for r in results if r["backend"] == backend}
        base, auth = runs.get("none"), runs.get("tokens")
        if base is None or auth is None:
            continue
        for figure in ("reads_per_s", "p50_ms", "p99_ms", "server_cpu_s"):
            if base[figure] and auth[figure] is not None:
                per_read = figure == "server_cpu_s"
                mine = auth[figure] / auth["reads"] if per_read else auth[figure]
                theirs = base[figure] / base["reads"] if per_read else base[figure]
                name = "server CPU per read" if per_read else figure
                out[f"{backend}: tokens / no auth, {name}"] = mine / theirs
    return out


def bench_http(work: Path, *, clients: int, seconds: float, count: int = SKILLS,
               postgresql: bool = True, mode: str = "auto") -> list[dict[str, Any]]:
    base = work / "http-load"
    roots = generate(base / "tree", count)
    config = settings_file(base, roots)
    results = measure("sqlite", str(base / "index.sqlite"), base=base, config=config,
                      clients=clients, seconds=seconds, mode=mode)
    if postgresql:
        try:
            from tests import pgserver

            server = pgserver.start_server()
        except Exception as exc:  # no binaries or no driver: say so, measure the rest
            print(f"no PostgreSQL server for the load test: {exc}", file=sys.stderr)
        else:
            try:
                results.extend(measure("postgresql", server.create_database("load"),
                                       base=base, config=config, clients=clients,
                                       seconds=seconds, mode=mode))
            finally:
                server.stop()
    shutil.rmtree(base, ignore_errors=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| backend | auth | mode | clients | reads/s | p50 | p99 | errors | server CPU "
             "| clients' CPU | load before/after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        p50 = "-" if r["p50_ms"] is None else f"{r['p50_ms']:.1f} ms"
        p99 = "-" if r["p99_ms"] is None else f"{r['p99_ms']:.1f} ms"
        lines.append(
            f"| {r['backend']} | {r['auth']} | {r['mode']} | {r['clients']} | "
            f"{r['reads_per_s']:.0f} | {p50} | {p99} | {r['errors']} | "
            f"{r['server_cpu_s']:.1f} s of {r['seconds']:g} s | {r['client_cpu_s']:.1f} s | "
            f"{r['load_before']:.1f} / {r['load_after']:.1f} |")
    lines.append("")
    lines.extend(f"{name}: {value:.2f}" for name, value in ratios(results).items())
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skills", type=int, default=SKILLS)
    parser.add_argument("--no-postgresql", action="store_true")
    parser.add_argument("--mode", default="auto",
                        help="the client's protocol: auto (2026-07-28 here) or legacy (the "
                        "initialize handshake and a session, as most hosts still speak)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--work", type=Path, help="where to generate the tree")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    work = Path(tempfile.mkdtemp(prefix="skillindex-http-", dir=args.work))
    try:
        results = bench_http(work, clients=args.clients, seconds=args.seconds,
                             count=args.skills, postgresql=not args.no_postgresql,
                             mode=args.mode)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"runs": results, "ratios": ratios(results)}, indent=2) if args.json
          else table(results))


if __name__ == "__main__":
    main()
