"""OpenTelemetry spans through opentelemetry-api only.

Without an SDK installed and configured the API hands out non-recording spans, which cost
little; an operator who installs `opentelemetry-sdk` and sets a tracer provider gets the spans
named in the design notes (`rafka.gateway.*`, `rafka.broker.*`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

_tracer = trace.get_tracer("rafka_actors")


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current
