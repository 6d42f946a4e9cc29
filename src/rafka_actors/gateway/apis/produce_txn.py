"""Produce's transactional batches and the transaction coordinator (KIP-890).

A transactional batch whose transaction is not yet open in its partition is checked with the
transaction coordinator before it is appended (Kafka's ReplicaManager.handleProduceAppend):

- a v2 client (Produce v12+) adds the partition to its transaction by producing to it: the
  broker asks the coordinator to add it (Kafka's AddPartitionsToTxn v5 from the broker),
  again for a moment while the coordinator answers CONCURRENT_TRANSACTIONS (the client's
  previous transaction is writing its markers);
- a v1 client's batch is verified (`transaction.partition.verification.enable`): the
  coordinator must hold the partition in the producer's open transaction, which is read from
  the state it last published (transaction/verify.py), without a mailbox round trip.

The partition's producer state hands out a guard first (`DataPlane.start_verification`) and
the append must present it, so a marker written while the coordinator was asked refuses the
batch instead of letting it open a transaction nobody will end. The coordinator's errors are
turned into the ones Produce clients know, as Kafka's AddPartitionsToTxnManager and
ReplicaManager turn them. Nothing is verified where transactions are not served (a broker
context without a coordinator, as Kafka skips it without an AddPartitionsToTxnManager).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from kio.schema.errors import ErrorCode

from ...storage.record_batch import BatchHeader
from ...storage.topics import Topic
from ...storage.verification import NO_GUARD
from ...transaction.ops import AddPartitionsOp, TxnResp
from ...transaction.state import TV_2
from ...transaction.verify import verify_partitions
from ..context import BrokerContext, ConnectionInfo
from ..txn_steps import add_retry, ask_txn

ADD_PARTITION_VERSION: Final = 12  # Produce v12+: the produce adds its partition (KIP-890)
ABORTABLE_VERSION: Final = 11  # Produce v11+ knows TRANSACTION_ABORTABLE
_UNVERIFIED = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


class Pending(NamedTuple):
    """One partition's batches, validated and ready to append."""

    name: str
    partition: int
    topic: Topic
    batches: list[memoryview]
    headers: list[BatchHeader]  # each batch's
    log_start: int
    size: int  # the bytes of its records

    @property
    def header(self) -> BatchHeader:
        """The first batch's (a producer's request has one batch per partition)."""
        return self.headers[0]


class Verdict(NamedTuple):
    error: ErrorCode
    guard: int | None = None  # what the append presents; None: no verification needed
    message: str = ""


NOT_VERIFIED: Final = Verdict(ErrorCode.none)


def verify_then(
    ctx: BrokerContext,
    conn: ConnectionInfo,
    version: int,
    transactional_id: str | None,
    pending: Sequence[Pending],
    then: Callable[[list[Verdict]], Any],
) -> Any:
    """`then` gets one verdict per pending partition, once the coordinator has answered."""
    verdicts = [NOT_VERIFIED] * len(pending)
    adds = version >= ADD_PARTITION_VERSION
    txn = [  # (a transactional batch without a producer id is the data plane's to refuse)
        i for i, p in enumerate(pending) if p.header.is_transactional and p.header.producer_id >= 0
    ]
    if not txn or not transactional_id or ctx.transactions is None:
        return then(verdicts)
    if not adds and not ctx.config.transaction_partition_verification_enable:
        return then(verdicts)
    producers = {(pending[i].header.producer_id, pending[i].header.producer_epoch) for i in txn}
    if len(producers) > 1:  # Kafka fails the whole request (InvalidPidMappingException)
        mixed = Verdict(ErrorCode.invalid_producer_id_mapping, message="more than one producer")
        return then([mixed] * len(pending))
    asked: dict[int, tuple[str, int]] = {}
    for i in txn:
        p = pending[i]
        code, guard = ctx.data.start_verification(p.topic, p.partition, p.header, adds)
        verdicts[i] = Verdict(code, guard)
        if code == ErrorCode.none and guard != NO_GUARD:
            asked[i] = (p.name, p.partition)
    if not asked:
        return then(verdicts)

    def answered(codes: dict[tuple[str, int], int]) -> Any:
        for i, tp in asked.items():
            if codes[tp] != ErrorCode.none:
                verdicts[i] = produce_error(codes[tp], version)
        return then(verdicts)

    ((producer_id, epoch),) = producers
    partitions = frozenset(asked.values())
    if not adds:
        published = ctx.txn_registry().get_in(conn.org_id, transactional_id)
        return answered(verify_partitions(published, producer_id, epoch, partitions))
    op = AddPartitionsOp(producer_id, epoch, partitions, TV_2)

    def added(answer: TxnResp) -> Any:
        return answered(dict.fromkeys(partitions, answer.error_code))

    return ask_txn(conn.org_id, transactional_id, op, added, add_retry(ctx))


def produce_error(code: int, version: int) -> Verdict:
    """A coordinator's answer as Produce answers it (AddPartitionsToTxnManager, then
    ReplicaManager's translation for clients that would not retry the originals)."""
    if code == ErrorCode.producer_fenced:
        return Verdict(ErrorCode.invalid_producer_epoch)
    if code == ErrorCode.transaction_abortable and version < ABORTABLE_VERSION:
        code = ErrorCode.invalid_txn_state
    if code == ErrorCode.invalid_txn_state:
        return Verdict(ErrorCode(code), message="Partition was not added to the transaction")
    concurrent = code == ErrorCode.concurrent_transactions and version < ADD_PARTITION_VERSION
    if code in _UNVERIFIED or concurrent:
        name = ErrorCode(code).name.upper()
        return Verdict(
            ErrorCode.not_enough_replicas,
            message="Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {name}",
        )
    return Verdict(ErrorCode(code))
