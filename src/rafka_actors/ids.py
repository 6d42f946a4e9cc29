"""Identities: group keys, `cgp_<ULID>` group ids, member ids and RRLs.

A consumer group is an organisation-tier entity keyed by `(org_id, group_id)`. Its stable
identity `cgp_<ULID>` is minted once, when the group is first created, and survives members
leaving, the group going Empty, and restarts (design note 001). Its RRL is
`<org>/consumer-groups/<slug>`, where the slug keeps `[a-z0-9._-]` of the lower-cased group
id, turns every other run of characters into one `-`, and trims `-` from both ends (an empty
result becomes `-`); RRLs contain slashes and never go into a URL path segment.
"""

from __future__ import annotations

import re
import uuid
from typing import NamedTuple

from ulid import ULID

CGP_PREFIX = "cgp_"
_SLUG_JUNK = re.compile(r"[^a-z0-9._-]+")


class GroupKey(NamedTuple):
    org_id: int
    group_id: str


def mint_group_uuid() -> str:
    return CGP_PREFIX + str(ULID()).lower()


def new_member_id(client_id: str | None, instance_id: str | None = None) -> str:
    """Kafka's shape: `<instance id or client id>-<uuid>`."""
    prefix = instance_id if instance_id is not None else (client_id or "")
    return f"{prefix}-{uuid.uuid4()}"


def slug(group_id: str) -> str:
    return _SLUG_JUNK.sub("-", group_id.lower()).strip("-") or "-"


def rrl(org_id: int, group_id: str) -> str:
    return f"{org_id}/consumer-groups/{slug(group_id)}"
