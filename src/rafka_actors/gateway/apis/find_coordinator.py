"""FindCoordinator (10): the gateway is the coordinator endpoint, so it answers with itself.

v0-v3 carry one key; v4+ a batch of `coordinator_keys`. No broker round trip (design note 000).

A group key the user may not use is GROUP_AUTHORIZATION_FAILED with Kafka's "no node" (id -1,
host "", port -1), as KafkaApis answers a principal without DESCRIBE on the group: per key
from v4 on, else as the whole answer with the error's message (Kafka's prepareOldResponse).
A transaction key (key type 1) outside the user's transactional-id prefixes gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED the same way (KafkaApis checks DESCRIBE on the
TRANSACTIONAL_ID resource).

The rest as Kafka 4.3.1 answers (seen side by side, tests/kafka_diff): a share key (type 2)
needs v6 and the form `group:topicId:partition`, else INVALID_REQUEST; an unknown key type
is INVALID_REQUEST with the error's message for every key. The message of an answer without
error is "NONE" before v4 (Kafka's `Errors.NONE.message()`), and "" from v4 on, where Kafka
leaves the field at its default, also beside an error.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
# Kafka's Errors.message() of the errors a key may get
_MESSAGES = {
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    found = {
        "node_id": ctx.node_id,
        "host": ctx.advertised_host,
        "port": ctx.advertised_port,
        "error_code": ErrorCode.none,
        "error_message": "NONE" if version < 4 else "",
    }

    def answer(key: str) -> dict[str, Any]:
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE):
            return _no_node(ErrorCode.invalid_request, with_message=True)  # the whole request
        refused = _refusal(conn, version, key_type, key)
        if refused is None:
            return found
        return _no_node(refused, with_message=version < 4)

    if version < 4:
        return make(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **answer(request.key))
    coordinators = tuple(
        make(mod.Coordinator, key=key, **answer(key)) for key in request.coordinator_keys
    )
    return make(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)


def _no_node(error: ErrorCode, with_message: bool) -> dict[str, Any]:
    """Kafka's Node.noNode() with the error; before v4 (and for an unknown key type) with the
    error's message, else with the field's default."""
    message = _MESSAGES[error] if with_message else ""
    return {"node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": message}


def _refusal(conn: ConnectionInfo, version: int, key_type: int, key: str) -> ErrorCode | None:
    if key_type == TRANSACTION_KEY_TYPE:
        allowed = conn.may_use_transactional_id(key)
        return None if allowed else ErrorCode.transactional_id_authorization_failed
    if key_type == GROUP_KEY_TYPE:
        return None if conn.may_use_group(key) else ErrorCode.group_authorization_failed
    return None if version >= 6 and _share_key(key) else ErrorCode.invalid_request


def _share_key(key: str) -> bool:
    """Kafka's SharePartitionKey form, `group:topicId:partition`, read from the right (the
    group may hold colons); the topic id in Kafka's base64 form."""
    parts = key.split(":")
    if len(parts) < 3 or not ":".join(parts[:-2]).strip():
        return False
    try:
        topic_id = base64.urlsafe_b64decode(parts[-2] + "==")
        int(parts[-1])
    except (binascii.Error, ValueError):
        return False
    return len(topic_id) == 16
