"""CSRF protection: one synchronizer token per session, sent back by every state-changing request.

Its own module because both the page renderer (:func:`dashboard.context.render` puts the token in every form) and
the login code (:mod:`dashboard.auth`, which issues a fresh token at login) need it, and ``auth`` builds on
``context``.
"""

from __future__ import annotations

import secrets

from fastapi import Request

SESSION_CSRF = "ap_csrf"
CSRF_FIELD, CSRF_HEADER = "csrf_token", "x-csrf-token"


class CsrfFailed(Exception):
    """A state-changing request without the session's CSRF token."""


def csrf_token(request: Request) -> str:
    token = request.session.get(SESSION_CSRF)
    if not token:
        token = request.session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return token


async def verify_csrf(request: Request) -> None:
    """Dependency of every POST: the form field or header must equal the session's token (synchronizer token)."""
    expected = request.session.get(SESSION_CSRF)
    sent: object = request.headers.get(CSRF_HEADER)  # a form field may also be an upload
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        sent = (await request.form()).get(CSRF_FIELD)
    if not expected or not isinstance(sent, str) or not secrets.compare_digest(expected, sent):
        raise CsrfFailed()
