"""How the operator's tools reach a SASL listener: `--command-config FILE`, as Kafka's tools take.

The file holds client properties with librdkafka's names (the PEM-based ones, so no Java key
store is needed):

    security.protocol=SASL_SSL          # PLAINTEXT (default), SASL_PLAINTEXT or SASL_SSL
    sasl.mechanism=SCRAM-SHA-512        # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    sasl.username=alice
    sasl.password=...
    ssl.ca.location=ca.pem              # SASL_SSL: the CA to trust (default: the system's)

The password stays in a file (mode 0600 is the operator's business) rather than on a command
line where `ps` shows it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from ..config import SASL_MECHANISMS, SECURITY_PROTOCOLS, ConfigError, parse_properties

_KEYS = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
}


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""
    ca_location: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol != "PLAINTEXT"

    def tls_context(self) -> ssl.SSLContext | None:
        if self.protocol != "SASL_SSL":
            return None
        return ssl.create_default_context(cafile=self.ca_location or None)


def load_command_config(path: Path | None) -> ClientSecurity:
    if path is None:
        return ClientSecurity()
    try:
        values = parse_properties(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from exc
    unknown = sorted(set(values) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown}; known: {sorted(_KEYS)}")
    security = ClientSecurity(
        protocol=values.get("security.protocol", "PLAINTEXT").upper(),
        mechanism=values.get("sasl.mechanism", "PLAIN").upper(),
        username=values.get("sasl.username", ""),
        password=values.get("sasl.password", ""),
        ca_location=values.get("ssl.ca.location", ""),
    )
    if security.protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{path}: security.protocol must be one of {SECURITY_PROTOCOLS}")
    if security.sasl and security.mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"{path}: sasl.mechanism must be one of {SASL_MECHANISMS}")
    if security.sasl and not (security.username and security.password):
        raise ConfigError(f"{path}: SASL needs sasl.username and sasl.password")
    return security
