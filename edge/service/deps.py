"""Typed FastAPI dependencies: the service context, a database session, the caller and what the caller may do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, status
from sqlalchemy.orm import Session
from starlette.requests import HTTPConnection

from edge.service.auth import SESSION_COOKIE, AuthError, LoginThrottled, Principal, authenticate
from edge.service.context import ServiceContext


def get_context(conn: HTTPConnection) -> ServiceContext:
    return conn.app.state.ctx


ContextDep = Annotated[ServiceContext, Depends(get_context)]


def get_session(ctx: ContextDep) -> Iterator[Session]:
    with ctx.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def resolve_principal(conn: HTTPConnection, ctx: ServiceContext, session: Session) -> Principal:
    """The caller or AuthError (shared by HTTP routes and WebSocket handlers)."""
    return authenticate(
        session,
        ctx.signer,
        conn.headers.get("authorization"),
        conn.cookies.get(SESSION_COOKIE),
        ctx.throttle,
        client_address(conn),
    )


def client_address(conn: HTTPConnection) -> str:
    """As the server sees it: behind a proxy run uvicorn with --proxy-headers so this is the real client."""
    return (conn.client.host if conn.client else None) or "unknown"


def current_principal(conn: HTTPConnection, ctx: ContextDep) -> Principal:
    # Its own short session: a route's session may stay open for the whole request (an upload streams for
    # minutes), and on SQLite an open write transaction would hold the database lock all that time.
    try:
        with ctx.sessions() as session:
            return resolve_principal(conn, ctx, session)
    except LoginThrottled as exc:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS, str(exc), headers={"Retry-After": str(exc.retry_after_s)}
        ) from None
    except AuthError as exc:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, str(exc), headers={"WWW-Authenticate": 'Bearer, Basic realm="airpatrol"'}
        ) from None


Reader = Annotated[Principal, Depends(current_principal)]
"""Anyone authenticated: viewers, operators, admins, devices."""


def writer(who: Reader) -> Principal:
    if not who.can_write:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"role {who.role!r} may not change anything (operator or admin needed)"
        )
    return who


Writer = Annotated[Principal, Depends(writer)]
"""A device (its own things) or a user with role operator/admin."""


def admin(who: Reader) -> Principal:
    if not who.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "admin role needed")
    return who


Admin = Annotated[Principal, Depends(admin)]


def accepting(ctx: ContextDep) -> ServiceContext:
    if not ctx.accepting:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the service is starting or shutting down")
    return ctx


Accepting = Annotated[ServiceContext, Depends(accepting)]
"""The context, but 503 while the service starts or drains (new live work is refused then)."""
