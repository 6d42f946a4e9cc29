"""Lookup of kio schema classes by (api_key, version).

kio generates one frozen dataclass per API message and version; these helpers
find them through kio's index and memoise the result, because the gateway asks
on every request. A missing class is reported as :class:`UnsupportedVersion`.

Kafka declares the flexible versions of every message as an open range
("N+"), so flexibility of a version kio does not know can be extrapolated from
the nearest known one. Header parsing needs that: the header must be readable
(to get the correlation id) even when the body version is unsupported.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from .errors import UnsupportedVersion

API_VERSIONS_KEY = 18


@functools.cache
def request_class(api_key: int, version: int) -> type[Any]:
    """The kio request dataclass for ``api_key`` at ``version``."""
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        raise UnsupportedVersion(api_key, version) from None


@functools.cache
def response_class(api_key: int, version: int) -> type[Any]:
    """The kio response dataclass for ``api_key`` at ``version``."""
    try:
        return load_response_schema(api_key, version)
    except KioIndexError:
        raise UnsupportedVersion(api_key, version) from None


@functools.cache
def known_versions(api_key: int) -> tuple[int, ...]:
    """Sorted versions kio has request schemas for; empty for unknown API keys."""
    name = api_key_map.get(api_key)
    if name is None:
        return ()
    return tuple(
        sorted(v for v, types in schema_name_map[name].items() if EntityType.request in types)
    )


def _nearest_known(api_key: int, version: int) -> int | None:
    """The known version whose flexibility ``version`` shares, or None for unknown keys."""
    versions = known_versions(api_key)
    if not versions:
        return None
    if version in versions:
        return version
    if version > versions[-1]:
        return versions[-1]
    # Below the known range or in a gap: flexibility only ever switches on upwards,
    # so the closest lower (or lowest) known version has the same answer.
    lower = [v for v in versions if v < version]
    return lower[-1] if lower else versions[0]


def is_flexible_request(api_key: int, version: int) -> bool:
    """Whether requests of this version use request header v2 (tagged fields).

    Unknown API keys are treated as non-flexible so their header (v1 prefix)
    can still be read; Kafka closes the connection for them anyway.
    """
    known = _nearest_known(api_key, version)
    return known is not None and bool(request_class(api_key, known).__flexible__)


def response_header_version(api_key: int, version: int) -> int:
    """Response header version: 1 for flexible versions, except ApiVersions (always 0).

    ApiVersions is special-cased by Kafka: a client cannot know whether the
    broker supports flexible versions before it has read this response.
    """
    if api_key == API_VERSIONS_KEY:
        return 0
    known = _nearest_known(api_key, version)
    if known is None:
        raise UnsupportedVersion(api_key, version)
    return 1 if response_class(api_key, known).__flexible__ else 0
