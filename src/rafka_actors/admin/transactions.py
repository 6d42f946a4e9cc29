"""`rafka-actors transactions`: the operator's transaction tools, like kafka-transactions.sh.

  list                     every transactional id: coordinator, producer id and state
  describe TXN_ID          coordinator, producer id and epoch, state, timeout, start,
                           duration, partitions
  abort TXN_ID             abort the id's open transaction and fence its producer

The columns are kafka-transactions.sh's, in its order, with headers spelled as the other
tools spell theirs (TRANSACTIONAL-ID, not TransactionalId). `list` and `describe` are
ListTransactions v1 and DescribeTransactions v0; COORDINATOR is the transaction
coordinator's node id, from FindCoordinator (v4, every id at once). `abort` does what
Kafka's `force-terminate` does: an InitProducerId for the transactional id, which bumps its
epoch (so the producer is fenced) and aborts the open transaction; the coordinator answers
CONCURRENT_TRANSACTIONS until the abort's markers are written, so it is retried until then.
Every subcommand takes the options of `groups` (`--bootstrap`, `--output table|json`,
`--timeout`, `--command-config`). Exit status: 0 done; 1 the broker answered with an error or
there was nothing to abort; 2 the broker could not be reached (or a usage error).
"""

from __future__ import annotations

import argparse
import datetime
import time
from dataclasses import asdict, dataclass
from typing import Any

from kio.schema.describe_transactions.v0 import request as describe_request
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_request
from kio.schema.init_producer_id.v4 import request as init_request
from kio.schema.list_transactions.v1 import request as list_request
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i8, i16, i32Timedelta, i64

from . import render
from .cli import _common_options, _runner
from .client import BrokerError, KafkaClient

ABORT_RETRY_S = 0.1
TRANSACTION_KEY = 1  # FindCoordinator's key type of a transactional id


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int | None = None  # the node id; None: not known


@dataclass(frozen=True)
class TransactionDescription:
    coordinator: int | None
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction open
    duration_ms: int | None
    partitions: list[str]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "transactions",
        help="list, describe and abort transactions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")
    common = _common_options()
    listing = commands.add_parser(
        "list", parents=[common], help="every transactional id and its state"
    )
    listing.add_argument(
        "--state", action="append", default=[], help="only in this state (repeatable)"
    )
    listing.set_defaults(run=_runner(_list))
    describe = commands.add_parser(
        "describe", parents=[common], help="one transactional id's transaction"
    )
    describe.add_argument("transactional_id")
    describe.set_defaults(run=_runner(_describe))
    abort = commands.add_parser(
        "abort", parents=[common], help="abort the open transaction and fence its producer"
    )
    abort.add_argument("transactional_id")
    abort.set_defaults(run=_runner(_abort))


# -- the calls --------------------------------------------------------------------------------


def list_transactions(client: KafkaClient, states: list[str]) -> list[TransactionListing]:
    response = client.call(
        list_request.ListTransactionsRequest(
            state_filters=tuple(states), producer_id_filters=(), duration_filter=i64(-1)
        )
    )
    if response.error_code != ErrorCode.none:
        raise BrokerError(response.error_code, "listing transactions")
    if response.unknown_state_filters:
        raise BrokerError(
            ErrorCode.invalid_request,
            "listing transactions",
            f"unknown states: {', '.join(response.unknown_state_filters)}",
        )
    found = sorted(response.transaction_states, key=lambda t: t.transactional_id)
    coordinators = transaction_coordinators(client, [t.transactional_id for t in found])
    return [
        TransactionListing(
            t.transactional_id,
            t.producer_id,
            t.transaction_state,
            coordinators.get(t.transactional_id),
        )
        for t in found
    ]


def transaction_coordinators(
    client: KafkaClient, transactional_ids: list[str]
) -> dict[str, int | None]:
    """Each id's transaction coordinator (node id; None where the broker answered an error)."""
    if not transactional_ids:
        return {}
    response = client.call(
        find_request.FindCoordinatorRequest(
            key_type=i8(TRANSACTION_KEY), coordinator_keys=tuple(transactional_ids)
        )
    )
    return {
        c.key: int(c.node_id) if c.error_code == ErrorCode.none else None
        for c in response.coordinators
    }


def describe_transaction(client: KafkaClient, transactional_id: str) -> TransactionDescription:
    response = client.call(
        describe_request.DescribeTransactionsRequest(
            transactional_ids=(TransactionalId(transactional_id),)
        )
    )
    [state] = response.transaction_states
    if state.error_code != ErrorCode.none:
        raise BrokerError(state.error_code, f"describing transactional id {transactional_id!r}")
    start_ms = round(state.transaction_start_time.timestamp() * 1000)
    open_ = state.transaction_state in ("Ongoing", "PrepareCommit", "PrepareAbort")
    return TransactionDescription(
        transaction_coordinators(client, [transactional_id]).get(transactional_id),
        transactional_id,
        state.producer_id,
        state.producer_epoch,
        state.transaction_state,
        round(state.transaction_timeout.total_seconds() * 1000),
        start_ms,
        round(time.time() * 1000) - start_ms if open_ and start_ms >= 0 else None,
        [f"{t.topic}-{p}" for t in state.topics for p in t.partitions],
    )


def abort_transaction(client: KafkaClient, transactional_id: str) -> TransactionDescription:
    """Fence the id's producer and abort its open transaction; the state afterwards."""
    before = describe_transaction(client, transactional_id)
    if before.state != "Ongoing":
        raise BrokerError(
            ErrorCode.invalid_txn_state,
            f"aborting the transaction of {transactional_id!r}",
            f"it is {before.state}: no open transaction to abort",
        )
    deadline = time.monotonic() + client.timeout
    while True:
        response = client.call(
            init_request.InitProducerIdRequest(
                transactional_id=TransactionalId(transactional_id),
                transaction_timeout=i32Timedelta.parse(
                    datetime.timedelta(milliseconds=before.timeout_ms)
                ),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            )
        )
        if response.error_code == ErrorCode.none:
            return describe_transaction(client, transactional_id)
        if response.error_code != ErrorCode.concurrent_transactions or time.monotonic() > deadline:
            raise BrokerError(
                response.error_code, f"aborting the transaction of {transactional_id!r}"
            )
        time.sleep(ABORT_RETRY_S)  # the abort's markers are being written


# -- the commands -----------------------------------------------------------------------------


def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    listed = list_transactions(client, args.state)
    if args.output == "json":
        print(render.as_json([asdict(t) for t in listed]))
    else:
        rows = [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listed]
        headers = ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE")
        print(render.table(headers, rows))
    return 0


def _print_description(description: TransactionDescription, output: str) -> None:
    if output == "json":
        print(render.as_json(asdict(description)))
        return
    d = description
    headers = (
        "COORDINATOR",
        "TRANSACTIONAL-ID",
        "PRODUCER-ID",
        "PRODUCER-EPOCH",
        "TRANSACTION-STATE",
        "TRANSACTION-TIMEOUT-MS",
        "CURRENT-TRANSACTION-START-TIME-MS",
        "TRANSACTION-DURATION-MS",
        "TOPIC-PARTITIONS",
    )
    row = (
        d.coordinator,
        d.transactional_id,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.timeout_ms,
        d.start_ms if d.start_ms >= 0 and d.duration_ms is not None else None,
        d.duration_ms,
        ",".join(d.partitions) or None,
    )
    print(render.table(headers, [row]))


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    _print_description(describe_transaction(client, args.transactional_id), args.output)
    return 0


def _abort(client: KafkaClient, args: argparse.Namespace) -> int:
    after = abort_transaction(client, args.transactional_id)
    render.note(
        f"Aborted the open transaction of '{args.transactional_id}'; its producer is fenced "
        f"(producer id {after.producer_id}, epoch now {after.producer_epoch})."
    )
    _print_description(after, args.output)
    return 0
