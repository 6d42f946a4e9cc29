"""Traces for a daemon: `rafka-actors serve` sets up OpenTelemetry's SDK from the standard
OTEL_* environment variables, so an operator gets the spans of telemetry.py without code.

- `OTEL_TRACES_EXPORTER`: `otlp` (OTLP over HTTP/protobuf, to `OTEL_EXPORTER_OTLP_ENDPOINT`
  or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, default http://localhost:4318), `console` (JSON
  spans on standard output), or several, comma-separated; unset or `none`: no tracing.
- `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*` and
  `OTEL_EXPORTER_OTLP_HEADERS` are read by the SDK itself.
- Under `opentelemetry-instrument` (or with `OTEL_PYTHON_TRACER_PROVIDER`), whoever set the
  provider wins: nothing is set up here.

The SDK and the exporter are the `otel` extra (`pip install 'rafka-actors[otel]'`); without it
a set OTEL_TRACES_EXPORTER gets one warning line and the broker runs untraced. Metrics are not
exported over OTLP: `OTEL_METRICS_EXPORTER=prometheus` serves them (metrics/setup.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace

log = logging.getLogger(__name__)


def configure_tracing(environ: Mapping[str, str]) -> Callable[[], None] | None:
    """Set the tracer provider the environment asks for; return its shutdown (which flushes
    what is queued), or None if nothing was set up."""
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names or names == ["none"]:
        return None
    if "OTEL_PYTHON_TRACER_PROVIDER" in environ or not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider
    ):
        return None  # opentelemetry-instrument (or the operator) has set one
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER is set but the `otel` extra is not installed")
        return None
    provider = TracerProvider(resource=Resource.create())
    for name in names:
        exporter = _exporter(name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing: spans exported to %s", ", ".join(names))
    return provider.shutdown


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("OTEL_TRACES_EXPORTER=otlp needs the `otel` extra; no spans sent")
            return None
        return OTLPSpanExporter()
    log.warning("OTEL_TRACES_EXPORTER=%s: not supported (otlp, console or none)", name)
    return None
