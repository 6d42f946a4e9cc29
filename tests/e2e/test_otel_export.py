"""`rafka-actors serve` with OTEL_TRACES_EXPORTER=otlp sends the design note's spans (000,
span table) to a collector: here a stand-in OTLP/HTTP receiver that decodes what it gets with
opentelemetry-proto. A real client joins a group, syncs and commits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

ExportTraceServiceRequest = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2"
).ExportTraceServiceRequest

EXPECTED = {
    "rafka.gateway.group.join",
    "rafka.gateway.group.sync",
    "rafka.gateway.group.offset-commit",
    "rafka.broker.group.join",
    "rafka.broker.group.sync",
    "rafka.broker.group.offset-commit",
    "rafka.broker.coordinator.rebalance-complete",
}


class _Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.spans: list[tuple[str, str]] = []  # (service name, span name)
        self.paths: set[str] = set()


class _Receive(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.add(self.path)
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                "",
            )
            for scope in resource_spans.scope_spans:
                self.server.spans += [(service, span.name) for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_serve_exports_the_seed_spans_over_otlp(collector: _Collector, tmp_path: Path) -> None:
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
        "OTEL_SERVICE_NAME": "rafka-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    broker = BrokerProcess(tmp_path / "data", "group.initial.rebalance.delay.ms=0", env=env).start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("traced", value=b"one")
        assert producer.flush(15) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "traced-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["traced"])
        message, deadline = None, time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None and not polled.error():
                message = polled
        assert message is not None
        consumer.commit(message=message, asynchronous=False)
        consumer.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not {n for _, n in collector.spans} >= EXPECTED:
            time.sleep(0.1)
    finally:
        broker.stop()
    names = {name for _, name in collector.spans}
    assert names >= EXPECTED, f"missing {sorted(EXPECTED - names)}; got {sorted(names)}"
    assert collector.paths == {"/v1/traces"}
    assert {service for service, _ in collector.spans} == {"rafka-under-test"}
