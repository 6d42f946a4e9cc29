"""FindCoordinator (10): the gateway is the coordinator endpoint, so it answers with itself.

v0-v3 carry one key; v4+ a batch of `coordinator_keys`. No broker round trip (design note 000).

A group key the user may not use is GROUP_AUTHORIZATION_FAILED with Kafka's "no node" (id -1,
host "", port -1), as KafkaApis answers a principal without DESCRIBE on the group: per key
from v4 on, else as the whole answer with the error's message (Kafka's prepareOldResponse).
A transaction key (key type 1) outside the user's transactional-id prefixes gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED the same way (KafkaApis checks DESCRIBE on the
TRANSACTIONAL_ID resource).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# Kafka's Node.noNode() with the error; before v4 with the error's message too.
_DENIED: dict[str, Any] = {
    "node_id": -1,
    "host": "",
    "port": -1,
    "error_code": ErrorCode.group_authorization_failed,
    "error_message": None,
}
_DENIED_ONE_KEY = {**_DENIED, "error_message": "Group authorization failed."}
_TXN_DENIED: dict[str, Any] = {
    **_DENIED,
    "error_code": ErrorCode.transactional_id_authorization_failed,
}
_TXN_DENIED_ONE_KEY = {**_TXN_DENIED, "error_message": "Transactional Id authorization failed."}


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    endpoint = {
        "node_id": ctx.node_id,
        "host": ctx.advertised_host,
        "port": ctx.advertised_port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    denied_one, denied = (
        (_TXN_DENIED_ONE_KEY, _TXN_DENIED)
        if key_type == TRANSACTION_KEY_TYPE
        else (_DENIED_ONE_KEY, _DENIED)
    )
    if version < 4:
        answer = denied_one if _denied(conn, key_type, request.key) else endpoint
        return make(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **answer)
    coordinators = tuple(
        make(mod.Coordinator, key=key, **(denied if _denied(conn, key_type, key) else endpoint))
        for key in request.coordinator_keys
    )
    return make(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)


def _denied(conn: ConnectionInfo, key_type: int, key: str) -> bool:
    if key_type == TRANSACTION_KEY_TYPE:
        return not conn.may_use_transactional_id(key)
    return key_type == GROUP_KEY_TYPE and not conn.may_use_group(key)
