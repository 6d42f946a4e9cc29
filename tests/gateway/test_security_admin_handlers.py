"""Authorized operations, the SCRAM credential APIs and the ACL APIs as plain handlers: the
fields filled as Kafka fills them, the tenancy model deciding who may, the users file changed
by the steps the handlers return (taken here as the connection takes them)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.auth.acl_operations import OMITTED
from rafka_actors.auth.scram import Mechanism, derive_credential, salted_password
from rafka_actors.auth.users import User, UserStore
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.apis.scram_credentials import ChangeUsers, ReadUsers
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo, SaslSetup
from rafka_actors.gateway.idle import CloseConnection
from rafka_actors.gateway.steps import Ask
from rafka_actors.group_common.ops import DescribeGroupOpResp
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane

METADATA, DESCRIBE_GROUPS, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 3, 15, 29, 30, 31
DESCRIBE_SCRAM, ALTER_SCRAM, CLUSTER = 50, 51, 60
ORG = 7
TOPIC_OPS, CLUSTER_OPS, GROUP_OPS = 3576, 8096, 3400  # what Kafka 4.3.1 sends (no authorizer)
LIMITED = User("limited", ORG, group_prefixes=("g.",), topic_prefixes=("t",))
ADMIN = User("root", ORG)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 1, org_id=ORG)
    data.create_topic("other", 1, org_id=ORG)
    config = BrokerConfig(data_dir=tmp_path, auto_create_topics_enable=False)
    yield BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def conn(user: User | None) -> ConnectionInfo:
    return ConnectionInfo("10.0.0.7", 4242, org_id=ORG, user=user)


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    return make(getattr(sys.modules[request_class(key, version).__module__], cls_name), **values)


def call(ctx: BrokerContext, user: User | None, key: int, version: int, **values: Any) -> Any:
    return API_TABLE[key].handler(
        ctx, conn(user), version, make(request_class(key, version), **values)
    )


# -- authorized operations ------------------------------------------------------------------
def metadata(ctx: BrokerContext, user: User | None, *names: str, version: int = 10) -> Any:
    return call(
        ctx,
        user,
        METADATA,
        version,
        topics=tuple(
            nested(METADATA, version, "MetadataRequestTopic", name=n, topic_id=None) for n in names
        ),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


def test_metadata_fills_the_operations_of_the_topics_a_user_may_use(ctx: BrokerContext) -> None:
    response = metadata(ctx, LIMITED, "t", "other", "tnew", "t/bad")
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in response.topics] == [
        ("t", ErrorCode.none, TOPIC_OPS),
        ("other", ErrorCode.topic_authorization_failed, OMITTED),  # refused: not described
        ("tnew", ErrorCode.unknown_topic_or_partition, TOPIC_OPS),  # Kafka fills these too
        ("t/bad", ErrorCode.invalid_topic_exception, TOPIC_OPS),
    ]
    assert response.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    admin = metadata(ctx, ADMIN, "other")
    assert admin.topics[0].topic_authorized_operations == TOPIC_OPS
    assert admin.cluster_authorized_operations == CLUSTER_OPS
    assert metadata(ctx, None, "other").cluster_authorized_operations == CLUSTER_OPS


def test_metadata_leaves_the_fields_alone_unless_asked(ctx: BrokerContext) -> None:
    asked_not = call(
        ctx,
        None,
        METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert {t.topic_authorized_operations for t in asked_not.topics} == {OMITTED}
    v12 = metadata(ctx, None, "t", version=12)  # v11+ has no cluster field
    assert v12.topics[0].topic_authorized_operations == TOPIC_OPS
    assert not hasattr(v12, "cluster_authorized_operations")


def test_describe_cluster_operations_and_endpoint_types(ctx: BrokerContext) -> None:
    def cluster(user: User | None, endpoint: int = 1, wanted: bool = True) -> Any:
        return call(
            ctx,
            user,
            CLUSTER,
            1,
            include_cluster_authorized_operations=wanted,
            endpoint_type=endpoint,
        )

    assert cluster(None).cluster_authorized_operations == CLUSTER_OPS
    assert cluster(ADMIN).cluster_authorized_operations == CLUSTER_OPS
    assert cluster(LIMITED).cluster_authorized_operations == 0
    assert cluster(None, wanted=False).cluster_authorized_operations == OMITTED
    controller = cluster(None, endpoint=2)
    assert controller.error_code == ErrorCode.mismatched_endpoint_type
    assert (controller.cluster_id, controller.controller_id, controller.brokers) == ("", -1, ())
    unknown = cluster(None, endpoint=9)
    assert unknown.error_code == ErrorCode.unsupported_endpoint_type
    assert unknown.error_message == "Unsupported endpoint type 9"


def test_describe_groups_fills_the_operations_of_groups_described_without_error(
    ctx: BrokerContext,
) -> None:
    step = call(
        ctx,
        LIMITED,
        DESCRIBE_GROUPS,
        5,
        groups=("g.a", "x", "g.b"),
        include_authorized_operations=True,
    )
    assert isinstance(step, Ask)
    described = step.then(
        [
            DescribeGroupOpResp(ErrorCode.none, "Empty"),
            DescribeGroupOpResp(ErrorCode.not_coordinator, ""),
        ]
    ).response
    assert [(g.group_id, g.authorized_operations) for g in described.groups] == [
        ("x", OMITTED),  # refused
        ("g.a", GROUP_OPS),
        ("g.b", OMITTED),  # an error: Kafka leaves it
    ]


@pytest.mark.parametrize(("version", "code", "operations"), [
    (5, ErrorCode.none, GROUP_OPS),  # "Dead" without an error: operations as for any group
    (6, ErrorCode.group_id_not_found, OMITTED),  # KIP-1043's error: none, as Kafka
])  # fmt: skip
def test_a_group_that_is_not_there_has_operations_only_before_v6(
    ctx: BrokerContext, version: int, code: ErrorCode, operations: int
) -> None:
    step = call(
        ctx,
        LIMITED,
        DESCRIBE_GROUPS,
        version,
        groups=("g.gone",),
        include_authorized_operations=True,
    )
    assert isinstance(step, Ask)
    [group] = step.then([DescribeGroupOpResp(ErrorCode.none, "Dead")]).response.groups
    assert (group.error_code, group.group_state, group.authorized_operations) == (
        code,
        "Dead",
        operations,
    )


# -- the ACL APIs ---------------------------------------------------------------------------
def acl_filter(key: int, cls: str, **changes: int) -> Any:
    values = dict(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    values.update(changes)
    return nested(key, 3, cls, **values) if cls else values


def test_the_acl_apis_answer_as_kafka_without_an_authorizer(ctx: BrokerContext) -> None:
    described = call(ctx, None, DESCRIBE_ACLS, 3, **acl_filter(DESCRIBE_ACLS, ""))
    assert (described.error_code, described.error_message, described.resources) == (
        ErrorCode.security_disabled,
        "No Authorizer is configured on the broker",
        (),
    )
    binding = nested(
        CREATE_ACLS,
        3,
        "AclCreation",
        resource_type=2,
        resource_name="t",
        resource_pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )
    created = call(ctx, ADMIN, CREATE_ACLS, 3, creations=(binding, binding))
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")
    ] * 2
    deleted = call(
        ctx, ADMIN, DELETE_ACLS, 3, filters=(acl_filter(DELETE_ACLS, "DeleteAclsFilter"),)
    )
    [result] = deleted.filter_results
    assert (result.error_code, result.matching_acls) == (ErrorCode.security_disabled, ())


def test_the_acl_apis_check_the_cluster_permission_first(ctx: BrokerContext) -> None:
    described = call(ctx, LIMITED, DESCRIBE_ACLS, 3, **acl_filter(DESCRIBE_ACLS, ""))
    assert described.error_code == ErrorCode.cluster_authorization_failed
    deleted = call(
        ctx, LIMITED, DELETE_ACLS, 2, filters=(acl_filter(DELETE_ACLS, "DeleteAclsFilter"),)
    )
    assert deleted.filter_results[0].error_code == ErrorCode.cluster_authorization_failed


@pytest.mark.parametrize(
    "field", ["resource_type_filter", "pattern_type_filter", "operation", "permission_type"]
)
@pytest.mark.parametrize("code", [0, 99])
def test_an_unknown_element_closes_the_connection_as_kafka_does(
    ctx: BrokerContext, field: str, code: int
) -> None:
    with pytest.raises(CloseConnection, match="UNKNOWN"):
        call(ctx, None, DESCRIBE_ACLS, 3, **acl_filter(DESCRIBE_ACLS, "", **{field: code}))
    with pytest.raises(CloseConnection, match="UNKNOWN"):
        call(
            ctx,
            None,
            DELETE_ACLS,
            3,
            filters=(acl_filter(DELETE_ACLS, "DeleteAclsFilter", **{field: code}),),
        )


# -- the SCRAM credential APIs --------------------------------------------------------------
def upsertion(name: str, password: str, iterations: int = 5000) -> Any:
    salt = b"s" * 16
    hashed = salted_password(Mechanism.SCRAM_SHA_256, password, salt, iterations)
    return nested(
        ALTER_SCRAM,
        0,
        "ScramCredentialUpsertion",
        name=name,
        mechanism=1,
        iterations=iterations,
        salt=salt,
        salted_password=hashed,
    )


def test_only_an_org_admin_may_describe_or_alter(ctx: BrokerContext) -> None:
    names = (nested(DESCRIBE_SCRAM, 0, "UserName", name="a"),)
    described = call(ctx, LIMITED, DESCRIBE_SCRAM, 0, users=names)
    # in each user's entry, not at the top (which aborts librdkafka clients)
    assert described.error_code == ErrorCode.none
    assert [(r.user, r.error_code) for r in described.results] == [
        ("a", ErrorCode.cluster_authorization_failed)
    ]
    everyone = call(ctx, LIMITED, DESCRIBE_SCRAM, 0, users=None)
    assert [(r.user, r.error_code) for r in everyone.results] == [
        ("", ErrorCode.cluster_authorization_failed)
    ]
    altered = call(ctx, LIMITED, ALTER_SCRAM, 0, deletions=(), upsertions=(upsertion("b", "p"),))
    assert [(r.user, r.error_code) for r in altered.results] == [
        ("b", ErrorCode.cluster_authorization_failed)
    ]
    assert not ctx.config.users_file.exists()


async def test_an_upsert_is_written_to_the_users_file_and_checked_by_new_logins(
    ctx: BrokerContext,
) -> None:
    credentials = {
        Mechanism.SCRAM_SHA_256: derive_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=4096)
    }
    UserStore({"root": User("root", ORG, credentials=credentials)}).save(ctx.config.users_file)
    ctx.sasl = SaslSetup(("SCRAM-SHA-256",), UserStore(), b"k" * 32, trio.CapacityLimiter(1))
    step = call(
        ctx, ADMIN, ALTER_SCRAM, 0, deletions=(), upsertions=(upsertion("carol", "secret"),)
    )
    assert isinstance(step, ChangeUsers)
    response = await step.take(ctx)
    assert [(r.user, r.error_code) for r in response.results] == [("carol", ErrorCode.none)]
    on_disk = UserStore.load(ctx.config.users_file)
    assert set(on_disk.users) == {"root", "carol"} and on_disk.users["carol"].org_id == ORG
    assert ctx.sasl.users == on_disk  # what new logins check: the file as it is now

    step = call(ctx, ADMIN, DESCRIBE_SCRAM, 0, users=None)
    assert isinstance(step, ReadUsers)
    described = await step.take(ctx)
    assert [
        (r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in described.results
    ] == [
        ("carol", [(1, 5000)]),
        ("root", [(1, 4096)]),
    ]


async def test_a_users_file_that_cannot_be_read_changes_nothing(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture
) -> None:
    ctx.config.users_file.write_text("{not json")
    step = call(ctx, None, ALTER_SCRAM, 0, deletions=(), upsertions=(upsertion("x", "p"),))
    response = await step.take(ctx)
    assert [(r.user, r.error_code) for r in response.results] == [
        ("x", ErrorCode.unknown_server_error)
    ]
    assert ctx.config.users_file.read_text() == "{not json"
    assert "not valid JSON" in caplog.text
    names = (nested(DESCRIBE_SCRAM, 0, "UserName", name="x"),)
    described = await call(ctx, None, DESCRIBE_SCRAM, 0, users=names).take(ctx)
    assert [(r.user, r.error_code) for r in described.results] == [
        ("x", ErrorCode.unknown_server_error)
    ]


# -- DescribeClientQuotas -------------------------------------------------------------------
def component(entity_type: str, match_type: int, match: str | None) -> Any:
    return nested(
        48, 1, "ComponentData", entity_type=entity_type, match_type=match_type, match=match
    )


def test_no_client_quota_is_described_for_a_valid_filter(ctx: BrokerContext) -> None:
    for components in ((), (component("user", 0, "alice"), component("client-id", 1, None))):
        response = call(ctx, LIMITED, 48, 1, components=components, strict=False)
        assert (response.error_code, response.entries) == (ErrorCode.none, ())


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([("", 2, None)], ErrorCode.invalid_request, "Invalid empty entity type."),
        ([("user", 2, None), ("user", 1, None)], ErrorCode.invalid_request, "more than once"),
        ([("group", 2, None)], ErrorCode.unsupported_version, "Unsupported entity type group"),
        ([("user", 0, None)], ErrorCode.invalid_request, "MATCH_TYPE_EXACT"),
        ([("user", 1, "a")], ErrorCode.invalid_request, "MATCH_TYPE_DEFAULT"),
        ([("user", 2, "a")], ErrorCode.invalid_request, "MATCH_TYPE_SPECIFIED"),
        ([("user", 7, None)], ErrorCode.invalid_request, "Unknown match type 7"),
        ([("ip", 2, None), ("user", 2, None)], ErrorCode.invalid_request, "IP filter"),
    ],
)
def test_a_bad_quota_filter_is_refused_as_kafka_refuses_it(
    ctx: BrokerContext, components: list[tuple[str, int, str | None]], code: ErrorCode, message: str
) -> None:
    response = call(
        ctx, None, 48, 1, components=tuple(component(*c) for c in components), strict=False
    )
    assert response.error_code == code and message in response.error_message
    assert response.entries is None
