"""OpenTelemetry spans through opentelemetry-api only.

An operator who installs `opentelemetry-sdk` and sets a tracer provider gets the spans named
in the design notes (`rafka.gateway.*`, `rafka.broker.*`). Without one, the API's own no-op
spans still cost several microseconds each (a context manager, a context switch of the current
span) and a request makes three or four: until a provider is set, `span` hands back one shared
do-nothing context instead.

Parents. A gateway span is the child of whatever the connection's task has current (nothing:
each request starts a trace). Work an actor does for a request runs in the actor's task, which
keeps the context it was started in (the first request that woke it), so its spans never take
the current context: the request's context travels with the op (`current_context`, carried on
the actor's mailbox envelope) and the actor's span names it as parent (`span_in`). Work done
once for several requests (an actor's batch written to the coordinator log) is one span:
the child of its request when it serves one, otherwise the start of its own trace with a
link to each request, as OpenTelemetry advises for batches (`batch_span`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

_tracer = trace.get_tracer("rafka_actors")
NOT_TRACING: AbstractContextManager[trace.Span] = nullcontext(trace.INVALID_SPAN)
_UNKNOWN = object()  # the API changed: fall back to its public function
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
ROOT: Final = Context()  # no span in it: a span started here begins a trace of its own


def tracing() -> bool:
    """Whether a tracer provider is set: a caller whose span attributes cost something to
    gather may ask first and use NOT_TRACING."""
    # trace.get_tracer_provider() looks up an environment variable on every call until a
    # provider is set; the module global it guards answers the same question for less.
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _PROVIDER_FROM_ENV:
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def span(name: str, **attributes: Any) -> AbstractContextManager[trace.Span]:
    """A span under the current one (the gateway's, in the connection's task)."""
    if not tracing():
        return NOT_TRACING  # no provider configured: nothing would record this span
    return _tracer.start_as_current_span(name, attributes=attributes)


def current_context() -> Context | None:
    """The caller's context, for a task that works on its behalf (an actor's op); None when
    nothing traces."""
    return otel_context.get_current() if tracing() else None


def span_in(parent: Context | None, name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span under the span of `parent` (a trace of its own for None), whatever context the
    running task has."""
    if not tracing():
        return NOT_TRACING
    context = ROOT if parent is None else parent
    return _tracer.start_as_current_span(name, context=context, attributes=attributes)


def batch_span(
    name: str, parents: Sequence[Context | None], **attributes: Any
) -> AbstractContextManager[Any]:
    """A span for work done once for each of `parents` (None: a cause without a request, such
    as a timer): the child of the only one, or a trace of its own linked to every request."""
    if not tracing():
        return NOT_TRACING
    if len(parents) == 1:
        return span_in(parents[0], name, **attributes)
    links = []
    for parent in parents:
        if parent is not None:
            linked = trace.get_current_span(parent).get_span_context()
            if linked.is_valid:
                links.append(trace.Link(linked))
    return _tracer.start_as_current_span(name, context=ROOT, links=links, attributes=attributes)


def context_of(span: trace.Span) -> Context | None:
    """A context whose current span is `span` (None for the do-nothing span): the parent of
    spans made later, elsewhere, for what happened in it."""
    if not span.get_span_context().is_valid:
        return None
    return trace.set_span_in_context(span, ROOT)


@contextmanager
def detached() -> Iterator[None]:
    """Run the block with no current span: for a task that works on its own account, whose
    context was copied from whichever request started its parent."""
    token = otel_context.attach(ROOT)
    try:
        yield
    finally:
        otel_context.detach(token)
