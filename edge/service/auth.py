"""Who is calling: a device (API token, hashed in the database) or a user (login session or HTTP Basic).

Credentials are read from, in order: ``Authorization: Bearer <token>`` (a device token starts with ``apt_``,
anything else is a signed login session), ``Authorization: Basic`` (username/password, Argon2-verified),
the ``airpatrol_session`` cookie (the dashboard's browser pages; ``HttpOnly``, ``SameSite=Strict``).
Never from the query string: URLs end up in access logs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from db.crud import authenticate_device, authenticate_user
from db.models import User
from db.security import SERVICE_SESSION_COOKIE, TOKEN_PREFIX

SESSION_COOKIE = SERVICE_SESSION_COOKIE
WRITE_ROLES = ("operator", "admin")


class AuthError(Exception):
    """401: no or invalid credentials."""


class LoginThrottled(AuthError):
    """429: too many failed logins from this address or for this account (db/throttle.py); try again later."""

    def __init__(self, retry_after_s: float):
        import math

        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(f"too many failed logins; try again in {self.retry_after_s} s")


def check_password(session: Session, throttle, client: str, username: str, password: str) -> User | None:
    """``authenticate_user`` behind the shared login throttle: refused while a delay runs, failures counted."""
    if throttle is not None:
        wait = throttle.wait_s(client, username)
        if wait > 0:
            raise LoginThrottled(wait)
    # the caller's transaction (SQLite: its write lock) ends before the slow hash and the throttle's own writes
    user = authenticate_user(session, username, password, end_transaction=True) if username and password else None
    session.commit()
    if throttle is not None:
        (throttle.failed if user is None else throttle.succeeded)(client, username)
    return user


@dataclass(frozen=True)
class Principal:
    kind: str  # "user" | "device"
    id: int
    name: str  # username or device serial
    role: str  # admin | operator | viewer for users; "device" for devices

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"[:96]

    @property
    def can_write(self) -> bool:
        return self.kind == "device" or self.role in WRITE_ROLES

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and self.role == "admin"

    @property
    def device_id(self) -> int | None:
        return self.id if self.kind == "device" else None


def _password_fingerprint(user: User) -> str:
    # A changed password changes the hash, which invalidates every session issued before.
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


class SessionSigner:
    def __init__(self, secret: str, ttl_s: int):
        self._s = URLSafeTimedSerializer(secret, salt="airpatrol-session")
        self.ttl_s = ttl_s

    def issue(self, user: User) -> str:
        return self._s.dumps({"uid": user.id, "pw": _password_fingerprint(user)})

    def user_for(self, session: Session, token: str) -> User | None:
        try:
            data = self._s.loads(token, max_age=self.ttl_s)
        except (SignatureExpired, BadSignature):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("uid"), int):
            return None
        user = session.get(User, data["uid"])
        if user is None or not user.active or data.get("pw") != _password_fingerprint(user):
            return None
        return user


def _user_principal(user: User) -> Principal:
    return Principal("user", user.id, user.username, user.role)


def authenticate(
    session: Session,
    signer: SessionSigner,
    authorization: str | None,
    cookie: str | None,
    throttle=None,
    client: str = "unknown",
) -> Principal:
    """The caller, or :class:`AuthError` with the reason (no credentials, bad token, ...). Passwords (HTTP Basic)
    go through ``throttle`` (a :class:`db.throttle.LoginThrottle`) like the login form's."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            if value.startswith(TOKEN_PREFIX):
                device = authenticate_device(session, value)
                if device is None:
                    raise AuthError("invalid or revoked device token")
                session.commit()  # keep last_used_at
                return Principal("device", device.id, device.serial, "device")
            user = signer.user_for(session, value)
            if user is None:
                raise AuthError("invalid or expired session token")
            return _user_principal(user)
        if scheme.lower() == "basic" and value:
            try:
                username, _, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise AuthError("malformed Basic credentials") from None
            user = check_password(session, throttle, client, username, password)
            if user is None:
                raise AuthError("wrong username or password")
            return _user_principal(user)
        raise AuthError("unsupported Authorization scheme (use Bearer or Basic)")
    if cookie:
        user = signer.user_for(session, cookie)
        if user is None:
            raise AuthError("session expired; log in again")
        return _user_principal(user)
    raise AuthError("authentication required (device token or user login)")
