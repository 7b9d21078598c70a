"""Who is asking and what they may do: session login, roles, CSRF tokens.

Roles are ordered: a viewer reads, an operator also runs tasks and uploads, an admin also manages users and
devices. The user (and so the role) is re-read from the database on every request, so a role change or a
deactivation takes effect at once, not when the cookie expires.
"""

from __future__ import annotations

import hashlib
import time
from urllib.parse import quote

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from dashboard.context import ctx, get_db

# The CSRF pieces live in dashboard.csrf (the renderer needs them too); re-exported for the routes that take them here.
from dashboard.csrf import CSRF_FIELD, CSRF_HEADER, SESSION_CSRF, CsrfFailed, csrf_token, verify_csrf  # noqa: F401
from db.models import ROLES, User

ROLE_RANK = {"viewer": 0, "operator": 1, "admin": 2}
assert set(ROLE_RANK) == set(ROLES)

SESSION_UID, SESSION_LOGIN_AT, SESSION_PW = "ap_uid", "ap_login_at", "ap_pw"


class NotLoggedIn(Exception):
    """No valid session: pages redirect to the login form, the API answers 401."""


class Forbidden(Exception):
    def __init__(self, needed: str):
        super().__init__(needed)
        self.needed = needed


def has_role(user: User | None, role: str) -> bool:
    return user is not None and ROLE_RANK.get(user.role, -1) >= ROLE_RANK[role]


def optional_user(request: Request, db: Session = Depends(get_db)) -> User | None:
    uid = request.session.get(SESSION_UID)
    if uid is None:
        return None
    login_at = request.session.get(SESSION_LOGIN_AT, 0)
    if time.time() - login_at > ctx(request).settings.session_absolute_s:
        logout_session(request)
        return None
    user = db.get(User, uid)
    if user is None or not user.active or request.session.get(SESSION_PW) != password_fingerprint(user):
        logout_session(request)  # deleted, deactivated, or its password changed since this login
        return None
    return user


def require(role: str):
    """Dependency: the logged-in user, having at least ``role``."""
    if role not in ROLE_RANK:
        raise ValueError(f"unknown role {role!r}")

    def dependency(user: User | None = Depends(optional_user)) -> User:
        if user is None:
            raise NotLoggedIn()
        if not has_role(user, role):
            raise Forbidden(role)
        return user

    dependency.__name__ = f"require_{role}"
    return dependency


viewer = require("viewer")
operator = require("operator")
admin = require("admin")


def password_fingerprint(user: User) -> str:
    """Changes when the password does, so a new password ends every older session (the service does the same)."""
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def login_session(request: Request, user: User) -> None:
    request.session.clear()  # a fresh session (and CSRF token) at every login: no fixation
    request.session[SESSION_UID] = user.id
    request.session[SESSION_LOGIN_AT] = int(time.time())
    request.session[SESSION_PW] = password_fingerprint(user)
    csrf_token(request)


def logout_session(request: Request) -> None:
    request.session.clear()


def login_redirect_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return ctx(request).url("/login") + "?next=" + quote(target, safe="")


def client_address(request: Request) -> str:
    """The caller's address as the server sees it (behind a reverse proxy: run uvicorn with --proxy-headers and
    --forwarded-allow-ips so this is the real client, not the proxy)."""
    return (request.client.host if request.client else None) or "unknown"
