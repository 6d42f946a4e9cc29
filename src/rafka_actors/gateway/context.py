"""What every API handler can reach: the configuration, the data plane, the advertised address.

One `BrokerContext` per broker; one `ConnectionInfo` per client connection. Handlers are
`async def handle(ctx, conn, version, request) -> response | None` (None: send nothing, as for
Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..actors.data_plane import DataPlane
from ..actors.registry import GroupRegistry
from ..auth.users import User
from ..config import BrokerConfig


@dataclass(slots=True)
class BrokerContext:
    config: BrokerConfig
    data: DataPlane
    advertised_host: str
    advertised_port: int
    apis: Mapping[int, Api] = field(default_factory=dict)
    groups: GroupRegistry | None = None  # None only in gateway tests that serve no groups

    def registry(self) -> GroupRegistry:
        if self.groups is None:
            raise RuntimeError("this broker context has no group registry")
        return self.groups

    @property
    def node_id(self) -> int:
        return self.config.node_id


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection's identity. `org_id` and `user` are set once, at authentication
    (never from request fields); on a listener without SASL they stay org 0 and no user."""

    peer_host: str
    peer_port: int
    client_id: str | None = None
    org_id: int = 0
    user: User | None = None  # the authenticated user; None: unauthenticated, no restriction
    extra: dict[str, Any] = field(default_factory=dict)

    def may_use_group(self, group_id: str) -> bool:
        return self.user is None or self.user.may_use_group(group_id)

    def may_use_topic(self, name: str) -> bool:
        return self.user is None or self.user.may_use_topic(name)


Handler = Callable[[BrokerContext, ConnectionInfo, int, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
