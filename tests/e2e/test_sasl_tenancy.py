"""Organisations over SASL, end to end: the real broker, a users file written by the real
`rafka-actors users add`, and confluent-kafka and kafka-python logging in with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 (issue #7, point 6).

* Two users of different orgs (alice, org 1; bob, org 2) each create topic `orders`, produce
  their own records, and consume it at the same time in group `payments`: each reads only its
  own records, holds every partition (two groups, not one), commits different offsets and sees
  only its own offsets and its own group in committed() / list / describe / offset listing.
* A wrong password: each client reports an authentication failure; on a raw socket the
  SaslAuthenticate gets SASL_AUTHENTICATION_FAILED (58) and a Metadata request sent after it is
  never answered (the connection is closed). A Metadata request before authentication closes
  the connection too; ApiVersions and the SASL exchange are all that is served before it.
* carol (org 3) is restricted to the group prefix `team-a.`: `team-a.x` works, `team-b.x` gets
  GROUP_AUTHORIZATION_FAILED.
* SASL_SSL (a trustme CA and a certificate for 127.0.0.1, hostname verification on): both
  clients produce, consume and commit through it.
* The default PLAINTEXT listener still puts everyone in org 0, and refuses the SASL exchange.

Brokers run with no initial rebalance delay and a 1 s minimum session timeout, so every case
takes a few seconds; every client call has a deadline (sasl_setup.WAIT).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.admin
import kafka.errors
import pytest
from kafka.net.sasl.scram import ScramClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from ..broker_process import BrokerProcess
from .sasl_setup import (
    GROUP_SETTINGS,
    TENANTS,
    WAIT,
    ConfluentTenant,
    Login,
    Member,
    RawConnection,
    Record,
    Tenant,
    Tls,
    UserSpec,
    broker_settings,
    confluent_config,
    kafka_python_config,
    make_tls,
    write_users,
)

pytestmark = pytest.mark.e2e

ALICE = UserSpec("alice", 1, "alice-secret-1")
BOB = UserSpec("bob", 2, "bob-secret-2")
CAROL = UserSpec("carol", 3, "carol-secret-3", group_prefixes=("team-a.",))
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

API_VERSIONS = ApiVersionsRequest(client_software_name="e2e", client_software_version="1")
METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


# -- fixtures -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_users(tmp_path_factory.mktemp("sasl") / "users.json", (ALICE, BOB, CAROL))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def broker(request: pytest.FixtureRequest, broker_factory, users_file: Path, tls: Tls):  # type: ignore[no-untyped-def]
    """A broker whose listener is SASL_PLAINTEXT, or `request.param` (parametrize the fixture
    indirectly): SASL_SSL or PLAINTEXT. Named `broker` so conftest attaches its log to a
    failure."""
    protocol = getattr(request, "param", "SASL_PLAINTEXT")
    if protocol == "PLAINTEXT":
        return broker_factory(*GROUP_SETTINGS)
    return broker_factory(
        *broker_settings(protocol, users_file, tls if protocol == "SASL_SSL" else None)
    )


def wait_for_log(broker: BrokerProcess, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the broker log"
        time.sleep(0.05)


def login(user: UserSpec, mechanism: str, password: str | None = None) -> Login:
    return Login(user.name, user.password if password is None else password, mechanism)


def tenant(client: str, broker: BrokerProcess, who: Login) -> Tenant:
    return TENANTS[client](broker.bootstrap, who)


def consume_until(members: dict[str, Member], wanted: dict[str, int]) -> dict[str, list[Record]]:
    """Poll the members in turn until each has `wanted[name]` records and holds both
    partitions of its topic (every topic here has two); then poll a little longer so that
    stray records would show up."""
    got: dict[str, list[Record]] = {name: [] for name in members}
    deadline = time.monotonic() + WAIT

    def done(name: str) -> bool:
        return len(got[name]) >= wanted[name] and members[name].assignment() == {0, 1}

    while not all(done(n) for n in members):
        assert time.monotonic() < deadline, (
            f"consumed { ({n: len(r) for n, r in got.items()}) } of {wanted}, assignments "
            f"{ ({n: sorted(m.assignment()) for n, m in members.items()}) }"
        )
        for name, member in members.items():
            if not done(name):
                got[name] += member.poll(member.poll_timeout)
    settle = time.monotonic() + 0.5
    while time.monotonic() < settle:
        for name, member in members.items():
            got[name] += member.poll(0.1)
    return got


# -- 1. two orgs, one group name ----------------------------------------------------------
# Each mechanism once with each library: alice and bob use different libraries, swapped.
SHARE_CASES = [
    ("PLAIN", "confluent", "kafka-python"),
    ("SCRAM-SHA-256", "kafka-python", "confluent"),
    ("SCRAM-SHA-512", "confluent", "kafka-python"),
]


@pytest.mark.parametrize(("mechanism", "alice_client", "bob_client"), SHARE_CASES)
def test_two_orgs_use_group_payments_at_once_and_see_only_their_own(
    broker: BrokerProcess, mechanism: str, alice_client: str, bob_client: str
) -> None:
    other = {"confluent": "kafka-python", "kafka-python": "confluent"}
    users = {"alice": (ALICE, alice_client), "bob": (BOB, bob_client)}
    tenants = {n: tenant(c, broker, login(u, mechanism)) for n, (u, c) in users.items()}
    # The same topic name in both orgs: two topics, each with only its org's records.
    records = {
        "alice": {
            0: [b"alice:0:%d" % i for i in range(4)],
            1: [b"alice:1:%d" % i for i in range(3)],
        },
        "bob": {0: [b"bob:0:%d" % i for i in range(2)], 1: [b"bob:1:%d" % i for i in range(5)]},
    }
    for t in tenants.values():
        t.create_topic("orders", 2)
    for name, t in tenants.items():
        t.produce("orders", records[name])

    members = {n: t.member("payments", "orders", f"{n}-consumer") for n, t in tenants.items()}
    try:
        got = consume_until(members, {n: sum(map(len, r.values())) for n, r in records.items()})
        for name in members:
            by_partition = {
                p: [v for q, _, v in sorted(got[name], key=lambda r: r[1]) if q == p]
                for p in (0, 1)
            }
            assert by_partition == records[name], f"{name} read {got[name]}"
            # Both hold both partitions at once: two groups called `payments`, not one.
            assert members[name].assignment() == {0, 1}

        commits = {"alice": {0: 3, 1: 1}, "bob": {0: 1, 1: 4}}
        for name, member in members.items():
            member.commit(commits[name])
        for name, member in members.items():
            assert member.committed([0, 1]) == commits[name], name

        # Each org's view, through the user's own library and through the other one.
        for name, (user, client) in users.items():
            for view in (tenants[name], tenant(other[client], broker, login(user, mechanism))):
                try:
                    assert view.groups() == {"payments"}, (name, view.name)
                    described = view.describe("payments")
                    assert described.state == "STABLE", (name, view.name, described)
                    assert described.members == ((f"{name}-consumer", frozenset({0, 1})),), (
                        name,
                        view.name,
                        described,
                    )
                    expected = {("orders", p): o for p, o in commits[name].items()}
                    assert view.group_offsets("payments") == expected, (name, view.name)
                finally:
                    if view is not tenants[name]:
                        view.close()
    finally:
        for member in members.values():
            member.close()
        for t in tenants.values():
            t.close()


# -- 2. a wrong password ------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_wrong_password_is_an_authentication_error(
    broker: BrokerProcess, mechanism: str
) -> None:
    errors: list[confluent_kafka.KafkaError] = []
    config = confluent_config(broker.bootstrap, login(ALICE, mechanism, "not-her-password"))
    producer = confluent_kafka.Producer(config | {"error_cb": errors.append})
    deadline = time.monotonic() + WAIT
    codes = lambda: {e.code() for e in errors}  # noqa: E731
    while confluent_kafka.KafkaError._AUTHENTICATION not in codes():
        assert time.monotonic() < deadline, f"no authentication error, only {errors}"
        producer.poll(0.1)
    failure = next(e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION)
    assert "Authentication failed" in failure.str(), failure.str()
    with pytest.raises(confluent_kafka.KafkaException):
        producer.list_topics(timeout=2)  # nothing is served to it
    # The same user with the right password gets in: the password was the only problem.
    right = confluent_kafka.Producer(confluent_config(broker.bootstrap, login(ALICE, mechanism)))
    assert broker.port in {b.port for b in right.list_topics(timeout=WAIT).brokers.values()}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password_is_an_authentication_error(
    broker: BrokerProcess, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python retries a failed bootstrap until its timeout and then raises a timeout;
    the SaslAuthenticationFailedError it got from the broker is in its log. Short reconnect
    backoffs make it try many times within the timeout (it occasionally reads the close before
    the reply, so a single attempt is not always reported as an authentication failure)."""
    caplog.set_level(logging.WARNING, logger="kafka")
    config = kafka_python_config(broker.bootstrap, login(BOB, mechanism, "not-his-password"))
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.admin.KafkaAdminClient(
            **config,
            bootstrap_timeout_ms=2500,
            reconnect_backoff_ms=20,
            reconnect_backoff_max_ms=100,
        )
    failures = [
        r.getMessage() for r in caplog.records if "SaslAuthenticationFailed" in r.getMessage()
    ]
    assert failures, "kafka-python logged no authentication failure"
    assert any("Authentication failed" in message for message in failures), failures
    right = kafka.admin.KafkaAdminClient(
        **kafka_python_config(broker.bootstrap, login(BOB, mechanism))
    )
    try:
        assert isinstance(right.list_topics(), list)
    finally:
        right.close()


def _bad_exchange(conn: RawConnection, mechanism: str, user: UserSpec, password: str) -> object:
    """SaslHandshake, then the SaslAuthenticate round(s) of `mechanism` with `password`;
    the last SaslAuthenticate response."""
    handshake = conn.call(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, 0)
    assert handshake.error_code is ErrorCode.none, handshake
    assert set(handshake.mechanisms) == set(MECHANISMS)
    if mechanism == "PLAIN":
        token = b"\0" + user.name.encode() + b"\0" + password.encode()
        return conn.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, 1)
    scram = ScramClient(user.name, password, mechanism)
    first = conn.call(
        SaslAuthenticateRequest(auth_bytes=scram.first_message()), SaslAuthenticateResponse, 1
    )
    assert first.error_code is ErrorCode.none, first  # the server-first message
    scram.process_server_first_message(first.auth_bytes)
    final = conn.call(
        SaslAuthenticateRequest(auth_bytes=scram.final_message()), SaslAuthenticateResponse, 1
    )
    if final.error_code is ErrorCode.none:
        scram.process_server_final_message(final.auth_bytes)  # checks the server's signature
    return final


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_raw_failed_authentication_is_58_then_nothing_is_served(
    broker: BrokerProcess, mechanism: str
) -> None:
    with RawConnection(broker.host, broker.port) as conn:
        versions = conn.call(API_VERSIONS, ApiVersionsResponse, 0)  # served before auth
        assert versions.error_code is ErrorCode.none
        assert {17, 36} <= {k.api_key for k in versions.api_keys}
        failed = _bad_exchange(conn, mechanism, ALICE, "wrong")
        assert failed.error_code is ErrorCode.sasl_authentication_failed, failed
        assert "alice" not in (failed.error_message or "")  # names no user
        sent = conn.try_send(METADATA)
        assert conn.closed_unanswered(), f"Metadata after a failed login was answered ({sent=})"
    # The same exchange with the right password opens the connection to everything.
    with RawConnection(broker.host, broker.port) as conn:
        ok = _bad_exchange(conn, mechanism, ALICE, ALICE.password)
        assert ok.error_code is ErrorCode.none, ok
        metadata = conn.call(METADATA, MetadataResponse, 1)
        assert [b.port for b in metadata.brokers] == [broker.port]


def test_raw_requests_before_authentication_close_the_connection(broker: BrokerProcess) -> None:
    with RawConnection(broker.host, broker.port) as conn:  # Metadata as the first request
        conn.send(METADATA)
        assert conn.closed_unanswered()
    with RawConnection(broker.host, broker.port) as conn:  # after ApiVersions, before SASL
        assert conn.call(API_VERSIONS, ApiVersionsResponse, 0).error_code is ErrorCode.none
        conn.send(METADATA)
        assert conn.closed_unanswered()
    with RawConnection(broker.host, broker.port) as conn:  # after the handshake, mid-exchange
        handshake = conn.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 0)
        assert handshake.error_code is ErrorCode.none
        conn.send(METADATA)
        assert conn.closed_unanswered()
    wait_for_log(broker, "Metadata before authentication")


# -- 3. a group prefix --------------------------------------------------------------------
def _refused_confluent(member: Member) -> set[int]:
    """Poll until the consumer reports an error; the error codes (consume() raises them,
    error_cb collects some)."""
    codes: set[int] = set()
    deadline = time.monotonic() + WAIT
    while not codes:
        assert time.monotonic() < deadline, "the consumer of team-b.x got no error"
        try:
            assert member.poll(0.2) == [], "team-b.x read records"
        except confluent_kafka.KafkaException as exc:
            codes.add(exc.args[0].code())
        codes |= {e.code() for e in member.errors}  # type: ignore[attr-defined]
    return codes


def _offsets_refused(t: Tenant, group: str) -> bool:
    """Whether the admin's OffsetFetch of `group` fails with GROUP_AUTHORIZATION_FAILED."""
    if isinstance(t, ConfluentTenant):
        with pytest.raises(confluent_kafka.KafkaException) as info:
            t.group_offsets(group)
        code = info.value.args[0].code()
        assert code == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED, info.value
        return True
    with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
        t.group_offsets(group)
    return True


def _refused_kafka_python(member: Member) -> None:
    deadline = time.monotonic() + WAIT
    with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
        while time.monotonic() < deadline:
            assert member.poll(0.2) == [], "team-b.x read records"


@pytest.mark.parametrize(
    ("client", "mechanism"),
    [("confluent", "SCRAM-SHA-512"), ("kafka-python", "SCRAM-SHA-256"), ("kafka-python", "PLAIN")],
)
def test_group_prefix_team_a_is_refused_team_b(
    broker: BrokerProcess, client: str, mechanism: str
) -> None:
    carol = tenant(client, broker, login(CAROL, mechanism))
    try:
        carol.create_topic("work", 2)
        carol.produce("work", {0: [b"w0"], 1: [b"w1a", b"w1b"]})
        allowed = carol.member("team-a.x", "work", "carol-a")
        try:
            got = consume_until({"a": allowed}, {"a": 3})["a"]
            assert sorted(v for _, _, v in got) == [b"w0", b"w1a", b"w1b"]
            allowed.commit({0: 1, 1: 2})
            assert allowed.committed([0, 1]) == {0: 1, 1: 2}
        finally:
            allowed.close()
        refused = carol.member("team-b.x", "work", "carol-b")
        try:
            if client == "confluent":
                codes = _refused_confluent(refused)
                assert confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
            else:
                _refused_kafka_python(refused)
        finally:
            refused.close()
        assert carol.group_offsets("team-a.x") == {("work", 0): 1, ("work", 1): 2}
        assert _offsets_refused(carol, "team-b.x")
        assert "team-b.x" not in carol.groups()
    finally:
        carol.close()


# -- 4. SASL_SSL --------------------------------------------------------------------------
@pytest.mark.parametrize("broker", ["SASL_SSL"], indirect=True)
@pytest.mark.parametrize(
    ("client", "mechanism"), [("confluent", "SCRAM-SHA-256"), ("kafka-python", "SCRAM-SHA-512")]
)
def test_sasl_ssl_produce_consume_commit(
    broker: BrokerProcess, tls: Tls, client: str, mechanism: str
) -> None:
    user = ALICE
    who = Login(user.name, user.password, mechanism, "SASL_SSL", tls.ca)
    t = tenant(client, broker, who)
    try:
        t.create_topic("secure", 2)
        records = {0: [b"s0-%d" % i for i in range(3)], 1: [b"s1-%d" % i for i in range(2)]}
        t.produce("secure", records)
        member = t.member("vault", "secure", "alice-tls")
        try:
            got = consume_until({"alice": member}, {"alice": 5})["alice"]
            assert sorted(v for _, _, v in got) == sorted(records[0] + records[1])
            member.commit({0: 3, 1: 2})
            assert member.committed([0, 1]) == {0: 3, 1: 2}
        finally:
            member.close()
        assert t.group_offsets("vault") == {("secure", 0): 3, ("secure", 1): 2}
    finally:
        t.close()
    # The listener speaks TLS only: a plaintext Kafka request gets no Kafka answer.
    with RawConnection(broker.host, broker.port) as plain:
        plain.send(API_VERSIONS)
        assert plain.closed_unanswered()
    with RawConnection(broker.host, broker.port, ca=tls.ca) as secure:
        assert secure.call(API_VERSIONS, ApiVersionsResponse, 0).error_code is ErrorCode.none


# -- 5. PLAINTEXT: org 0 for everyone -----------------------------------------------------
@pytest.mark.parametrize("broker", ["PLAINTEXT"], indirect=True)
def test_plaintext_listener_puts_everyone_in_org_0(broker: BrokerProcess) -> None:
    anyone = Login("", "", protocol="PLAINTEXT")
    writer = tenant("confluent", broker, anyone)
    writer.create_topic("open", 2)
    writer.produce("open", {0: [b"o0"], 1: [b"o1"]})
    member = writer.member("open-group", "open", "plain-confluent")
    try:
        got = consume_until({"m": member}, {"m": 2})["m"]
        assert sorted(v for _, _, v in got) == [b"o0", b"o1"]
        member.commit({0: 1, 1: 1})
    finally:
        member.close()
    reader = tenant("kafka-python", broker, anyone)  # another client, another connection
    try:
        assert reader.groups() == {"open-group"}
        assert reader.group_offsets("open-group") == {("open", 0): 1, ("open", 1): 1}
    finally:
        reader.close()
    with RawConnection(broker.host, broker.port) as conn:  # no SASL here: refused, still open
        handshake = conn.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 0)
        assert handshake.error_code is ErrorCode.illegal_sasl_state
        assert [b.port for b in conn.call(METADATA, MetadataResponse, 1).brokers] == [broker.port]
