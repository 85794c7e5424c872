"""Load on `skillindex serve --http` beside a bare MCP SDK server, in one run on this machine.

The baseline (scripts/bench_bare.py): the same SDK, uvicorn and streamable HTTP transport, no
auth, answering `resources/read` of the same skill files from a dict in memory. Against it,
`skillindex serve --http PORT --tokens FILE` (its limits per principal and per peer address
off, so that they do not decide the figures) on a generated tree indexed on SQLite, then on
PostgreSQL with one and with two replicas (two processes on the one database, the clients
split between them). N clients of the MCP SDK's own `Client`, each with a bearer token of its
own principal, read `SKILL.md` files (each a verified and audited disclosure) in a loop for a
bounded time, all from one asyncio process on loopback.

Reported for each run: reads a second, p50 and p99 latency, errors, the server processes' CPU
seconds per read (and the PostgreSQL server's), the audit rows the run added against the reads
it asked for (and on PostgreSQL how many transactions wrote them), and the machine's load
average (the clients share its two cores with the servers); then every figure as a ratio to
the bare server's at the same client count, whether the audit chain verifies at the end, and
how long one writer holds the chain's lock per transaction of 1, 8 and 64 rows. The
PostgreSQL server is started durable (fsync and synchronous_commit on), unlike the tests'
throw-away one.

Run alone (`python -m scripts.bench_http --clients 20 5 --seconds 12`) or through
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scripts.benchkit import cpu_seconds, generate, settings_file

SKILLS = 200
CLIENTS = (20, 5)
SECONDS = 12.0
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(process: subprocess.Popen[bytes], port: int) -> subprocess.Popen[bytes]:
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


def start_server(config: Path, db: str, cwd: Path, token_file: Path | None,
                 port: int) -> subprocess.Popen[bytes]:
    """`serve --http` on loopback, with `token_file`'s tokens (None: without auth)."""
    auth = [] if token_file is None else ["--tokens", str(token_file)]
    process = subprocess.Popen(
        [sys.executable, "-m", "skillindex", "--config", str(config), "--db", db, "serve",
         "--http", f"127.0.0.1:{port}", *auth,
         "--requests-per-second", "0", "--bytes-per-minute", "0"],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _listening(process, port)


def start_bare(bodies: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-m", "scripts.bench_bare", str(port),
                                str(bodies)], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    return _listening(process, port)


def load(urls: Sequence[str], tokens: list[str | None], uris: list[str], seconds: float, *,
         mode: str = "auto") -> dict[str, Any]:
    """Each token's client (None: one without a token), on the URLs in turn, reads random
    files until `seconds` have passed."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    latencies: list[float] = []
    errors: list[str] = []
    asked = [0]

    async def client(number: int, token: str | None, ready: anyio.Event,
                     go: anyio.Event) -> None:
        chooser = random.Random(number)
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        url = urls[number % len(urls)]
        async with (httpx2.AsyncClient(headers=headers) as web,
                    Client(streamable_http_client(url, http_client=web), mode=mode,
                           client_info=Implementation(name=f"bench-{number}",
                                                      version="1")) as session):
            asked[0] += 1
            await session.read_resource(uris[0])  # connected and warm before the clock runs
            ready.set()
            await go.wait()
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                asked[0] += 1
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
    return {"reads": len(ordered), "asked": asked[0], "errors": len(errors),
            "error_kinds": sorted(set(errors))[:3], "reads_per_s": len(ordered) / elapsed,
            # The clients' CPU over the whole run, connecting included.
            "client_cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "p50_ms": 1000 * statistics.median(ordered) if ordered else None,
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            if ordered else None}


def _url(db: str) -> str:
    return db if "://" in db else f"sqlite:///{db}"


def audit_rows(db: str) -> int:
    from sqlalchemy import text

    from skillindex.store.engine import make_engine

    engine = make_engine(_url(db), create=False)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM load_event")).scalar_one())
    finally:
        engine.dispose()


def audit_transactions(db: str, after_id: int) -> int | None:
    """How many transactions wrote the audit rows after `after_id` on PostgreSQL (the rows of
    one transaction share its `xmin`); None elsewhere."""
    if not db.startswith("postgres"):
        return None
    from sqlalchemy import text

    from skillindex.store.engine import make_engine

    engine = make_engine(db, create=False)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text(
                "SELECT count(DISTINCT xmin::text) FROM load_event WHERE id > :after"),
                {"after": after_id}).scalar_one())
    finally:
        engine.dispose()


def last_id(db: str) -> int:
    from sqlalchemy import text

    from skillindex.store.engine import make_engine

    engine = make_engine(_url(db), create=False)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT coalesce(max(id), 0) FROM load_event"))
                       .scalar_one())
    finally:
        engine.dispose()


def chain_limit(setup: Setup, sizes: Sequence[int] = (1, 8, 64),
                seconds: float = 3.0) -> dict[str, dict[str, float]]:
    """How long one audit transaction of N rows holds the chain's lock, appended back to back
    from one thread (nothing else waiting): the chain's ceiling is N rows per that time,
    however many replicas append."""
    from skillindex import SkillIndex
    from skillindex.model import AuditRecord

    record = AuditRecord(event="resource.read", level=3, outcome="ok", skill="bench",
                         resource="SKILL.md", session="mcp:bench/chain", reason="chain",
                         principal="bench", bytes=1000, digest="0" * 64)
    found: dict[str, dict[str, float]] = {}
    with SkillIndex.open(setup.config, db=setup.db, cwd=setup.base) as index:
        write = index._store._append_all
        for size in sizes:
            batch = [record] * size
            write(batch)
            done, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                write(batch)
                done += 1
            each = (time.perf_counter() - started) / done
            found[f"{size} rows"] = {"ms_per_transaction": 1000 * each,
                                     "rows_per_s": size / each}
    return found


def postgres_cpu(data: Path | None) -> float:
    """CPU seconds of a PostgreSQL server's postmaster and every backend it has now (the
    backends of the run live as long as its servers' connections)."""
    if data is None:
        return 0.0
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    total = cpu_seconds(postmaster)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    total += cpu_seconds(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return total


class Setup:
    """One backend's database, indexed, with the tokens of N principals."""

    def __init__(self, backend: str, db: str, base: Path, config: Path, clients: int,
                 pg_data: Path | None = None) -> None:
        from skillindex import SkillIndex
        from skillindex.serve import tokens

        self.backend, self.db, self.base, self.config = backend, db, base, config
        self.pg_data = pg_data
        with SkillIndex.open(config, db=db, cwd=base) as index:
            index.reindex()
            winners = index.winners()
        self.uris = [f"skill://{winner.name}/SKILL.md" for winner in winners]
        self.bodies = {f"skill://{winner.name}/SKILL.md":
                       (winner.candidate.real_path / "SKILL.md").read_text()
                       for winner in winners}
        self.token_file = base / f"tokens-{backend}.json"
        self.tokens: list[str | None] = [tokens.add(self.token_file, f"client-{n}")[0]
                                         for n in range(clients)]

    def verify(self) -> bool:
        from skillindex import SkillIndex

        with SkillIndex.open(self.config, db=self.db, cwd=self.base) as index:
            return index.verify_audit().broken is None


def run(label: str, servers: list[subprocess.Popen[bytes]], ports: list[int],
        tokens: list[str | None], uris: list[str], seconds: float, *, mode: str,
        db: str | None = None, pg_data: Path | None = None) -> dict[str, Any]:
    try:
        rows = audit_rows(db) if db is not None else 0
        load_before = os.getloadavg()[0]
        cpu = sum(cpu_seconds(server.pid) for server in servers)
        database = postgres_cpu(pg_data)
        first = last_id(db) if db is not None else 0
        figures = load([f"http://127.0.0.1:{port}/mcp" for port in ports], tokens, uris,
                       seconds, mode=mode)
        figures["server_cpu_s"] = sum(cpu_seconds(s.pid) for s in servers) - cpu
        figures["database_cpu_s"] = postgres_cpu(pg_data) - database
        figures["audit_rows"] = audit_rows(db) - rows if db is not None else None
        figures["audit_transactions"] = (audit_transactions(db, first) if db is not None
                                         else None)
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=30)
    return {"server": label, "replicas": len(servers), "clients": len(tokens),
            "seconds": seconds, "skills": len(uris), "load_before": load_before,
            "load_after": os.getloadavg()[0], **figures}


def skillindex_run(setup: Setup, clients: int, seconds: float, *, replicas: int = 1,
                   mode: str) -> dict[str, Any]:
    ports = [free_port() for _ in range(replicas)]
    servers = [start_server(setup.config, setup.db, setup.base, setup.token_file, port)
               for port in ports]
    label = setup.backend if replicas == 1 else f"{setup.backend} x{replicas}"
    return run(label, servers, ports, setup.tokens[:clients], setup.uris, seconds, mode=mode,
               db=setup.db, pg_data=setup.pg_data)


def bare_run(setup: Setup, clients: int, seconds: float, *, mode: str) -> dict[str, Any]:
    bodies = setup.base / "bodies.json"
    bodies.write_text(json.dumps(setup.bodies))
    port = free_port()
    return run("bare SDK", [start_bare(bodies, port)], [port], [None] * clients, setup.uris,
               seconds, mode=mode)


def bench_http(work: Path, *, clients: Sequence[int] = CLIENTS, seconds: float = SECONDS,
               count: int = SKILLS, postgresql: bool = True, replicas: Sequence[int] = (1, 2),
               mode: str = "auto") -> dict[str, Any]:
    """Every run, by client count: the bare server, SQLite, then PostgreSQL per replica
    count; and whether each database's audit chain verifies after its runs."""
    base = work / "http-load"
    roots = generate(base / "tree", count)
    config = settings_file(base, roots)
    # Every client is 127.0.0.1: the bounds per peer address would decide the figures.
    with config.open("a") as settings:
        settings.write("\n[serve]\npeer_requests_per_second = 0\nmax_connections_per_peer = 0\n")
    most = max(clients)
    setups = [Setup("sqlite", str(base / "index.sqlite"), base, config, most)]
    server = None
    if postgresql:
        try:
            from tests import pgserver

            # The tests' server is throw-away; this one commits as a deployment would.
            pgserver.SERVER_SETTINGS.update(fsync="on", synchronous_commit="on",
                                            full_page_writes="on")
            server = pgserver.start_server()
        except Exception as exc:  # no binaries or no driver: say so, measure the rest
            print(f"no PostgreSQL server for the load test: {exc}", file=sys.stderr)
        else:
            setups.append(Setup("postgresql", server.create_database("load"), base, config,
                                most, pg_data=server.data))
    runs: list[dict[str, Any]] = []
    verified: dict[str, bool] = {}
    limits: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for n in clients:
            print(f"  {n} clients ...", file=sys.stderr, flush=True)
            runs.append(bare_run(setups[0], n, seconds, mode=mode))
            for setup in setups:
                for count_ in (replicas if setup.backend == "postgresql" else (1,)):
                    runs.append(skillindex_run(setup, n, seconds, replicas=count_, mode=mode))
        verified = {setup.backend: setup.verify() for setup in setups}
        limits = {setup.backend: chain_limit(setup) for setup in setups}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return {"runs": runs, "ratios": ratios(runs), "chain_verifies": verified,
            "chain_limit": limits}


def ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each run's figures over the bare server's at the same client count."""
    out: dict[str, dict[str, float]] = {}
    for run_ in runs:
        bare = next((r for r in runs if r["server"] == "bare SDK"
                     and r["clients"] == run_["clients"]), None)
        if bare is None or run_ is bare or not bare["reads"] or not run_["reads"]:
            continue
        mine, theirs = _per_read(run_), _per_read(bare)
        out[f"{run_['server']}, {run_['clients']} clients"] = {
            "reads/s": run_["reads_per_s"] / bare["reads_per_s"],
            "p50": run_["p50_ms"] / bare["p50_ms"], "p99": run_["p99_ms"] / bare["p99_ms"],
            "server CPU/read": mine / theirs}
    return out


def _per_read(run_: dict[str, Any]) -> float:
    return float(run_["server_cpu_s"]) / max(1, int(run_["reads"]))


def table(result: dict[str, Any]) -> str:
    lines = ["| server | clients | reads/s | p50 | p99 | errors | server CPU/read "
             "| database CPU/read | audit rows / reads asked | load before/after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        p50 = "-" if r["p50_ms"] is None else f"{r['p50_ms']:.1f} ms"
        p99 = "-" if r["p99_ms"] is None else f"{r['p99_ms']:.1f} ms"
        rows = "-" if r["audit_rows"] is None else f"{r['audit_rows']} / {r['asked']}"
        database = (f"{1000 * r['database_cpu_s'] / max(1, r['reads']):.2f} ms"
                    if r["database_cpu_s"] else "-")
        lines.append(
            f"| {r['server']} | {r['clients']} | {r['reads_per_s']:.0f} | {p50} | {p99} | "
            f"{r['errors']} | {1000 * _per_read(r):.2f} ms | {database} | {rows} | "
            f"{r['load_before']:.1f} / {r['load_after']:.1f} |")
    lines += ["", "| against the bare SDK server | reads/s | p50 | p99 | server CPU/read |",
              "|---|---|---|---|---|"]
    lines.extend(f"| {name} | {f['reads/s']:.2f}x | {f['p50']:.2f}x | {f['p99']:.2f}x | "
                 f"{f['server CPU/read']:.2f}x |" for name, f in result["ratios"].items())
    lines.append("")
    for r in result["runs"]:
        if r.get("audit_transactions"):
            lines.append(f"{r['server']}, {r['clients']} clients: {r['audit_rows']} audit rows "
                         f"in {r['audit_transactions']} transactions "
                         f"({r['audit_rows'] / r['audit_transactions']:.1f} rows each)")
    lines.extend(f"audit chain on {backend}: {'verifies' if ok else 'BROKEN'}"
                 for backend, ok in result["chain_verifies"].items())
    for backend, sizes in result.get("chain_limit", {}).items():
        lines.append(f"the chain's lock on {backend}, one writer back to back: " + "; ".join(
            f"{size}: {f['ms_per_transaction']:.2f} ms a transaction, at most "
            f"{f['rows_per_s']:.0f} rows/s" for size, f in sizes.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS))
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--skills", type=int, default=SKILLS)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2],
                        help="replica counts on PostgreSQL")
    parser.add_argument("--no-postgresql", action="store_true")
    parser.add_argument("--mode", default="auto",
                        help="the client's protocol: auto (2026-07-28 here) or legacy (the "
                        "initialize handshake and a session, as most hosts still speak)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--work", type=Path, help="where to generate the tree")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="skillindex-http-", dir=args.work))
    try:
        result = bench_http(work, clients=args.clients, seconds=args.seconds,
                            count=args.skills, postgresql=not args.no_postgresql,
                            replicas=args.replicas, mode=args.mode)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
