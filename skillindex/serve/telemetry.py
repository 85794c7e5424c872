"""OpenTelemetry for `serve --http` (the `otel` extra): a span per request, an event per
disclosure, and counters of reads, refusals and latency, exported over OTLP as the standard
OTEL_* variables say."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from skillindex import __version__

# The statuses the gates and the SDK refuse with: each is counted as a refusal.
REFUSED = frozenset({400, 401, 403, 408, 413, 421, 429, 503})
SPAN = "skillindex.span"  # the scope key of a request's span
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
              "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for export: an OTLP endpoint given, the SDK not disabled."""
    return any(environ.get(name) for name in _ENDPOINTS) and (
        environ.get("OTEL_SDK_DISABLED", "").strip().lower() != "true")


class Telemetry:
    """The instruments of one server, on the providers given (the global ones by default)."""

    def __init__(self, tracer_provider: TracerProvider | None = None,
                 meter_provider: MeterProvider | None = None) -> None:
        self.tracer = trace.get_tracer("skillindex", __version__, tracer_provider)
        meter = metrics.get_meter("skillindex", __version__, meter_provider)
        self.reads = meter.create_counter(
            "skillindex.reads", unit="{read}",
            description="Skill reads asked, by outcome (ok, refused, not-found, ...)")
        self.refusals = meter.create_counter(
            "skillindex.refusals", unit="{request}",
            description="Requests refused by a gate or for want of a valid token, by status")
        self.latency = meter.create_histogram(
            "skillindex.request.duration", unit="s", description="Time to answer a request")

    @contextmanager
    def request(self, scope: MutableMapping[str, Any], method: str, path: str,
                peer: str) -> Iterator[Span]:
        """The span of one HTTP request, current while the request is answered, and kept in
        its scope for the handler's disclosure events."""
        with self.tracer.start_as_current_span(
                f"{method} {path}", kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "url.path": path,
                            "client.address": peer}) as span:
            scope[SPAN] = span
            yield span

    def answered(self, span: Span, *, method: str, status: int, principal: str | None,
                 seconds: float) -> None:
        span.set_attribute("http.response.status_code", status)
        if principal is not None:
            span.set_attribute("enduser.id", principal)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        self.latency.record(seconds, {"http.request.method": method,
                                      "http.response.status_code": status})
        if status in REFUSED:
            self.refusals.add(1, {"http.response.status_code": status})

    def disclosure(self, scope: Mapping[str, Any] | None, skill: str, level: int, size: int,
                   outcome: str, principal: str | None) -> None:
        """One read asked: an event on its request's span (the gates keep it in the request's
        scope, since the SDK answers in a task of its own) and a count."""
        attributes: dict[str, Any] = {"skill": skill, "level": level, "bytes": size,
                                      "outcome": outcome}
        if principal is not None:
            attributes["principal"] = principal
        span = scope.get(SPAN) if scope is not None else None
        (span if isinstance(span, Span) else trace.get_current_span()).add_event(
            "skill.disclosure", attributes)
        self.reads.add(1, {"outcome": outcome, "level": level})


def configure() -> Telemetry:
    """Export over OTLP/HTTP to where the OTEL_* variables say (service name, resource
    attributes, endpoints, headers and intervals included)."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
        OTLPMetricExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    resource = Resource.create({"service.version": __version__})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "skillindex"}))
    tracer_provider = SdkTracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = SdkMeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return Telemetry(tracer_provider, meter_provider)


def shutdown() -> None:
    """Send what is still buffered, at the server's stop."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        stop = getattr(provider, "shutdown", None)
        if callable(stop):
            stop()
