"""Group identities (`cgp_` id and RRL) on the wire: a private tag of the flexible headers.

Kafka's DescribeGroups, ListGroups and ConsumerGroupDescribe responses have no field for our
group identity, so it travels the way KIP-482 lets anyone extend a message without breaking
its readers: a tagged field, here in the request and response headers (header v2 / v1, the
flexible versions). Our admin tool puts `GROUP_IDENTITY_TAG` with an empty value in the
request header; only then does the broker put the same tag in the response header, holding
the CBOR map `{group_id: [cgp_id, rrl]}` of the groups in that response that exist. Real
clients never send the tag, so their responses stay byte-identical to Kafka's; a reader that
does not know the tag skips it, as KIP-482 requires. The value of the request's tag is
ignored (reserved). docs/tenancy.md, "Group identity", is the reference.
"""

from __future__ import annotations

from collections.abc import Mapping

import cbor2

# "RA" for rafka-actors: far above the small tag numbers Kafka's schemas use.
GROUP_IDENTITY_TAG = 0x5241

Identities = Mapping[str, tuple[str, str]]  # group id -> (cgp_ id, RRL)


def encode_identities(identities: Identities) -> bytes:
    return cbor2.dumps({g: [cgp_id, rrl] for g, (cgp_id, rrl) in identities.items()})


def decode_identities(value: bytes) -> dict[str, tuple[str, str]]:
    """The map a response header carried; ValueError if it is not one."""
    try:
        decoded = cbor2.loads(value)
    except (cbor2.CBORDecodeError, EOFError) as exc:
        raise ValueError(f"group identities are not CBOR: {exc}") from exc
    if not isinstance(decoded, dict):
        raise ValueError("group identities are not a map")
    identities = {}
    for group_id, pair in decoded.items():
        if not (
            isinstance(group_id, str)
            and isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(v, str) for v in pair)
        ):
            raise ValueError(f"bad group identity entry {group_id!r}: {pair!r}")
        identities[group_id] = (pair[0], pair[1])
    return identities
