"""A scenario's view of one broker: it sends requests, and records what it observes.

A scenario is a function of a `Probe`, registered with `@scenario`. It drives the broker with
`send` (a request whose answer it needs, e.g. a member id for the next request) and `observe`
(a request whose normalised answer is compared between the brokers), or `record`s a value of
its own (a tool's output). The same scenario runs once against Kafka and once against us;
names of topics, groups and transactional ids are the scenario's own, the same on both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..raw_client import RawClient
from .normalise import Normaliser
from .tool_output import parse


@dataclass
class Broker:
    name: str  # "kafka" or "ours"
    host: str
    port: int
    tool: Callable[..., str] | None = None  # (bootstrap, tool, *args): what it printed

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Probe:
    broker: Broker
    seen: dict[str, Any] = field(default_factory=dict)
    normaliser: Normaliser = field(default_factory=Normaliser)
    _clients: list[RawClient] = field(default_factory=list)

    def connect(self) -> RawClient:
        """Another connection (e.g. a second member of a group); the first is `send`'s."""
        client = RawClient(self.broker.host, self.broker.port)
        self._clients.append(client)
        return client

    def send(self, request: Any, client: RawClient | None = None) -> Any:
        if client is None:
            client = self._clients[0] if self._clients else self.connect()
        return client.send(request)

    def ok(self, request: Any, client: RawClient | None = None) -> Any:
        """`send`, for a step the scenario needs done: every error code in the answer is 0."""
        response = self.send(request, client)
        errors = [e for e in _error_codes(response) if e]
        assert not errors, f"{self.broker.name}: {request!r} -> {response!r}"
        return response

    def observe(self, label: str, request: Any, client: RawClient | None = None) -> Any:
        response = self.send(request, client)
        self.record(label, self.normaliser.plain(response))
        return response

    def tool(self, label: str, name: str, *args: str, sort: bool = False, only: str = "") -> None:
        """Runs one of Kafka's tools against the broker and records what it printed (only
        the lines and table rows that mention `only`, if given)."""
        assert self.broker.tool is not None, "no Kafka tools here"
        printed = parse(self.broker.tool(self.broker.bootstrap, name, *args), self.normaliser, sort)
        if only:
            printed = [_mentioning(only, item) for item in printed if only in repr(item)]
        self.record(label, printed)

    def record(self, label: str, value: Any) -> None:
        assert label not in self.seen, f"observed twice: {label}"
        self.seen[label] = value

    def close(self) -> None:
        for client in self._clients:
            client.close()


def _mentioning(text: str, item: Any) -> Any:
    """A table's rows that mention `text` (a line is kept or left whole)."""
    return [row for row in item if text in repr(row)] if isinstance(item, list) else item


def _error_codes(entity: Any) -> Iterator[int]:
    if isinstance(entity, tuple | list):
        for item in entity:
            yield from _error_codes(item)
    elif dataclasses.is_dataclass(entity):
        for field_ in dataclasses.fields(entity):
            value = getattr(entity, field_.name)
            if field_.name.endswith("error_code"):
                yield int(value)
            else:
                yield from _error_codes(value)


Scenario = Callable[[Probe], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(function: Scenario) -> Scenario:
    SCENARIOS[function.__name__] = function
    return function


def run(function: Scenario, broker: Broker) -> dict[str, Any]:
    probe = Probe(broker)
    try:
        function(probe)
    finally:
        probe.close()
    return probe.seen
