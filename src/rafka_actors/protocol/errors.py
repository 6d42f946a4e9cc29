"""Exceptions raised by the pure wire-protocol layer.

Everything the protocol package raises on bad or unsupported input derives from
:class:`ProtocolError`, so the gateway can tell "the peer sent something we
cannot handle" apart from bugs in the broker:

* :class:`UnsupportedVersion` -- the (api_key, version) pair has no schema; the
  gateway answers ApiVersions-style or closes the connection.
* :class:`MalformedRequest` -- the bytes do not decode under the schema that
  the header selected (truncated, negative lengths, invalid UTF-8, ...); the
  connection should be closed, as Kafka does.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of all wire-protocol errors."""


class UnsupportedVersion(ProtocolError):
    """No schema is known for this API key and version."""

    def __init__(self, api_key: int, version: int) -> None:
        super().__init__(f"unsupported api_key={api_key} version={version}")
        self.api_key = api_key
        self.version = version

    def __reduce__(self) -> tuple[type[UnsupportedVersion], tuple[int, int]]:
        # Keep the exception picklable despite the custom __init__ signature.
        return (type(self), (self.api_key, self.version))


class MalformedRequest(ProtocolError):
    """The frame could not be decoded."""
