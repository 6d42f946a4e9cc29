"""OpenTelemetry spans through opentelemetry-api only.

An operator who installs `opentelemetry-sdk` and sets a tracer provider gets the spans named
in the design notes (`rafka.gateway.*`, `rafka.broker.*`). Without one, the API's own no-op
spans still cost several microseconds each (a context manager, a context switch of the current
span) and a request makes three or four: until a provider is set, `span` hands back one shared
do-nothing context instead.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import trace

_tracer = trace.get_tracer("rafka_actors")
NOT_TRACING: AbstractContextManager[trace.Span] = nullcontext(trace.INVALID_SPAN)
_UNKNOWN = object()  # the API changed: fall back to its public function
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def tracing() -> bool:
    """Whether a tracer provider is set: a caller whose span attributes cost something to
    gather may ask first and use NOT_TRACING."""
    # trace.get_tracer_provider() looks up an environment variable on every call until a
    # provider is set; the module global it guards answers the same question for less.
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _PROVIDER_FROM_ENV:
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def span(name: str, **attributes: Any) -> AbstractContextManager[trace.Span]:
    if not tracing():
        return NOT_TRACING  # no provider configured: nothing would record this span
    return _tracer.start_as_current_span(name, attributes=attributes)
