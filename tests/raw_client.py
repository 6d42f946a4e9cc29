"""A blocking raw-wire client for the tests that must send exactly the batches they built
(idempotent and transactional ones, retries with the same sequence): Produce v9, Fetch v11
and DescribeProducers v0 over one TCP connection, encoded and decoded with kio; `send` takes
any kio request entity, at its version, and decodes the matching response."""

from __future__ import annotations

import datetime
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.describe_producers.v0 import request as producers_req
from kio.schema.describe_producers.v0 import response as producers_resp
from kio.schema.fetch.v11 import request as fetch_req
from kio.schema.fetch.v11 import response as fetch_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp

from rafka_actors.storage.record_batch import BatchHeader, parse_header, split_batches

from .wire import parse_response, request_frame, response_header_version


class RawClient:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any) -> Any:
        """Any request (a kio request entity), answered with the response entity of its
        API and version."""
        response_cls = load_response_schema(request.__api_key__, request.__version__)
        return self._call(request, response_cls, response_header_version(request))

    def _call(self, request: Any, response_cls: type, header_version: int) -> Any:
        self.correlation += 1
        self.sock.sendall(request_frame(request, self.correlation))
        (length,) = struct.unpack(">i", self._read(4))
        correlation, response = parse_response(self._read(length), response_cls, header_version)
        assert correlation == self.correlation
        return response

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def produce(
        self, topic: str, partition: int, batch: bytes, transactional_id: str | None = None
    ) -> tuple[int, int]:
        """(error code, base offset) of one batch sent with acks=all."""
        request = produce_req.ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                produce_req.TopicProduceData(
                    name=topic,
                    partition_data=(
                        produce_req.PartitionProduceData(index=partition, records=batch),
                    ),
                ),
            ),
        )
        response = self._call(request, produce_resp.ProduceResponse, header_version=1)
        answer = response.responses[0].partition_responses[0]
        return int(answer.error_code), int(answer.base_offset)

    def fetch(self, topic: str, partition: int, offset: int, isolation_level: int) -> Any:
        """The PartitionData of one partition, read at once (no long poll)."""
        request = fetch_req.FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            isolation_level=isolation_level,
            topics=(
                fetch_req.FetchTopic(
                    topic=topic,
                    partitions=(
                        fetch_req.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        response = self._call(request, fetch_resp.FetchResponse, header_version=0)
        return response.responses[0].partitions[0]

    def stored_batches(self, topic: str, partition: int) -> list[BatchHeader]:
        """The headers of the partition's first MiB of batches, their CRCs checked."""
        records = self.fetch(topic, partition, 0, 0).records
        return [parse_header(batch) for batch in split_batches(records)]

    def describe_producers(self, topic: str, partition: int) -> Any:
        """The PartitionResponse of one partition."""
        request = producers_req.DescribeProducersRequest(
            topics=(producers_req.TopicRequest(name=topic, partition_indexes=(partition,)),)
        )
        response = self._call(request, producers_resp.DescribeProducersResponse, header_version=1)
        return response.topics[0].partitions[0]
