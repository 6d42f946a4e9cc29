"""The transaction actor's mailbox commands and their answers.

Each client API is one op; the gateway maps its answer to the response of the client's version
(including the PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH downgrade of old versions, which is
the wire's business, not the machine's). `TxnTimerFired` and `MarkersWritten` come from the
actor itself. Each op knows its error reply (`error_reply`), as the group ops do.

`version` is the client's transaction version (state.TV_LEGACY or state.TV_2), which Kafka
reads off the request's version: EndTxn v5, and the adds a Produce v12 or TxnOffsetCommit v5
makes on the client's behalf (AddPartitionsToTxn v4+, which only brokers send), are v2.
"""

from __future__ import annotations

from dataclasses import dataclass

from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_LEGACY, TopicPartition


@dataclass(frozen=True, slots=True)
class InitProducerIdOp:
    timeout_ms: int
    producer_id: int = NO_PRODUCER_ID  # v3+: the producer's current id and epoch, if any
    producer_epoch: int = NO_PRODUCER_EPOCH

    def error_reply(self, code: int, message: str | None = None) -> InitProducerIdResp:
        return InitProducerIdResp(code)


@dataclass(frozen=True, slots=True)
class InitProducerIdResp:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class AddPartitionsOp:
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    version: int = TV_LEGACY

    def error_reply(self, code: int, message: str | None = None) -> TxnResp:
        return TxnResp(code)


@dataclass(frozen=True, slots=True)
class AddOffsetsOp:
    producer_id: int
    producer_epoch: int
    group_id: str
    version: int = TV_LEGACY

    def error_reply(self, code: int, message: str | None = None) -> TxnResp:
        return TxnResp(code)


@dataclass(frozen=True, slots=True)
class EndTxnOp:
    producer_id: int
    producer_epoch: int
    committed: bool
    version: int = TV_LEGACY

    def error_reply(self, code: int, message: str | None = None) -> TxnResp:
        return TxnResp(code)


@dataclass(frozen=True, slots=True)
class TxnResp:
    """The answer of AddPartitions, AddOffsets and EndTxn: one error code; a v2 EndTxn that
    succeeds also names the producer id and epoch of the next transaction (EndTxn v5)."""

    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class ExpireTxnOp:
    """The expiry sweep: forget the transactional id if no transaction is open and it has
    not changed for `expiration_ms` (transactional.id.expiration.ms)."""

    expiration_ms: int

    def error_reply(self, code: int, message: str | None = None) -> ExpireTxnResp:
        return ExpireTxnResp(False)  # not expired


@dataclass(frozen=True, slots=True)
class ExpireTxnResp:
    expired: bool


@dataclass(frozen=True, slots=True)
class TxnTimerFired:
    """The actor's own command: the open transaction's timeout may have passed."""

    def error_reply(self, code: int, message: str | None = None) -> None:
        return None  # the actor's own: nobody waits for an answer


@dataclass(frozen=True, slots=True)
class MarkersWritten:
    """Every marker of the prepared transaction of this producer id and epoch is written."""

    producer_id: int
    producer_epoch: int

    def error_reply(self, code: int, message: str | None = None) -> None:
        return None  # the actor's own: nobody waits for an answer
