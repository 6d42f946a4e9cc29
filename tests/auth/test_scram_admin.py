"""Describe/AlterUserScramCredentials over a UserStore: Kafka's answers, bounded by the org."""

from __future__ import annotations

from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode

from rafka_actors.auth.scram import (
    Mechanism,
    ScramCredential,
    ScramExchange,
    derive_credential,
    salted_password,
)
from rafka_actors.auth.scram_admin import Deletion, Outcome, Upsertion, alter, describe
from rafka_actors.auth.users import User, UserStore

SHA256, SHA512 = 1, 2


def store() -> UserStore:
    def creds(*mechanisms: Mechanism) -> dict[Mechanism, ScramCredential]:
        return {m: derive_credential(m, "pw", iterations=4096) for m in mechanisms}

    return UserStore(
        {
            "admin": User("admin", 1, credentials=creds(*Mechanism)),
            "bob": User(
                "bob",
                1,
                topic_prefixes=("b.",),
                credentials=creds(Mechanism.SCRAM_SHA_512),
            ),
            "eve": User("eve", 2, credentials=creds(Mechanism.SCRAM_SHA_256)),
        }
    )


def upsert(name: str, password: str = "new", mechanism: int = SHA256, **kw: object) -> Upsertion:
    salt = kw.pop("salt", b"salt-bytes")
    iterations = kw.pop("iterations", 5000)
    assert isinstance(salt, bytes) and isinstance(iterations, int)
    hashed = salted_password(
        Mechanism.SCRAM_SHA_256 if mechanism != SHA512 else Mechanism.SCRAM_SHA_512,
        password,
        salt,
        iterations,
    )
    return Upsertion(name, mechanism, iterations, salt, hashed)


def logs_in(users: UserStore, name: str, password: str, mechanism: Mechanism) -> bool:
    """A SCRAM exchange with kafka-python's client, against the store's credentials."""
    client = ScramClient(name, password, mechanism.value)
    server = ScramExchange(
        mechanism, users.scram_lookup(mechanism), server_nonce="n", fake_salt_key=b"k" * 32
    )
    first = server.start(client.first_message())
    assert isinstance(first, bytes)
    client.process_server_first_message(first)
    return isinstance(server.finish(client.final_message()), bytes)


def test_describe_sees_the_org_s_users_only() -> None:
    assert describe(store(), 1, None) == [
        Outcome("admin", credentials=((SHA256, 4096), (SHA512, 4096))),
        Outcome("bob", credentials=((SHA512, 4096),)),
    ]
    assert describe(store(), 1, []) == describe(store(), 1, None)  # empty: all, as Kafka
    [eve] = describe(store(), 1, ["eve"])  # another org's user is a user that does not exist
    assert eve.error == ErrorCode.resource_not_found
    assert eve.message == "Attempt to describe a user credential that does not exist: eve"
    assert describe(store(), 2, None) == [Outcome("eve", credentials=((SHA256, 4096),))]


def test_describe_answers_each_name_once_and_refuses_duplicates() -> None:
    outcomes = describe(store(), 1, ["bob", "nobody", "bob"])
    assert [(o.user, o.error) for o in outcomes] == [
        ("bob", ErrorCode.duplicate_resource),
        ("nobody", ErrorCode.resource_not_found),
    ]


def test_an_upsertion_creates_a_user_in_the_admin_s_org_that_can_log_in() -> None:
    users, outcomes = alter(store(), 1, [], [upsert("carol", "secret")])
    assert outcomes == [Outcome("carol")]
    carol = users.users["carol"]
    assert carol.org_id == 1 and carol.topic_prefixes == () and carol.group_prefixes == ()
    assert logs_in(users, "carol", "secret", Mechanism.SCRAM_SHA_256)
    assert not logs_in(users, "carol", "wrong", Mechanism.SCRAM_SHA_256)
    assert describe(users, 1, ["carol"]) == [Outcome("carol", credentials=((SHA256, 5000),))]


def test_an_upsertion_replaces_one_mechanism_and_keeps_the_user_s_org_and_prefixes() -> None:
    users, outcomes = alter(store(), 1, [], [upsert("bob", "rotated", SHA512)])
    assert outcomes == [Outcome("bob")]
    bob = users.users["bob"]
    assert bob.topic_prefixes == ("b.",) and bob.org_id == 1
    assert logs_in(users, "bob", "rotated", Mechanism.SCRAM_SHA_512)
    assert not logs_in(users, "bob", "pw", Mechanism.SCRAM_SHA_512)


def test_deleting_the_last_credential_keeps_the_user_but_not_its_login() -> None:
    users, outcomes = alter(store(), 1, [Deletion("bob", SHA512)], [])
    assert outcomes == [Outcome("bob")]
    assert users.users["bob"].credentials == {} and users.users["bob"].topic_prefixes == ("b.",)
    assert not logs_in(users, "bob", "pw", Mechanism.SCRAM_SHA_512)
    assert describe(users, 1, None) == [
        Outcome("admin", credentials=((SHA256, 4096), (SHA512, 4096)))
    ]
    [gone] = describe(users, 1, ["bob"])
    assert gone.error == ErrorCode.resource_not_found
    users, _ = alter(users, 1, [], [upsert("bob", "back", SHA256)])
    assert users.users["bob"].topic_prefixes == ("b.",)  # an upsert gives it a login again
    assert logs_in(users, "bob", "back", Mechanism.SCRAM_SHA_256)


def test_refusals_with_kafka_s_codes_and_messages() -> None:
    before = store()
    users, outcomes = alter(
        before,
        1,
        [Deletion("", SHA256), Deletion("bob", 3), Deletion("bob", SHA256), Deletion("eve", 1)],
        [
            upsert("few", iterations=4095),
            upsert("many", iterations=16385),
            upsert("nosalt", salt=b""),
            upsert("eve"),  # another org's name
            upsert("tab\tname"),
        ],
    )
    assert users == before  # nothing valid, nothing changed
    assert [(o.user, o.error, o.message) for o in outcomes] == [
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        ("bob", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        (
            "eve",
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("many", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("nosalt", ErrorCode.unacceptable_credential, "The salt must not be empty"),
        (
            "tab\tname",
            ErrorCode.unacceptable_credential,
            "user name 'tab\\tname' has control characters",
        ),
    ]


def test_a_user_named_twice_in_one_request_is_refused_and_not_changed() -> None:
    before = store()
    users, outcomes = alter(
        before,
        1,
        [Deletion("admin", SHA256), Deletion("bob", SHA512), Deletion("bob", SHA512)],
        [upsert("admin"), upsert("carol"), upsert("dave"), upsert("dave", mechanism=SHA512)],
    )
    assert [(o.user, o.error) for o in outcomes] == [
        ("carol", ErrorCode.none),
        ("bob", ErrorCode.duplicate_resource),
        ("admin", ErrorCode.duplicate_resource),
        ("dave", ErrorCode.duplicate_resource),
    ]
    assert users.users["admin"] == before.users["admin"]
    assert users.users["bob"] == before.users["bob"]
    assert "dave" not in users.users and "carol" in users.users


def test_the_changes_made_come_first_deletions_then_upsertions() -> None:
    _, outcomes = alter(
        store(), 1, [Deletion("admin", SHA512)], [upsert("x", iterations=1), upsert("carol")]
    )
    assert [(o.user, o.error) for o in outcomes] == [
        ("admin", ErrorCode.none),
        ("carol", ErrorCode.none),
        ("x", ErrorCode.unacceptable_credential),
    ]
