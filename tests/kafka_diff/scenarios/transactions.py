"""Transactions (the v1 protocol of EndTxn v3, as librdkafka and kafka-python speak it):
fenced epochs, unknown ids and producers, misuse of the protocol's order, and what
DescribeTransactions and ListTransactions show of a transaction before and after its end."""

from __future__ import annotations

import time

from .. import calls
from ..probe import Probe, scenario
from ..steps import offsets_at, read, topic

TXN = "txn-a"


def settled_state(probe: Probe, txn: str, timeout: float = 20.0) -> str:
    """The transaction's state once its markers are written (Prepare* ends on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        state = probe.send(calls.describe_transactions(txn)).transaction_states[0]
        if not state.transaction_state.startswith("Prepare") or time.monotonic() > deadline:
            return state.transaction_state
        time.sleep(0.1)


@scenario
def transaction_errors(probe: Probe) -> None:
    topic(probe, "txn-t")
    probe.observe("init.timeout_too_long", calls.init_producer_id(TXN, 900_001))
    probe.observe("init.empty_id", calls.init_producer_id(""))
    first = probe.ok(calls.init_producer_id(TXN))
    old, pid = first.producer_epoch, first.producer_id
    epoch = probe.observe("init.again", calls.init_producer_id(TXN)).producer_epoch
    add = calls.add_partitions
    probe.observe("add_partitions.fenced_epoch", add(TXN, pid, old, "txn-t", 0))
    probe.observe("add_partitions.unknown_txn", add("txn-none", pid, epoch, "txn-t", 0))
    probe.observe("add_partitions.other_producer", add(TXN, pid + 1, epoch, "txn-t", 0))
    probe.observe("add_partitions.unknown_topic", add(TXN, pid, epoch, "txn-none-t", 0))
    probe.observe("end.nothing_open", calls.end_txn(TXN, pid, epoch, commit=True))
    probe.observe("end.abort_nothing_open", calls.end_txn(TXN, pid, epoch, commit=False))
    records = ["a", "b"]
    produce = calls.produce
    probe.observe(
        "produce.not_added",
        produce("txn-t", records, transactional_id=TXN, producer=(pid, epoch, 0)),
    )
    probe.observe("txn_commit.not_added", calls.txn_commit(TXN, pid, epoch, "txn-g", "txn-t", 1))
    probe.observe("add_partitions.ok", add(TXN, pid, epoch, "txn-t", 0))
    probe.observe(
        "produce.ok", produce("txn-t", records, transactional_id=TXN, producer=(pid, epoch, 0))
    )
    probe.observe(
        "produce.sequence_gap",
        produce("txn-t", records, transactional_id=TXN, producer=(pid, epoch, 5)),
    )
    probe.observe(
        "produce.fenced_epoch",
        produce("txn-t", records, transactional_id=TXN, producer=(pid, old, 2)),
    )
    probe.observe("add_offsets.ok", calls.add_offsets(TXN, pid, epoch, "txn-g"))
    probe.observe("txn_commit.fenced_epoch", calls.txn_commit(TXN, pid, old, "txn-g", "txn-t", 1))
    probe.observe("txn_commit.ok", calls.txn_commit(TXN, pid, epoch, "txn-g", "txn-t", 1))
    probe.observe("describe.ongoing", calls.describe_transactions(TXN))
    probe.observe("list.ongoing", calls.list_transactions("Ongoing"))
    probe.observe("list.unknown_state", calls.list_transactions("Nonsense"))
    probe.observe(
        "offset_fetch.require_stable",
        calls.fetch_offsets(("txn-g", {"txn-t": [0]}), require_stable=True),
    )
    probe.observe("offset_fetch.unstable_allowed", calls.fetch_offsets(("txn-g", {"txn-t": [0]})))
    offsets_at(probe, "list_offsets.read_committed", "txn-t", [-1, -2], isolation_level=1)
    offsets_at(probe, "list_offsets.read_uncommitted", "txn-t", [-1, -2])
    read(probe, "fetch.read_committed", "txn-t", isolation_level=1)
    probe.observe("end.fenced_epoch", calls.end_txn(TXN, pid, old, commit=True))
    probe.observe("end.other_producer", calls.end_txn(TXN, pid + 1, epoch, commit=True))
    probe.observe("end.commit", calls.end_txn(TXN, pid, epoch, commit=True))
    probe.record("describe.state_after_commit", settled_state(probe, TXN))
    probe.observe("end.commit_retried", calls.end_txn(TXN, pid, epoch, commit=True))
    probe.observe("end.abort_after_commit", calls.end_txn(TXN, pid, epoch, commit=False))
    probe.observe("describe.committed", calls.describe_transactions(TXN))
    read(probe, "fetch.committed", "txn-t", isolation_level=1)
    probe.observe(
        "offset_fetch.committed",
        calls.fetch_offsets(("txn-g", {"txn-t": [0]}), require_stable=True),
    )
    probe.observe("describe.unknown", calls.describe_transactions("txn-none"))
    probe.observe("describe.empty_id", calls.describe_transactions(""))
    probe.observe("list.all", calls.list_transactions())


@scenario
def aborted_transaction(probe: Probe) -> None:
    topic(probe, "abort-t")
    init = probe.ok(calls.init_producer_id("txn-b"))
    pid, epoch = init.producer_id, init.producer_epoch
    probe.ok(calls.add_partitions("txn-b", pid, epoch, "abort-t", 0))
    probe.observe(
        "produce",
        calls.produce("abort-t", ["x", "y"], transactional_id="txn-b", producer=(pid, epoch, 0)),
    )
    probe.observe("end.abort", calls.end_txn("txn-b", pid, epoch, commit=False))
    probe.record("describe.state_after_abort", settled_state(probe, "txn-b"))
    probe.observe("describe.aborted", calls.describe_transactions("txn-b"))
    read(probe, "fetch.read_committed", "abort-t", isolation_level=1)
    read(probe, "fetch.read_uncommitted", "abort-t")
    offsets_at(probe, "list_offsets", "abort-t", [-1, -2], isolation_level=1)
    probe.observe("init.after_abort", calls.init_producer_id("txn-b"))
    probe.observe("end.abort_with_old_epoch", calls.end_txn("txn-b", pid, epoch, commit=False))


@scenario
def idempotent_producer(probe: Probe) -> None:
    topic(probe, "idem-t")
    init = probe.observe("init", calls.init_producer_id(None))
    pid, epoch = init.producer_id, init.producer_epoch
    produce = calls.produce
    probe.observe("produce.first_not_zero", produce("idem-t", ["a"], producer=(pid, epoch, 3)))
    probe.observe("produce.ok", produce("idem-t", ["a", "b"], producer=(pid, epoch, 0)))
    probe.observe("produce.duplicate", produce("idem-t", ["a", "b"], producer=(pid, epoch, 0)))
    probe.observe("produce.gap", produce("idem-t", ["c"], producer=(pid, epoch, 5)))
    probe.observe("produce.next", produce("idem-t", ["c"], producer=(pid, epoch, 2)))
    probe.observe("produce.epoch_ahead", produce("idem-t", ["d"], producer=(pid, epoch + 1, 0)))
    probe.observe("produce.epoch_behind", produce("idem-t", ["e"], producer=(pid, epoch, 3)))
    probe.observe("produce.unknown_producer", produce("idem-t", ["f"], producer=(pid + 7, 0, 4)))
    probe.observe(
        "produce.transactional_batch_without_id",
        produce("idem-t", ["g"], producer=(pid, epoch, 3), transactional=True),
    )
