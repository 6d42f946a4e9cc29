"""Authentication: SASL PLAIN and SCRAM-SHA-256/512 servers and the credentials file.

Pure and synchronous: `scram.ScramExchange` and `plain.authenticate_plain` turn client messages
into server messages or an `AuthFailure`; `users.UserStore` maps a user to its organisation,
allowed group-id / topic prefixes and salted SCRAM credentials. The gateway drives them from
SaslHandshake / SaslAuthenticate.
"""

from .plain import authenticate_plain
from .scram import AuthFailure, FailureKind, Mechanism, ScramCredential, ScramExchange
from .users import User, UsersFileError, UserStore

__all__ = [
    "AuthFailure",
    "FailureKind",
    "Mechanism",
    "ScramCredential",
    "ScramExchange",
    "User",
    "UserStore",
    "UsersFileError",
    "authenticate_plain",
]
