"""Dynamic broker configs (gateway/apis/broker_configs.py): Kafka's broker configs that mean
nothing here are kept and shown; this broker's own settings, and the topics' defaults, stay
static, refused with Kafka's message; a tenant may not change them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.group_configs import BROKER_CONFIGS_FILE, GroupConfigStore

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
BROKER = 4
OPERATOR = ConnectionInfo("10.0.0.7", 4242)  # a listener without SASL
TENANT = ConnectionInfo("10.0.0.8", 4242, org_id=3, user=User("alice", 3))


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    yield BrokerContext(
        BrokerConfig(data_dir=tmp_path),
        data,
        "127.0.0.1",
        9092,
        API_TABLE,
        broker_configs=GroupConfigStore.open(tmp_path, BROKER_CONFIGS_FILE),
    )
    data.close()


def _request(key: int, version: int, cls: str, **values: Any) -> Any:
    return make(getattr(sys.modules[request_class(key, version).__module__], cls), **values)


def _incremental(
    ctx: BrokerContext, conn: ConnectionInfo, name: str, *changes: tuple[str, int, str | None]
) -> Any:
    configs = tuple(
        _request(INCREMENTAL, 1, "AlterableConfig", name=n, config_operation=op, value=v)
        for n, op, v in changes
    )
    resource = _request(
        INCREMENTAL, 1, "AlterConfigsResource", resource_type=BROKER, resource_name=name,
        configs=configs,
    )  # fmt: skip
    request = make(request_class(INCREMENTAL, 1), resources=(resource,), validate_only=False)
    (answer,) = API_TABLE[INCREMENTAL].handler(ctx, conn, 1, request).responses
    return answer


def _described(ctx: BrokerContext, name: str) -> dict[str, tuple[Any, ...]]:
    resource = _request(
        DESCRIBE, 4, "DescribeConfigsResource", resource_type=BROKER, resource_name=name,
        configuration_keys=None,
    )  # fmt: skip
    request = make(
        request_class(DESCRIBE, 4),
        resources=(resource,),
        include_synonyms=True,
        include_documentation=False,
    )
    (result,) = API_TABLE[DESCRIBE].handler(ctx, OPERATOR, 4, request).results
    return {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}


def test_kafkas_dynamic_broker_configs_are_kept_and_shown(
    ctx: BrokerContext, tmp_path: Path
) -> None:
    answer = _incremental(ctx, OPERATOR, "0", ("sasl.kerberos.min.time.before.relogin", 0, "58000"))
    assert answer.error_code == ErrorCode.none
    assert (
        _incremental(ctx, OPERATOR, "", ("background.threads", 0, "9")).error_code == ErrorCode.none
    )
    described = _described(ctx, "0")
    assert described["sasl.kerberos.min.time.before.relogin"] == ("58000", 2, False)
    assert described["background.threads"] == ("9", 3, False)
    assert described["log.retention.ms"][2] is True  # a setting of ours: read-only
    # durable: a new store reads them back
    reopened = GroupConfigStore.open(tmp_path, BROKER_CONFIGS_FILE)
    assert reopened.get(0, "0") == {"sasl.kerberos.min.time.before.relogin": "58000"}
    assert (
        _incremental(ctx, OPERATOR, "", ("background.threads", 1, None)).error_code
        == ErrorCode.none
    )
    assert "background.threads" not in _described(ctx, "0")


def test_static_settings_and_topic_defaults_are_refused_as_kafka_refuses_them(
    ctx: BrokerContext,
) -> None:
    for name in ("log.retention.ms", "num.partitions", "log.cleanup.policy"):
        answer = _incremental(ctx, OPERATOR, "0", (name, 0, "1"))
        assert answer.error_code == ErrorCode.invalid_request
        assert answer.error_message.startswith(f"Cannot update these configs dynamically: [{name}]")
    answer = _incremental(ctx, OPERATOR, "", ("sasl.kerberos.min.time.before.relogin", 0, "1"))
    assert answer.error_code == ErrorCode.invalid_request
    assert "broker id must be specified" in answer.error_message
    assert _incremental(ctx, OPERATOR, "3", ("background.threads", 0, "9")).error_code == (
        ErrorCode.invalid_request  # not this broker
    )


def test_a_tenant_may_not_change_what_every_org_shares(ctx: BrokerContext) -> None:
    answer = _incremental(ctx, TENANT, "0", ("background.threads", 0, "9"))
    assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert "background.threads" not in _described(ctx, "0")
