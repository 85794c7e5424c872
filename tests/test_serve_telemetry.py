"""OpenTelemetry from `serve --http` (the `otel` extra), read back from the SDK's in-memory
exporter and reader; and nothing of it loaded when no endpoint asks for it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import MCPError

from skillindex.serve import http
from skillindex.serve.listen import Listen, plan
from skillindex.serve.mcp import create_server
from tests.test_serve_http import BIG, PDF, PDF_TEXT, Team, connect, read_text, run, team

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from skillindex.serve.telemetry import Telemetry

__all__ = ["team"]  # the fixture, shared with test_serve_http


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


@asynccontextmanager
async def observed_server(team: Team, telemetry: Telemetry) -> AsyncIterator[Listen]:
    sock = socket.create_server(("127.0.0.1", 0))
    listen = plan("127.0.0.1", sock.getsockname()[1], tokens=team.token_file)
    server = create_server(team.index, poll_seconds=60,
                           authentication=http.authentication(listen))
    server.state.on_read = telemetry.disclosure
    runner = uvicorn.Server(http.config(server, listen, telemetry=telemetry))
    async with anyio.create_task_group() as group:
        group.start_soon(runner.serve, [sock])
        while not runner.started:
            await anyio.sleep(0.02)
        try:
            yield listen
        finally:
            runner.should_exit = True


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_a_span_per_request_an_event_per_disclosure_and_counters(team: Team) -> None:
    token = team.token("alice")
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = Telemetry(tracing, MeterProvider(metric_readers=[reader]))

    async def test() -> None:
        async with observed_server(team, telemetry) as listen:
            async with connect(listen.url, token, name="alice-laptop") as client:
                assert await read_text(client) == PDF_TEXT
                await read_text(client, BIG)
                with pytest.raises(MCPError):
                    await client.read_resource("skill://nothing/SKILL.md")
            async with connect(listen.url, None) as client:
                with pytest.raises(MCPError):
                    await client.read_resource(PDF)

    run(test)
    finished = spans.get_finished_spans()
    assert {span.name for span in finished} == {"POST /mcp"}
    events = [event for span in finished for event in span.events
              if event.name == "skill.disclosure"]
    seen = [dict(event.attributes or {}) for event in events]
    assert [(e["skill"], e["level"], e["outcome"], e["principal"]) for e in seen] == [
        ("pdf", 3, "ok", "alice"), ("pdf", 3, "ok", "alice"),
        ("skill://nothing/SKILL.md", 3, "not-found", "alice")]
    assert seen[0]["bytes"] == len(PDF_TEXT)
    statuses = [int(str(dict(span.attributes or {})["http.response.status_code"]))
                for span in finished]
    assert sorted(statuses) == [200, 200, 400, 401]  # read, read, not served, no token
    points = metric_points(reader)
    reads = {dict(p.attributes)["outcome"]: p.value for p in points["skillindex.reads"]}
    assert reads == {"ok": 2, "not-found": 1}
    assert {dict(p.attributes)["http.response.status_code"]: p.value
            for p in points["skillindex.refusals"]} == {400: 1, 401: 1}
    assert sum(p.count for p in points["skillindex.request.duration"]) == len(finished)


def test_nothing_of_opentelemetry_is_loaded_without_an_endpoint(tmp_path: Any) -> None:
    # The MCP SDK brings the OpenTelemetry API along; the SDK, its exporters and this
    # server's own instruments are loaded only when an OTLP endpoint is named.
    probe = (
        "import os, sys\n"
        "import skillindex.cli\n"
        "before = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "from skillindex.serve import http\n"
        "from skillindex.serve.mcp import Skills\n"
        "assert http.observe(None, os.environ) is None\n"
        "print(json.dumps({'cli': before, 'serve': sorted(m for m in sys.modules if "
        "m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter', "
        "'skillindex.serve.telemetry')))}))\n")
    environ = {key: value for key, value in __import__("os").environ.items()
               if not key.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", "import json\n" + probe], env=environ,
                          capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(done.stdout) == {"cli": [], "serve": []}


@pytest.mark.parametrize(("environ", "wanted"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"},
     False),
], ids=["none", "endpoint", "traces-endpoint", "disabled"])
def test_an_otlp_endpoint_turns_export_on(environ: dict[str, str], wanted: bool) -> None:
    from skillindex.serve import telemetry

    assert telemetry.wanted(environ) is wanted
