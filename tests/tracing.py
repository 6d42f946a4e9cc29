"""One in-memory span exporter for the whole test process.

OpenTelemetry takes one tracer provider per process and refuses a second with a warning, so
two test modules that each set their own would see spans only in whichever ran first (they
share a pytest-xdist worker). Every test that reads spans uses this one, cleared first.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()
_installed = False


def span_exporter() -> InMemorySpanExporter:
    """The process's exporter, installed with the SDK's provider on first use, cleared."""
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
        _installed = True
    EXPORTER.clear()
    return EXPORTER


def parent_of(span: ReadableSpan) -> int | None:
    """The span id of `span`'s parent; None for the root of a trace."""
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id
