"""Topics: CreateTopics, CreatePartitions and DeleteTopics, right and wrong; Metadata and
Produce for unknown topics, partitions and bad names; ApiVersions' ranges."""

from __future__ import annotations

from kio.schema.api_versions.v3 import request as api_versions_req
from kio.schema.index import api_key_map

from .. import calls
from ..probe import Probe, scenario
from ..steps import topic


@scenario
def topic_admin(probe: Probe) -> None:
    probe.observe("create.ok", calls.create_topic("ta-t", 2))
    probe.observe("create.exists", calls.create_topic("ta-t", 2))
    probe.observe("create.bad_name", calls.create_topic("bad name!"))
    probe.observe("create.dot_name", calls.create_topic(".."))
    probe.observe("create.long_name", calls.create_topic("t" * 250))
    probe.observe("create.zero_partitions", calls.create_topic("ta-0", 0))
    probe.observe("create.replication_3", calls.create_topic("ta-r3", 1, 3))
    probe.observe("create.bad_config_value", calls.create_topic("ta-c", retention_ms="soon"))
    probe.observe("create.unknown_config", calls.create_topic("ta-c", no_such_config="1"))
    probe.observe("partitions.more", calls.create_partitions("ta-t", 3))
    probe.observe("partitions.fewer", calls.create_partitions("ta-t", 1))
    probe.observe("partitions.same", calls.create_partitions("ta-t", 3))
    probe.observe("partitions.unknown_topic", calls.create_partitions("ta-none", 3))
    probe.observe("delete.unknown", calls.delete_topics("ta-none"))
    probe.observe("delete.ok", calls.delete_topics("ta-t"))


@scenario
def metadata_and_produce(probe: Probe) -> None:
    topic(probe, "mp-t", 2)
    probe.observe("metadata.topic", calls.metadata("mp-t"))
    probe.observe("metadata.unknown", calls.metadata("mp-none"))
    probe.observe("metadata.bad_name", calls.metadata("bad name!"))
    probe.observe("metadata.internal", calls.metadata("__consumer_offsets"))
    probe.observe("produce.ok", calls.produce("mp-t", ["a"], partition=1))
    probe.observe("produce.unknown_topic", calls.produce("mp-none", ["a"]))
    probe.observe("produce.unknown_partition", calls.produce("mp-t", ["a"], partition=2))
    probe.observe("produce.bad_name", calls.produce("bad name!", ["a"]))
    probe.observe("fetch.ok", calls.fetch("mp-t", 1, 0))


@scenario
def api_versions(probe: Probe) -> None:
    """Each API's version range (the features are the transactions' and groups' own)."""
    answer = probe.send(
        api_versions_req.ApiVersionsRequest(
            client_software_name="kafka-diff", client_software_version="1"
        )
    )
    probe.record(
        "api_keys",
        {
            api_key_map.get(a.api_key, str(a.api_key)): f"{a.min_version}-{a.max_version}"
            for a in answer.api_keys
        },
    )
    probe.record(
        "finalized_features",
        {f.name: f.max_version_level for f in answer.finalized_features},
    )
