"""DescribeUserScramCredentials and AlterUserScramCredentials over the users file, within an org.

Pure functions of a `UserStore`, answering as Kafka's ScramImage.describe and
ScramControlManager.alterCredentials do, with the org as a boundary: an org admin sees and
changes its own org's users only. Another org's user is described and deleted as a user that
does not exist (RESOURCE_NOT_FOUND), and upserting its name is refused (UNACCEPTABLE_CREDENTIAL):
user names are global, the one thing an admin learns of another org is that a name is taken.

An upsertion carries the client's salted password (Hi(password, salt, iterations), RFC 5802);
the stored and server keys are derived from it, as Kafka's controller does, so no password
reaches the broker. A new user gets the admin's org and no prefixes (every topic, group and
transactional id of its org, as the admin itself has) and may log in with that mechanism; an
existing one keeps its org and prefixes. Deleting a user's last credential keeps the user
(with its org and prefixes) but it can no longer log in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from .scram import MAX_ITERATIONS, MIN_ITERATIONS, Mechanism, credential_from_salted
from .users import User, UsersFileError, UserStore, check_name

MECHANISMS = {1: Mechanism.SCRAM_SHA_256, 2: Mechanism.SCRAM_SHA_512}  # Kafka's ScramMechanism
MECHANISM_CODES = {mechanism: code for code, mechanism in MECHANISMS.items()}
DUPLICATE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One user's answer: an error, or (Describe) its mechanisms' codes and iteration counts."""

    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def _org_user(store: UserStore, org_id: int, name: str) -> User | None:
    user = store.get(name)
    return user if user is not None and user.org_id == org_id else None


def _described(user: User) -> Outcome:
    credentials = user.credentials
    infos = tuple(
        (MECHANISM_CODES[m], credentials[m].iterations) for m in Mechanism if m in credentials
    )
    return Outcome(user.name, credentials=infos)


def describe(store: UserStore, org_id: int, names: Sequence[str] | None) -> list[Outcome]:
    """The org's users' credentials; every one that has any when `names` is null or empty."""
    if not names:
        users = [u for _, u in sorted(store.users.items()) if u.org_id == org_id]
        return [_described(u) for u in users if u.credentials]
    counts = Counter(names)
    outcomes = []
    for name in dict.fromkeys(names):  # once each, in request order
        user = _org_user(store, org_id, name)
        if counts[name] > 1:
            outcomes.append(
                Outcome(
                    name,
                    ErrorCode.duplicate_resource,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {name}",
                )
            )
        elif user is None or not user.credentials:
            outcomes.append(
                Outcome(
                    name,
                    ErrorCode.resource_not_found,
                    f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
        else:
            outcomes.append(_described(user))
    return outcomes


def _name_and_mechanism(name: str, mechanism: int) -> Outcome | None:
    if not name:
        return Outcome(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in MECHANISMS:
        return Outcome(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _deletion_error(store: UserStore, org_id: int, deletion: Deletion) -> Outcome | None:
    error = _name_and_mechanism(deletion.name, deletion.mechanism)
    if error is not None:
        return error
    user = _org_user(store, org_id, deletion.name)
    if user is None or MECHANISMS[deletion.mechanism] not in user.credentials:
        return Outcome(
            deletion.name,
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        )
    return None


def _upsertion_error(store: UserStore, org_id: int, upsertion: Upsertion) -> Outcome | None:
    name = upsertion.name
    error = _name_and_mechanism(name, upsertion.mechanism)
    if error is not None:
        return error
    try:
        check_name(name)  # what the users file holds (Kafka takes any non-empty name)
    except UsersFileError as exc:
        return Outcome(name, ErrorCode.unacceptable_credential, str(exc))
    if upsertion.iterations < MIN_ITERATIONS:
        return Outcome(name, ErrorCode.unacceptable_credential, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return Outcome(name, ErrorCode.unacceptable_credential, "Too many iterations")
    if not upsertion.salt:
        return Outcome(name, ErrorCode.unacceptable_credential, "The salt must not be empty")
    if store.get(name) is not None and _org_user(store, org_id, name) is None:
        return Outcome(name, ErrorCode.unacceptable_credential, "The user name is taken")
    return None


def alter(
    store: UserStore,
    org_id: int,
    deletions: Sequence[Deletion],
    upsertions: Sequence[Upsertion],
) -> tuple[UserStore, list[Outcome]]:
    """The store with the valid changes made, and one outcome per user named: the changed
    ones first (deletions, then upsertions), then the refused ones, each in request order.
    A user named twice in one request is refused with DUPLICATE_RESOURCE (Kafka's rule)."""
    errors: dict[str, Outcome] = {}
    to_delete: dict[str, Deletion] = {}
    to_upsert: dict[str, Upsertion] = {}
    for deletion in deletions:
        name = deletion.name
        if name in errors:
            continue
        if to_delete.pop(name, None) is not None:
            errors[name] = Outcome(name, ErrorCode.duplicate_resource, DUPLICATE)
        elif (error := _deletion_error(store, org_id, deletion)) is not None:
            errors[name] = error
        else:
            to_delete[name] = deletion
    for upsertion in upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
            errors[name] = Outcome(name, ErrorCode.duplicate_resource, DUPLICATE)
        elif (error := _upsertion_error(store, org_id, upsertion)) is not None:
            errors[name] = error
        else:
            to_upsert[name] = upsertion
    for deletion in to_delete.values():
        store = _without_credential(store, deletion)
    for upsertion in to_upsert.values():
        store = _with_credential(store, org_id, upsertion)
    done = [Outcome(name) for name in (*to_delete, *to_upsert)]
    return store, done + list(errors.values())


def _without_credential(store: UserStore, deletion: Deletion) -> UserStore:
    user = store.users[deletion.name]
    mechanism = MECHANISMS[deletion.mechanism]
    credentials = {m: c for m, c in user.credentials.items() if m is not mechanism}
    return store.with_user(replace(user, credentials=credentials))


def _with_credential(store: UserStore, org_id: int, upsertion: Upsertion) -> UserStore:
    mechanism = MECHANISMS[upsertion.mechanism]
    credential = credential_from_salted(
        mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
    )
    user = store.get(upsertion.name) or User(upsertion.name, org_id)
    return store.with_user(replace(user, credentials={**user.credentials, mechanism: credential}))
