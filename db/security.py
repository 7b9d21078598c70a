"""Password hashes (Argon2id via argon2-cffi) and device API tokens (random, stored as SHA-256)."""
from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()  # argon2-cffi's defaults follow RFC 9106's recommended profile

TOKEN_PREFIX = "apt_"


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    try:
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
