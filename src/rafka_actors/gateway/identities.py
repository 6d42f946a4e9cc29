"""What a group-describing handler returns: the Kafka response and the groups' identities.

ListGroups, DescribeGroups and ConsumerGroupDescribe return `WithGroupIdentities`; the
connection sends the response alone unless the request header asked for identities (our
admin tool's private tag, protocol/group_identity.py), and then adds them to the response
header. Handlers collect only group id -> `cgp_` id, which they have anyway; the RRLs and the
CBOR are made only for a request that asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ids import rrl
from ..protocol.group_identity import GROUP_IDENTITY_TAG, encode_identities


@dataclass(frozen=True, slots=True)
class WithGroupIdentities:
    response: Any
    org_id: int
    cgp_ids: Mapping[str, str]  # group id -> cgp_ id, for the groups of the response that exist

    def header_tags(self) -> dict[int, bytes]:
        identities = {g: (cgp_id, rrl(self.org_id, g)) for g, cgp_id in self.cgp_ids.items()}
        return {GROUP_IDENTITY_TAG: encode_identities(identities)}
