"""Password hashes (Argon2id via argon2-cffi) and device API tokens (random, stored as SHA-256)."""

from __future__ import annotations

import hashlib
import secrets
import threading

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()  # argon2-cffi's defaults follow RFC 9106's recommended profile

TOKEN_PREFIX = "apt_"
# The service API's signed login-session cookie (edge.service.auth reads it; the dashboard's login sets it).
SERVICE_SESSION_COOKIE = "airpatrol_session"
# Each Argon2 computation takes ~64 MiB (the profile's memory cost): 50 logins at once took the service from 650 MB
# to 2.1 GB (bench/load_test.py). At most this many run at once per process; the others wait their turn.
MAX_CONCURRENT_HASHES = 4
_hash_slots = threading.BoundedSemaphore(MAX_CONCURRENT_HASHES)


def hash_password(password: str) -> str:
    with _hash_slots:
        return _hasher.hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    try:
        with _hash_slots:
            return _hasher.verify(stored_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def password_needs_rehash(stored_hash: str) -> bool:
    return _hasher.check_needs_rehash(stored_hash)


def new_api_token() -> tuple[str, str]:
    """(token shown once to the user, hash to store). 256 random bits: a fast hash is enough, no salt needed."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_api_token(token)


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
