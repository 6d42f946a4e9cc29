"""Topics per organisation, and TOPIC_AUTHORIZATION_FAILED for a user's topic prefixes.

The handlers are called as the connection calls them, with a `ConnectionInfo` carrying the org
and user that SASL authentication would have set (tests/e2e covers SASL itself). Requests are
kio entities of the version named; responses are the handlers' kio entities.
"""

from __future__ import annotations

import datetime
import io
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import settle
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.data_plane import DataPlane

from ..batch_builder import build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE, DELETE, CG_HEARTBEAT, CG_DESCRIBE = 19, 20, 68, 69
DENIED = ErrorCode.topic_authorization_failed
NULL_ID = uuid.UUID(int=0)
NO_WAIT = datetime.timedelta(0)


def conn(org_id: int = 0, *prefixes: str) -> ConnectionInfo:
    """A connection of `org_id`; with prefixes, an authenticated user limited to them."""
    user = User("u", org_id, topic_prefixes=prefixes) if prefixes else None
    return ConnectionInfo("10.0.0.7", 4242, org_id=org_id, user=user)


def build(key: int, version: int, cls_name: str | None = None, **values: Any) -> Any:
    cls = request_class(key, version)
    if cls_name is not None:
        cls = getattr(sys.modules[cls.__module__], cls_name)
    return make(cls, **values)


async def call(ctx: BrokerContext, connection: ConnectionInfo, request: Any) -> Any:
    """The handler's response, checked to be encodable (e.g. a null name where one may be)."""
    api = API_TABLE[request.__api_key__]
    response = await settle(api.handler(ctx, connection, request.__version__, request), ctx)
    response = getattr(response, "response", response)  # group-describing handlers wrap theirs
    entity_writer(type(response))(io.BytesIO(), response)
    return response


@pytest.fixture
def data(tmp_path: Path) -> Iterator[DataPlane]:
    plane = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    yield plane
    plane.close()


@pytest.fixture
def ctx(tmp_path: Path, data: DataPlane) -> BrokerContext:
    config = BrokerConfig(data_dir=tmp_path, socket_request_max_bytes=1 << 20)
    return BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE)


# -- requests -----------------------------------------------------------------------------
def metadata(version: int, *names: str, ids: tuple[uuid.UUID, ...] = (), auto: bool = True) -> Any:
    entries = [
        build(METADATA, version, "MetadataRequestTopic", name=n, topic_id=NULL_ID) for n in names
    ]
    entries += [
        build(METADATA, version, "MetadataRequestTopic", name=None, topic_id=i) for i in ids
    ]
    return build(
        METADATA,
        version,
        topics=tuple(entries),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )


def all_topics(version: int = 12) -> Any:
    return build(METADATA, version, topics=None, include_topic_authorized_operations=False)


def produce(name: str, partition: int = 0, values: tuple[bytes, ...] = (b"v",)) -> Any:
    batch = build_batch([(None, v) for v in values])
    data = build(PRODUCE, 9, "PartitionProduceData", index=partition, records=batch)
    topic = build(PRODUCE, 9, "TopicProduceData", name=name, partition_data=(data,))
    return build(PRODUCE, 9, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(topic,))


def fetch(version: int, topic: str | uuid.UUID, partitions: tuple[int, ...] = (0,)) -> Any:
    wanted = tuple(
        build(
            FETCH,
            version,
            "FetchPartition",
            partition=p,
            fetch_offset=0,
            partition_max_bytes=1 << 20,
        )
        for p in partitions
    )
    named = {"topic_id": topic} if version >= 13 else {"topic": topic}
    return build(
        FETCH,
        version,
        max_wait=NO_WAIT,
        min_bytes=0,
        topics=(build(FETCH, version, "FetchTopic", partitions=wanted, **named),),
        forgotten_topics_data=(),
    )


def latest_offset(name: str, version: int = 7) -> Any:
    partition = build(
        LIST_OFFSETS, version, "ListOffsetsPartition", partition_index=0, timestamp=-1
    )
    topic = build(LIST_OFFSETS, version, "ListOffsetsTopic", name=name, partitions=(partition,))
    return build(LIST_OFFSETS, version, replica_id=-1, isolation_level=0, topics=(topic,))


def create(*names: str, partitions: int = 1, version: int = 7) -> Any:
    topics = tuple(
        build(
            CREATE,
            version,
            "CreatableTopic",
            name=n,
            num_partitions=partitions,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        for n in names
    )
    return build(CREATE, version, topics=topics, timeout=datetime.timedelta(seconds=5))


def delete(name: str | None = None, topic_id: uuid.UUID = NULL_ID) -> Any:
    timeout = datetime.timedelta(seconds=5)
    if name is not None and topic_id == NULL_ID:
        return build(DELETE, 5, topic_names=(name,), timeout=timeout)
    state = build(DELETE, 6, "DeleteTopicState", name=name, topic_id=topic_id)
    return build(DELETE, 6, topics=(state,), timeout=timeout)


def codes(response: Any) -> list[ErrorCode]:
    """Every partition's error code of a Produce, Fetch or ListOffsets response."""
    topics = getattr(response, "responses", None) or response.topics
    return [
        p.error_code
        for t in topics
        for p in getattr(t, "partition_responses", None) or t.partitions
    ]


def topic_id(ctx: BrokerContext, org_id: int, name: str) -> uuid.UUID:
    topic = ctx.data.topics_for(org_id).by_name(name)
    assert topic is not None
    return topic.topic_id


# -- one name, one topic per org ------------------------------------------------------------
async def test_the_same_name_in_two_orgs_is_two_topics(ctx: BrokerContext, tmp_path: Path) -> None:
    one, two = conn(1), conn(2)
    created_1 = (await call(ctx, one, create("orders", partitions=2))).topics[0]
    created_2 = (await call(ctx, two, create("orders", partitions=3))).topics[0]
    assert (created_1.error_code, created_2.error_code) == (ErrorCode.none, ErrorCode.none)
    assert created_1.topic_id != created_2.topic_id

    assert codes(await call(ctx, one, produce("orders", values=(b"a", b"b")))) == [ErrorCode.none]
    in_1 = (await call(ctx, one, fetch(12, "orders"))).responses[0].partitions[0]
    in_2 = (await call(ctx, two, fetch(12, "orders"))).responses[0].partitions[0]
    assert (in_1.high_watermark, len(in_1.records) > 0) == (2, True)
    assert (in_2.high_watermark, in_2.records) == (0, b"")
    assert (await call(ctx, two, latest_offset("orders"))).topics[0].partitions[0].offset == 0

    described = (await call(ctx, two, metadata(12, "orders"))).topics[0]
    assert (described.topic_id, len(described.partitions)) == (created_2.topic_id, 3)
    # Org 0 (a listener without SASL) has no such topic; its data dir layout is unchanged.
    missing = (await call(ctx, conn(0), metadata(12, "orders", auto=False))).topics[0]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert (tmp_path / "orgs" / "1" / "topics" / "orders" / "topic.json").is_file()
    assert (tmp_path / "orgs" / "2" / "topics" / "orders" / "1").is_dir()
    assert not (tmp_path / "topics" / "orders").exists()


async def test_org_zero_keeps_the_single_tenant_layout(ctx: BrokerContext, tmp_path: Path) -> None:
    await call(ctx, conn(0), metadata(12, "quickstart"))  # auto-created
    assert (tmp_path / "topics" / "quickstart" / "topic.json").is_file()
    assert not (tmp_path / "orgs").exists()
    assert ctx.data.topics is ctx.data.topics_for(0)


async def test_auto_create_lands_in_the_callers_org(ctx: BrokerContext) -> None:
    found = (await call(ctx, conn(3), metadata(1, "auto"))).topics[0]
    assert found.error_code == ErrorCode.none
    assert ctx.data.topics_for(3).by_name("auto") is not None
    assert ctx.data.topics_for(0).by_name("auto") is None


async def test_metadata_of_all_topics_lists_the_orgs_own(ctx: BrokerContext) -> None:
    ctx.data.create_topic("zero", 1)
    ctx.data.create_topic("mine", 1, org_id=1)
    ctx.data.create_topic("shared-name", 1, org_id=1)
    ctx.data.create_topic("shared-name", 1, org_id=2)
    ctx.data.create_topic("theirs", 1, org_id=2)
    for version in (0, 1, 12):
        request = metadata(0) if version == 0 else all_topics(version)
        listed = (await call(ctx, conn(1), request)).topics
        assert sorted(t.name for t in listed) == ["mine", "shared-name"]
    zero = (await call(ctx, conn(0), all_topics())).topics
    assert [t.name for t in zero] == ["zero"]
    assert (await call(ctx, conn(4), all_topics())).topics == ()  # an org with no topics


async def test_deleting_in_one_org_leaves_the_other(ctx: BrokerContext) -> None:
    ctx.data.create_topic("orders", 1, org_id=1)
    ctx.data.create_topic("orders", 1, org_id=2)
    deleted = (await call(ctx, conn(1), delete("orders"))).responses[0]
    assert deleted.error_code == ErrorCode.none
    assert ctx.data.topics_for(1).by_name("orders") is None
    assert ctx.data.topics_for(2).by_name("orders") is not None


async def test_topic_ids_do_not_reach_across_orgs(ctx: BrokerContext) -> None:
    ctx.data.create_topic("orders", 1, org_id=1)
    ctx.data.create_topic("secret", 1, org_id=2)
    await call(ctx, conn(2), produce("secret"))
    theirs = topic_id(ctx, 2, "secret")
    one = conn(1)

    fetched = (await call(ctx, one, fetch(13, theirs))).responses[0].partitions[0]
    assert (fetched.error_code, fetched.records) == (ErrorCode.unknown_topic_id, b"")
    described = (await call(ctx, one, metadata(12, ids=(theirs,)))).topics[0]
    assert (described.error_code, described.name, described.partitions) == (
        ErrorCode.unknown_topic_id,
        None,
        (),
    )
    deleted = (await call(ctx, one, delete(topic_id=theirs))).responses[0]
    assert deleted.error_code == ErrorCode.unknown_topic_id
    assert ctx.data.topics_for(2).by_name("secret") is not None
    # ... while its own org reaches it by id.
    own = (await call(ctx, conn(2), fetch(13, theirs))).responses[0].partitions[0]
    assert (own.error_code, own.high_watermark) == (ErrorCode.none, 1)


async def test_topics_survive_reopening_the_data_plane(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    ids = {
        org_id: data.create_topic("orders", org_id + 1, org_id=org_id).topic_id
        for org_id in (0, 1, 7)
    }
    config = BrokerConfig(data_dir=tmp_path, socket_request_max_bytes=1 << 20)
    ctx = BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE)
    await call(ctx, conn(7), produce("orders", values=(b"a", b"b", b"c")))
    data.close()

    reopened = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    try:
        assert list(reopened.orgs()) == [0, 1, 7]
        ctx = BrokerContext(config, reopened, "127.0.0.1", 9092, API_TABLE)
        for org_id, expected in ids.items():
            found = (await call(ctx, conn(org_id), metadata(12, "orders"))).topics[0]
            assert (found.topic_id, len(found.partitions)) == (expected, org_id + 1)
        log_end = (await call(ctx, conn(7), latest_offset("orders"))).topics[0].partitions[0]
        assert log_end.offset == 3
        by_id = (await call(ctx, conn(7), fetch(13, ids[7]))).responses[0].partitions[0]
        assert by_id.high_watermark == 3
    finally:
        reopened.close()


# -- KIP-848 groups see their own org's topics ------------------------------------------------
@pytest.fixture
async def group_ctx(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[BrokerContext]:
    async with trio.open_nursery() as nursery:
        ctx.groups = GroupRegistry(
            nursery,
            GroupConfig(initial_rebalance_delay_ms=0),
            MemoryCoordinatorLog(),
            topics=ctx.data.image_of,
        )
        yield ctx
        nursery.cancel_scope.cancel()


def join(group: str, topics: tuple[str, ...] | None = None, regex: str | None = None) -> Any:
    return build(
        CG_HEARTBEAT,
        1,
        group_id=group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        topic_partitions=(),
    )


def assigned(response: Any) -> dict[uuid.UUID, list[int]]:
    assert response.error_code == ErrorCode.none, response.error_message
    return {t.topic_id: list(t.partitions) for t in response.assignment.topic_partitions}


async def test_a_consumer_group_is_assigned_its_own_orgs_topics(
    group_ctx: BrokerContext, autojump_clock: trio.testing.MockClock
) -> None:
    ctx = group_ctx
    ctx.data.create_topic("events", 2, org_id=0)
    ctx.data.create_topic("events", 3, org_id=1)
    ctx.data.create_topic("events-b", 1, org_id=2)
    by_name = assigned(await call(ctx, conn(1), join("cg", topics=("events",))))
    assert by_name == {topic_id(ctx, 1, "events"): [0, 1, 2]}
    in_zero = assigned(await call(ctx, conn(0), join("cg", topics=("events",))))
    assert in_zero == {topic_id(ctx, 0, "events"): [0, 1]}
    # A regular expression matches the org's topics only: org 2's events-b is not among them.
    by_regex = assigned(await call(ctx, conn(1), join("rx", regex="events.*")))
    assert by_regex == {topic_id(ctx, 1, "events"): [0, 1, 2]}
    # A topic created in another org does not touch the group (its epoch stays).
    ctx.data.create_topic("events-c", 1, org_id=2)
    request = build(CG_DESCRIBE, 1, group_ids=("rx",), include_authorized_operations=False)
    [group] = (await call(ctx, conn(1), request)).groups
    [member] = group.members
    names = [t.topic_name for t in member.assignment.topic_partitions]
    assert (group.group_epoch, names) == (1, ["events"])


# -- a user limited to topic prefixes: TOPIC_AUTHORIZATION_FAILED ----------------------------
@pytest.fixture
def restricted(ctx: BrokerContext) -> ConnectionInfo:
    """A user of org 1 limited to `team-a.`; org 1 also has `secret`, which exists."""
    ctx.data.create_topic("team-a.events", 1, org_id=1)
    ctx.data.create_topic("secret", 2, org_id=1)
    return conn(1, "team-a.")


@pytest.mark.parametrize("version", [1, 12])
async def test_metadata_by_name_refuses_what_the_prefixes_exclude(
    ctx: BrokerContext, restricted: ConnectionInfo, version: int
) -> None:
    asked = metadata(version, "team-a.events", "secret", "secret-new", "team-a.new")
    found = {t.name: t for t in (await call(ctx, restricted, asked)).topics}
    assert {n: t.error_code for n, t in found.items()} == {
        "team-a.events": ErrorCode.none,
        "secret": DENIED,  # exists: its existence is not disclosed
        "secret-new": DENIED,  # does not exist: not auto-created either
        "team-a.new": ErrorCode.none,  # auto-created, as allowed
    }
    assert found["secret"].partitions == () and found["secret-new"].partitions == ()
    if version >= 10:
        assert found["secret"].topic_id == NULL_ID
    assert ctx.data.topics_for(1).by_name("secret-new") is None
    assert ctx.data.topics_for(1).by_name("team-a.new") is not None


async def test_metadata_by_id_and_of_all_topics(
    ctx: BrokerContext, restricted: ConnectionInfo
) -> None:
    secret = topic_id(ctx, 1, "secret")
    [by_id] = (await call(ctx, restricted, metadata(12, ids=(secret,)))).topics
    assert (by_id.error_code, by_id.name, by_id.topic_id) == (DENIED, None, secret)
    listed = (await call(ctx, restricted, all_topics())).topics
    assert [t.name for t in listed] == ["team-a.events"]
    everything = (await call(ctx, conn(1), all_topics())).topics  # no user: no restriction
    assert sorted(t.name for t in everything) == ["secret", "team-a.events"]


async def test_produce_refuses_each_partition_and_appends_nothing(
    ctx: BrokerContext, restricted: ConnectionInfo
) -> None:
    assert codes(await call(ctx, restricted, produce("secret", 0))) == [DENIED]
    assert codes(await call(ctx, restricted, produce("secret", 7))) == [DENIED]  # no such partition
    assert codes(await call(ctx, restricted, produce("secret-new"))) == [DENIED]
    assert codes(await call(ctx, restricted, produce("team-a.events"))) == [ErrorCode.none]
    secret = ctx.data.topics_for(1).by_name("secret")
    assert secret is not None and secret.partitions[0].log_end_offset == 0


async def test_fetch_refuses_by_name_and_by_id(
    ctx: BrokerContext, restricted: ConnectionInfo
) -> None:
    await call(ctx, conn(1), produce("secret"))
    by_name = await call(ctx, restricted, fetch(12, "secret", (0, 1)))
    assert codes(by_name) == [DENIED, DENIED]
    assert by_name.responses[0].partitions[0].records == b""
    assert codes(await call(ctx, restricted, fetch(12, "secret-new"))) == [DENIED]
    by_id = await call(ctx, restricted, fetch(13, topic_id(ctx, 1, "secret")))
    assert codes(by_id) == [DENIED]
    # An unknown id is UNKNOWN_TOPIC_ID first, as in Kafka; an allowed topic reads normally.
    assert codes(await call(ctx, restricted, fetch(13, uuid.uuid4()))) == [
        ErrorCode.unknown_topic_id
    ]
    assert codes(await call(ctx, restricted, fetch(12, "team-a.events"))) == [ErrorCode.none]


@pytest.mark.parametrize("version", [1, 7])
async def test_list_offsets_refuses_each_partition(
    ctx: BrokerContext, restricted: ConnectionInfo, version: int
) -> None:
    [refused] = (await call(ctx, restricted, latest_offset("secret", version))).topics[0].partitions
    assert (refused.error_code, refused.offset, refused.timestamp) == (DENIED, -1, -1)
    [missing] = (await call(ctx, restricted, latest_offset("nope", version))).topics[0].partitions
    assert missing.error_code == DENIED
    [allowed] = (
        (await call(ctx, restricted, latest_offset("team-a.events", version))).topics[0].partitions
    )
    assert (allowed.error_code, allowed.offset) == (ErrorCode.none, 0)


@pytest.mark.parametrize("version", [2, 7])
async def test_create_topics_refuses_outside_the_prefixes(
    ctx: BrokerContext, restricted: ConnectionInfo, version: int
) -> None:
    request = create("secret", "other", "team-a.more", "team-a.events", version=version)
    results = {t.name: t for t in (await call(ctx, restricted, request)).topics}
    assert {n: t.error_code for n, t in results.items()} == {
        "secret": DENIED,  # before "already exists": existence is not disclosed
        "other": DENIED,
        "team-a.more": ErrorCode.none,
        "team-a.events": ErrorCode.topic_already_exists,
    }
    if version >= 5:
        assert results["other"].topic_config_error_code == DENIED
        assert results["team-a.more"].topic_config_error_code == 0
    assert ctx.data.topics_for(1).by_name("other") is None
    assert ctx.data.topics_for(1).by_name("team-a.more") is not None


async def test_delete_topics_refuses_by_name_and_by_id(
    ctx: BrokerContext, restricted: ConnectionInfo
) -> None:
    [by_name] = (await call(ctx, restricted, delete("secret"))).responses
    assert (by_name.name, by_name.error_code) == ("secret", DENIED)
    [missing] = (await call(ctx, restricted, delete("nope"))).responses
    assert missing.error_code == DENIED
    secret = topic_id(ctx, 1, "secret")
    [by_id] = (await call(ctx, restricted, delete(topic_id=secret))).responses
    assert (by_id.name, by_id.topic_id, by_id.error_code) == (None, secret, DENIED)
    assert ctx.data.topics_for(1).by_name("secret") is not None
    [allowed] = (await call(ctx, restricted, delete("team-a.events"))).responses
    assert allowed.error_code == ErrorCode.none
