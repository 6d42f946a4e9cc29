"""What every API handler can reach: the configuration, the data plane, the advertised address.

One `BrokerContext` per broker; one `ConnectionInfo` per client connection. Handlers are plain
functions, `handle(ctx, conn, version, request)`, returning the response (None: send nothing,
as for Produce with acks=0) or a step the connection takes first (steps.py). A handler that
reads or writes files itself (a partition log, through the data plane) says so: `@file_io`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from ..actors.group_registry import GroupRegistry
from ..actors.txn_registry import TransactionRegistry
from ..auth.acl_operations import AclOperation, cluster_operations
from ..auth.session import SaslSession
from ..auth.users import User, UserStore
from ..config import BrokerConfig
from ..log_budget import LogBudget
from ..metrics.instruments import BrokerMetrics
from ..storage.data_plane import DataPlane
from ..storage.disk_space import DiskSpace
from ..storage.group_configs import GroupConfigStore
from ..storage.topic_deletions import PendingTopicDeletions
from .limits import ByteBudget, ConnectionLimits
from .users_file import UsersFile

CONNECTION_LOGGER = "rafka_actors.gateway.connection"
SERVER_LOGGER = "rafka_actors.gateway.server"


@dataclass(slots=True)
class BrokerContext:
    config: BrokerConfig
    data: DataPlane
    advertised_host: str
    advertised_port: int
    apis: Mapping[int, Api] = field(default_factory=dict)
    # ApiVersions answers by version, built once: `apis` doesn't change while serving, and
    # every new connection asks (a 1 000-member group opens 1 000 of them).
    api_versions_answers: dict[int, Any] = field(default_factory=dict)
    groups: GroupRegistry | None = None  # None only in gateway tests that serve no groups
    transactions: TransactionRegistry | None = None  # None: transactions are not served
    limits: ConnectionLimits = field(
        default_factory=lambda: ConnectionLimits(2**31 - 1, 2**31 - 1, 2**31 - 1)
    )
    sasl: SaslSetup | None = None  # set on a SASL listener
    group_configs: GroupConfigStore | None = None  # dynamic group configs (issue 45)
    broker_configs: GroupConfigStore | None = None  # dynamic broker configs (broker_configs.py)
    topic_deletions: PendingTopicDeletions | None = None  # offsets still to tombstone (45)
    metrics: BrokerMetrics | None = None  # set when metrics.listen is
    frame_bytes: ByteBudget = field(init=False)  # queued.max.request.bytes
    users_file: UsersFile = field(init=False)  # sasl.users.file, for the SCRAM admin APIs
    # one budget of connection-close log lines per broker (a flood must not flood the log)
    close_log: LogBudget = field(
        default_factory=lambda: LogBudget(logging.getLogger(CONNECTION_LOGGER), per_interval=50)
    )
    refusal_log: LogBudget = field(  # connections refused by a limit: one line per 10 s
        default_factory=lambda: LogBudget(logging.getLogger(SERVER_LOGGER), per_interval=1)
    )
    disk_space: DiskSpace | None = None  # the data dir's free bytes (`.free_bytes`), if watched

    def __post_init__(self) -> None:
        capacity = self.config.queued_max_request_bytes
        self.frame_bytes = ByteBudget(capacity if capacity > 0 else 2**63)
        self.users_file = UsersFile(self.config.users_file)

    def registry(self) -> GroupRegistry:
        if self.groups is None:
            raise RuntimeError("this broker context has no group registry")
        return self.groups

    def txn_registry(self) -> TransactionRegistry:
        if self.transactions is None:
            raise RuntimeError("this broker context has no transaction registry")
        return self.transactions

    def security(self) -> SaslSetup:
        if self.sasl is None:
            raise RuntimeError("this listener has no SASL")
        return self.sasl

    def new_sasl_session(self) -> SaslSession | None:
        if self.sasl is None:
            return None
        return SaslSession(
            self.sasl.mechanisms, self.sasl.users, fake_salt_key=self.sasl.fake_salt_key
        )

    @property
    def node_id(self) -> int:
        return self.config.node_id


# What may be asked before authentication on a SASL listener: ApiVersions and the exchange.
PRE_AUTH_APIS = frozenset({18, 17, 36})


@dataclass(frozen=True, slots=True)
class SaslSetup:
    mechanisms: tuple[str, ...]
    users: UserStore  # what new logins check; replaced whole when the users file changes
    fake_salt_key: bytes  # makes an unknown user's SCRAM salt stable (auth/scram.py)
    hash_limiter: trio.CapacityLimiter  # worker threads hashing PLAIN passwords

    def with_users(self, users: UserStore) -> SaslSetup:
        return dataclasses.replace(self, users=users)


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection's identity. `org_id` and `user` are set once, at authentication
    (never from request fields); on a listener without SASL they stay org 0 and no user."""

    peer_host: str
    peer_port: int
    client_id: str | None = None
    org_id: int = 0
    user: User | None = None  # the authenticated user; None: unauthenticated, no restriction
    sasl: SaslSession | None = None  # the exchange in progress, on a SASL listener
    gate: frozenset[int] | None = None  # api keys served before authentication; None: all
    close_after_reply: str | None = None  # why, when the reply being sent is the last

    @property
    def client_host(self) -> str:
        """The client's address as groups show it: Kafka's `InetAddress.toString()` of an
        address it did not look up, "/10.0.0.7" (kafka-consumer-groups prints it so)."""
        return f"/{self.peer_host}"

    def may_use_group(self, group_id: str) -> bool:
        return self.user is None or self.user.may_use_group(group_id)

    def may_use_topic(self, name: str) -> bool:
        return self.user is None or self.user.may_use_topic(name)

    def may_use_transactional_id(self, transactional_id: str) -> bool:
        return self.user is None or self.user.may_use_transactional_id(transactional_id)

    def may_on_cluster(self, operation: AclOperation) -> bool:
        """Kafka's cluster ACL `operation`, as the tenancy model grants it (acl_operations.py)."""
        return operation in cluster_operations(self.user)

    def may_act_on_cluster(self) -> bool:
        """Kafka's CLUSTER_ACTION (WriteTxnMarkers, AddPartitionsToTxn v4+, which brokers and
        admins send): they act on any producer's transaction, so a user limited to some
        topics or transactional ids may not."""
        return self.may_on_cluster(AclOperation.CLUSTER_ACTION)


# (ctx, conn, version, request) -> the response, None (send nothing) or a step (steps.py)
Handler = Callable[[BrokerContext, ConnectionInfo, int, Any], Any]
H = TypeVar("H", bound=Handler)


def file_io(handler: H) -> H:
    """Says that `handler` reads or writes files itself, through the data plane or a store:
    a partition log's append or read, a topic's directory, a store's JSON file. It does so on
    the event loop, as Kafka's request threads write their logs: only what the page cache
    makes quick (fsyncs run in worker threads, elsewhere). Every other handler is sans-IO;
    tests/gateway/conftest.py holds them to it."""
    handler.file_io = True  # type: ignore[attr-defined]
    return handler


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    span: str | None = None  # the design notes' span for this API (telemetry.py)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def file_io(self) -> bool:
        """Whether its handler does file I/O itself (`file_io`)."""
        return getattr(self.handler, "file_io", False)
