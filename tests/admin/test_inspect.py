"""`rafka-actors groups list | describe | offsets` against the real broker, real groups.

* list shows classic and KIP-848 consumer groups with their type and state, and filters;
* list and describe show each group's `cgp_` id and RRL (issue #7), the same in both;
* describe shows a classic group's protocol, assignor and decoded member assignments, and a
  consumer group's epochs, assignor and current and target assignments;
* offsets shows exact CURRENT-OFFSET, LOG-END-OFFSET and LAG, "-" where nothing was
  committed, the owning member, and a progress line per group when asked for several;
* json output parses everywhere; an unknown group is GROUP_ID_NOT_FOUND with status 1; a
  broker that is not there is status 2; and the CLI runs as a real subprocess too.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3 import request as add_offsets
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as init_producer
from kio.schema.txn_offset_commit.v3 import request as txn_commit
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i64

from rafka_actors.admin.client import KafkaClient

from ..broker_process import BrokerProcess
from .conftest import (
    CLASSIC_COMMITS,
    CONSUMER_COMMITS,
    PARTITIONS,
    PER_PARTITION,
    ActiveGroups,
    commit_simple,
    make_topic,
    unique,
)

pytestmark = pytest.mark.e2e


def test_list_shows_classic_and_consumer_groups_with_state(
    cli: Any, broker: BrokerProcess, active_groups: ActiveGroups
) -> None:
    topic, simple = make_topic(broker), unique("simple")
    commit_simple(broker, simple, topic, {0: 1})
    result = cli("list")
    assert result.code == 0, result.err
    listed = {r["GROUP"]: (r["TYPE"], r["STATE"]) for r in result.rows()}
    assert listed[active_groups.classic] == ("classic", "Stable")
    assert listed[active_groups.consumer] == ("consumer", "Stable")
    assert listed[simple] == ("classic", "Empty")

    only_consumer = cli("list", "--type", "consumer", "--output", "json")
    assert only_consumer.code == 0
    groups = {g["group"]: g for g in only_consumer.json()}
    assert active_groups.consumer in groups and active_groups.classic not in groups
    consumer_cgp_id = groups[active_groups.consumer]["cgp_id"]
    assert groups[active_groups.consumer] == {
        "group": active_groups.consumer,
        "type": "consumer",
        "state": "Stable",
        "protocol_type": "consumer",
        "cgp_id": consumer_cgp_id,
        "rrl": f"0/consumer-groups/{active_groups.consumer}",
    }
    assert consumer_cgp_id.startswith("cgp_") and len(consumer_cgp_id) == 4 + 26
    empty = {r["GROUP"] for r in cli("list", "--state", "Empty").rows()}
    assert simple in empty and active_groups.classic not in empty

    identities = {r["GROUP"]: (r["CGP-ID"], r["RRL"]) for r in result.rows()}
    assert identities[simple][1] == f"0/consumer-groups/{simple}"
    assert identities[active_groups.consumer][0] == consumer_cgp_id
    assert len({cgp_id for cgp_id, _ in identities.values()}) == len(identities)  # one each


def test_list_and_describe_agree_on_identity_and_slug_the_rrl(
    cli: Any, broker: BrokerProcess, active_groups: ActiveGroups
) -> None:
    topic, odd = make_topic(broker), unique("Team.A/Orders")  # no blank: tables split on them
    commit_simple(broker, odd, topic, {0: 1})
    listed = {g["group"]: g for g in cli("list", "--output", "json").json()}
    for group in (odd, active_groups.classic, active_groups.consumer):
        (state, *_) = cli("describe", group).tables()
        described = cli("describe", group, "--output", "json").json()
        assert state[0]["CGP-ID"] == described["cgp_id"] == listed[group]["cgp_id"]
        assert state[0]["RRL"] == described["rrl"] == listed[group]["rrl"]
    slug = odd.lower().replace("/", "-")
    assert listed[odd]["rrl"] == f"0/consumer-groups/{slug}"  # "team.a-orders-<hex>"


def test_describe_classic_group(cli: Any, active_groups: ActiveGroups) -> None:
    result = cli("describe", active_groups.classic)
    assert result.code == 0, result.err
    state, members = result.tables()
    assert state == [
        {
            "GROUP": active_groups.classic,
            "TYPE": "classic",
            "STATE": "Stable",
            "PROTOCOL-TYPE": "consumer",
            "ASSIGNMENT-STRATEGY": "range",
            "#MEMBERS": "1",
            "CGP-ID": state[0]["CGP-ID"],
            "RRL": f"0/consumer-groups/{active_groups.classic}",
        }
    ]
    assert state[0]["CGP-ID"].startswith("cgp_")
    (member,) = members
    assert member["CONSUMER-ID"] == active_groups.classic_member.member_id
    assert member["CLIENT-ID"] == "rdkafka"
    assert member["GROUP-INSTANCE-ID"] == "-"
    assert member["#PARTITIONS"] == str(PARTITIONS)
    assert member["ASSIGNMENT"] == f"{active_groups.topic}(0,1,2)"


def test_describe_consumer_group(cli: Any, active_groups: ActiveGroups) -> None:
    result = cli("describe", active_groups.consumer)
    assert result.code == 0, result.err
    (state,), (member,) = result.tables()
    assert state["TYPE"] == "consumer" and state["STATE"] == "Stable"
    assert state["ASSIGNMENT-STRATEGY"] == "uniform"  # the broker's default assignor
    assert int(state["GROUP-EPOCH"]) >= 1
    assert state["TARGET-ASSIGNMENT-EPOCH"] == state["GROUP-EPOCH"]
    assert state["#MEMBERS"] == "1"
    everything = f"{active_groups.topic}(0,1,2)"
    assert member["CURRENT-ASSIGNMENT"] == member["TARGET-ASSIGNMENT"] == everything
    assert member["CURRENT-EPOCH"] == member["TARGET-EPOCH"] == state["GROUP-EPOCH"]

    described = cli("describe", active_groups.consumer, "--output", "json").json()
    assert described["type"] == "consumer" and described["assignor"] == "uniform"
    assert described["cgp_id"] == state["CGP-ID"] and described["cgp_id"].startswith("cgp_")
    assert described["rrl"] == state["RRL"] == f"0/consumer-groups/{active_groups.consumer}"
    (m,) = described["members"]
    assert m["subscribed_topics"] == [active_groups.topic]
    assert m["assignment"] == m["target_assignment"] == {active_groups.topic: [0, 1, 2]}
    assert m["member_epoch"] == described["group_epoch"]


def test_offsets_exact_numbers_for_an_empty_group(cli: Any, broker: BrokerProcess) -> None:
    topic, group = make_topic(broker), unique("lagging")
    commit_simple(broker, group, topic, {0: 4, 1: PER_PARTITION})
    result = cli("offsets", group)
    assert result.code == 0, result.err
    assert f"Consumer group '{group}' has no active members." in result.err
    assert [
        (r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"])
        for r in result.rows()
    ] == [("0", "4", "10", "6", "-"), ("1", "10", "10", "0", "-")]

    (as_json,) = cli("offsets", group, "--output", "json").json()
    assert as_json["state"] == "Empty"
    assert as_json["partitions"][0] == {
        "topic": topic,
        "partition": 0,
        "current_offset": 4,
        "log_end_offset": 10,
        "lag": 6,
        "consumer_id": None,
        "host": None,
        "client_id": None,
        "pending_transaction": False,
    }
    assert "PENDING-TXN" not in result.out  # the column only when a transaction is pending


def test_offsets_show_pending_transactional_offsets_apart(cli: Any, broker: BrokerProcess) -> None:
    """A transaction's offset (TxnOffsetCommit, pending until the transaction's marker) is not
    the committed one: CURRENT-OFFSET stays the committed offset, and the partition is marked
    PENDING-TXN."""
    topic, group = make_topic(broker), unique("transactional")
    commit_simple(broker, group, topic, {0: 4, 1: 5})
    partition = txn_commit.TxnOffsetCommitRequestPartition(
        partition_index=i32(1),
        committed_offset=i64(9),
        committed_leader_epoch=i32(-1),
        committed_metadata=None,
    )
    with KafkaClient(broker.bootstrap) as client:
        # a transaction of its own, with the group in it (the broker verifies that first)
        producer = client.call(
            init_producer.InitProducerIdRequest(
                transactional_id=TransactionalId("tx"),
                transaction_timeout=datetime.timedelta(minutes=1),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            )
        )
        pid, epoch = producer.producer_id, producer.producer_epoch
        added = client.call(
            add_offsets.AddOffsetsToTxnRequest(
                transactional_id=TransactionalId("tx"),
                producer_id=pid,
                producer_epoch=epoch,
                group_id=GroupId(group),
            )
        )
        assert added.error_code == ErrorCode.none
        request = txn_commit.TxnOffsetCommitRequest(
            transactional_id=TransactionalId("tx"),
            group_id=GroupId(group),
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                txn_commit.TxnOffsetCommitRequestTopic(
                    name=TopicName(topic), partitions=(partition,)
                ),
            ),
        )
        (answer,) = client.call(request).topics
    assert [p.error_code for p in answer.partitions] == [ErrorCode.none]
    result = cli("offsets", group)
    assert result.code == 0, result.err
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["PENDING-TXN"]) for r in result.rows()] == [
        ("0", "4", "-"),
        ("1", "5", "pending"),
    ]
    (as_json,) = cli("offsets", group, "--output", "json").json()
    pending = [
        (p["partition"], p["current_offset"], p["pending_transaction"])
        for p in as_json["partitions"]
    ]
    assert pending == [(0, 4, False), (1, 5, True)]


@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_offsets_of_an_active_group_show_owner_and_lag(
    cli: Any, active_groups: ActiveGroups, kind: str
) -> None:
    group = getattr(active_groups, kind)
    commits = CLASSIC_COMMITS if kind == "classic" else CONSUMER_COMMITS
    result = cli("offsets", group)
    assert result.code == 0, result.err
    rows = result.rows()
    assert [int(r["PARTITION"]) for r in rows] == list(range(PARTITIONS))  # assigned ones too
    owner = getattr(active_groups, f"{kind}_member").member_id
    for r in rows:
        p = int(r["PARTITION"])
        assert r["LOG-END-OFFSET"] == str(PER_PARTITION)
        assert r["CONSUMER-ID"] == owner and r["CLIENT-ID"] == "rdkafka"
        if p in commits:
            assert (r["CURRENT-OFFSET"], r["LAG"]) == (str(commits[p]), str(10 - commits[p]))
        else:
            assert (r["CURRENT-OFFSET"], r["LAG"]) == ("-", "-")


def test_offsets_of_many_groups_show_progress_on_stderr(
    cli: Any, broker: BrokerProcess, active_groups: ActiveGroups
) -> None:
    topic, simple = make_topic(broker), unique("simple")
    commit_simple(broker, simple, topic, {2: 9})
    result = cli("offsets", simple, active_groups.classic)
    assert result.code == 0, result.err
    assert f"[1/2] {simple}" in result.err and f"[2/2] {active_groups.classic}" in result.err
    assert {r["GROUP"] for r in result.rows()} == {simple, active_groups.classic}

    quiet = cli("offsets", simple, active_groups.classic, "--output", "json")
    assert "[1/2]" not in quiet.err
    assert [g["group"] for g in quiet.json()] == [simple, active_groups.classic]

    every = cli("offsets", "--all-groups", "--output", "json").json()
    assert {simple, active_groups.classic, active_groups.consumer} <= {g["group"] for g in every}


def test_unknown_group_is_a_clear_error(cli: Any) -> None:
    for command in ("describe", "offsets"):
        result = cli(command, "no-such-group")
        assert result.code == 1
        assert result.out == ""
        assert "group 'no-such-group' does not exist: GROUP_ID_NOT_FOUND" in result.err


def test_offsets_needs_a_group(cli: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        cli("offsets")
    assert exited.value.code == 2


def test_a_stopped_broker_exits_2(cli: Any, broker_factory: Any) -> None:
    stopped = broker_factory()
    stopped.stop()
    for argv in (("list",), ("describe", "g"), ("offsets", "g"), ("delete", "g")):
        result = cli(*argv, bootstrap=stopped.bootstrap)
        assert result.code == 2, argv
        assert f"cannot connect to the broker at {stopped.bootstrap}" in result.err
        assert "Traceback" not in result.err
    nonsense = cli("list", bootstrap="no-port-here")
    assert nonsense.code == 2
    assert "bad --bootstrap 'no-port-here': expected HOST:PORT" in nonsense.err


def test_list_as_a_real_subprocess(broker: BrokerProcess, active_groups: ActiveGroups) -> None:
    argv = ["groups", "list", "--bootstrap", broker.bootstrap]
    done = subprocess.run(
        [sys.executable, "-m", "rafka_actors", *argv, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    types = {g["group"]: g["type"] for g in json.loads(done.stdout)}
    assert types[active_groups.classic] == "classic"
    assert types[active_groups.consumer] == "consumer"

    table = subprocess.run(
        [sys.executable, "-m", "rafka_actors", *argv], capture_output=True, text=True, timeout=60
    )
    assert table.stdout.split("\n")[0].split() == [
        "GROUP",
        "TYPE",
        "STATE",
        "PROTOCOL-TYPE",
        "CGP-ID",
        "RRL",
    ]
