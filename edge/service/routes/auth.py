"""Login sessions, the caller, and the admin's user/device/token management."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status

from db.audit import audit
from db.crud import create_device, create_user, get_device, issue_device_token
from db.validation import DbValidationError
from edge.service.auth import SESSION_COOKIE, LoginThrottled, check_password
from edge.service.deps import Admin, ContextDep, Reader, SessionDep, client_address
from edge.service.schemas import DeviceIn, DeviceTokenOut, LoginIn, PrincipalOut, TokenOut, UserIn

router = APIRouter(prefix="/api", tags=["auth"])


@router.post("/auth/login", response_model=TokenOut)
def login(body: LoginIn, request: Request, response: Response, ctx: ContextDep, session: SessionDep):
    """A session token for a user (also set as an HttpOnly SameSite=Strict cookie for the dashboard's pages).

    Failed logins are throttled per client address and per account (429 with Retry-After; db/throttle.py)."""
    try:
        user = check_password(session, ctx.throttle, client_address(request), body.username.strip(), body.password)
    except LoginThrottled as exc:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS, str(exc), headers={"Retry-After": str(exc.retry_after_s)}
        ) from None
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong username or password")
    token = ctx.signer.issue(user)
    # Secure whenever the request came over TLS (behind a proxy: uvicorn --proxy-headers); a field laptop on plain
    # HTTP still works.
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=ctx.signer.ttl_s,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return TokenOut(access_token=token, role=user.role, expires_in=ctx.signer.ttl_s)


@router.post("/auth/logout", status_code=204)
def logout(response: Response):
    response.delete_cookie(SESSION_COOKIE)


@router.get("/auth/me", response_model=PrincipalOut)
def me(who: Reader):
    return PrincipalOut(kind=who.kind, id=who.id, name=who.name, role=who.role)


@router.post("/users", response_model=PrincipalOut, status_code=201)
def add_user(body: UserIn, who: Admin, request: Request, session: SessionDep):
    try:
        user = create_user(session, body.username, body.password, role=body.role)
        audit(
            session,
            who.label,
            "user.create",
            f"user:{user.username}",
            client_address(request),
            via="api",
            role=user.role,
        )
        session.commit()
    except DbValidationError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    return PrincipalOut(kind="user", id=user.id, name=user.username, role=user.role)


@router.post("/devices", response_model=PrincipalOut, status_code=201)
def add_device(body: DeviceIn, who: Admin, request: Request, session: SessionDep):
    try:
        device = create_device(session, body.serial, kind=body.kind, name=body.name, model=body.model)
        audit(
            session,
            who.label,
            "device.create",
            f"device:{device.serial}",
            client_address(request),
            via="api",
            kind=device.kind,
        )
        session.commit()
    except DbValidationError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    return PrincipalOut(kind="device", id=device.id, name=device.serial, role="device")


@router.post("/devices/{serial}/tokens", response_model=DeviceTokenOut, status_code=201)
def add_device_token(serial: str, who: Admin, request: Request, session: SessionDep):
    """A new API token for the device; the response is the only time it is shown."""
    device = get_device(session, serial)
    if device is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"device {serial[:64]!r} not found")
    token = issue_device_token(session, device, label="issued via API")
    audit(session, who.label, "device.token_issue", f"device:{device.serial}", client_address(request), via="api")
    session.commit()
    return DeviceTokenOut(device_id=device.id, serial=device.serial, token=token)
