"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), over the users file.

Kafka asks for DESCRIBE, resp. ALTER, on the cluster; here an org admin has them (a user
without prefixes, or anyone on a listener without SASL, who is org 0: auth/acl_operations.py),
and manages its own org's users only (auth/scram_admin.py). Anyone else gets
CLUSTER_AUTHORIZATION_FAILED in every user's entry (Kafka sets it as the top-level error of a
Describe too, which aborts librdkafka clients: see `failed`).

The file is read, and changed, in a worker thread (gateway/users_file.py); a change is written
before it is answered and checked by every login after it. A file that can't be read or written
is UNKNOWN_SERVER_ERROR for each user named, with the reason in the broker's log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import AclOperation
from ...auth.scram_admin import Deletion, Outcome, Upsertion, alter, describe
from ...auth.users import UsersFileError, UserStore
from ..context import BrokerContext, ConnectionInfo
from ..steps import Step
from ._build import NO_THROTTLE, make, schema

log = logging.getLogger(__name__)

DESCRIBE_KEY, ALTER_KEY = 50, 51
NOT_AUTHORIZED = "Cluster authorization failed."
UNREADABLE = "The broker's users file cannot be read; its log says why."
UNWRITABLE = "The broker's users file cannot be written; its log says why."


@dataclass(frozen=True, slots=True)
class ReadUsers(Step):
    """Read the users file; `then` gets its users, `failed` a message if it can't be read."""

    then: Callable[[UserStore], Any]
    failed: Callable[[str], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        try:
            store = await ctx.users_file.read()
        except UsersFileError as exc:
            log.error("cannot describe SCRAM credentials: %s", exc)
            return self.failed(UNREADABLE)
        return self.then(store)


@dataclass(frozen=True, slots=True)
class ChangeUsers(Step):
    """Change the users file with `edit`, then check new logins against it; `then` gets the
    edit's answer, `failed` a message if the file can't be read or written (nothing changed)."""

    edit: Callable[[UserStore], tuple[UserStore, Any]]
    then: Callable[[Any], Any]
    failed: Callable[[str], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        try:
            store, answer = await ctx.users_file.change(self.edit)
        except UsersFileError as exc:
            log.error("cannot alter SCRAM credentials: %s", exc)
            return self.failed(UNREADABLE)
        except OSError as exc:
            log.error("cannot alter SCRAM credentials: %s: %s", ctx.users_file.path, exc)
            return self.failed(UNWRITABLE)
        if ctx.sasl is not None:
            ctx.sasl = ctx.sasl.with_users(store)
        return self.then(answer)


# -- DescribeUserScramCredentials ---------------------------------------------------------
def describe_user_scram_credentials(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    names = None if request.users is None else [u.name for u in request.users]

    def failed(code: ErrorCode, message: str) -> Any:
        # In each user's entry (all users: one entry, named ""), not as the top-level error
        # Kafka sets too: librdkafka (to 2.16 at least) frees that error's message, which it
        # never allocated, and aborts the client's process.
        each = names or [""]
        return _describe_response(
            mod, tuple(_described(mod, Outcome(n, code, message)) for n in each)
        )

    if not conn.may_on_cluster(AclOperation.DESCRIBE):
        return failed(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)

    def described(store: UserStore) -> Any:
        outcomes = describe(store, conn.org_id, names)
        return _describe_response(mod, tuple(_described(mod, o) for o in outcomes))

    return ReadUsers(described, lambda message: failed(ErrorCode.unknown_server_error, message))


def _described(mod: Any, outcome: Outcome) -> Any:
    return make(
        mod.DescribeUserScramCredentialsResult,
        user=outcome.user,
        error_code=outcome.error,
        error_message=outcome.message or "",  # Kafka's default, "" (not null)
        credential_infos=tuple(
            make(mod.CredentialInfo, mechanism=code, iterations=iterations)
            for code, iterations in outcome.credentials
        ),
    )


def _describe_response(mod: Any, results: tuple[Any, ...]) -> Any:
    return make(
        mod.DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message="",  # Kafka's default
        results=results,
    )


# -- AlterUserScramCredentials ------------------------------------------------------------
def alter_user_scram_credentials(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(ALTER_KEY, version)
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [
        Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
        for u in request.upsertions
    ]

    def failed(code: ErrorCode, message: str) -> Any:
        named = sorted({d.name for d in deletions} | {u.name for u in upsertions})
        return _alter_response(mod, [Outcome(name, code, message) for name in named])

    if not conn.may_on_cluster(AclOperation.ALTER):
        return failed(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
    org_id = conn.org_id

    def edit(store: UserStore) -> tuple[UserStore, list[Outcome]]:
        return alter(store, org_id, deletions, upsertions)

    return ChangeUsers(
        edit,
        lambda outcomes: _alter_response(mod, outcomes),
        lambda message: failed(ErrorCode.unknown_server_error, message),
    )


def _alter_response(mod: Any, outcomes: list[Outcome]) -> Any:
    results = tuple(
        make(
            mod.AlterUserScramCredentialsResult,
            user=o.user,
            error_code=o.error,
            error_message=o.message,
        )
        for o in outcomes
    )
    return make(mod.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=results)
