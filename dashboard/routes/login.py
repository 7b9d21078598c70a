"""Login and logout."""

from __future__ import annotations

import math

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from dashboard.auth import client_address, login_session, logout_session, optional_user, verify_csrf
from dashboard.context import ctx, get_db, render
from dashboard.routes.common import redirect
from db.crud import authenticate_user
from db.security import SERVICE_SESSION_COOKIE

router = APIRouter()


def _safe_next(request: Request, target: str | None) -> str:
    """Only paths inside the dashboard: never an open redirect to another site."""
    prefix = ctx(request).settings.prefix.rstrip("/")
    if target and target.startswith(prefix + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return ctx(request).url("/map")


@router.get("/login", name="login")
def login_form(request: Request, next: str | None = None, user=Depends(optional_user)):
    if user is not None:
        return RedirectResponse(_safe_next(request, next), status_code=303)
    return render(request, "login.html", None, next=next or "")


@router.post("/login", dependencies=[Depends(verify_csrf)])
def login_submit(
    request: Request,
    username: str = Form(""),
    password: str = Form(""),
    next: str = Form(""),
    db: Session = Depends(get_db),
):
    username = username.strip()
    throttle, client = ctx(request).throttle, client_address(request)
    wait = throttle.wait_s(client, username)
    if wait > 0:  # refused before the password is looked at; not counted
        response = render(
            request,
            "login.html",
            None,
            status_code=429,
            next=next,
            error=f"too many failed logins; try again in {math.ceil(wait)} s",
        )
        response.headers["Retry-After"] = str(math.ceil(wait))
        return response
    # the request's write transaction (SQLite: its lock) ends before the slow hash and the throttle's own writes
    user = authenticate_user(db, username, password, end_transaction=True) if username and password else None
    db.commit()
    if user is None:
        throttle.failed(client, username)
        return render(request, "login.html", None, status_code=401, next=next, error="wrong user name or password")
    throttle.succeeded(client, username)
    login_session(request, user)
    response = RedirectResponse(_safe_next(request, next), status_code=303)
    signer = _service_signer(request)
    if signer is not None:  # the browser may then also use the service's API (MJPEG preview, feed, uploads, jobs)
        response.set_cookie(
            SERVICE_SESSION_COOKIE,
            signer.issue(user),
            max_age=signer.ttl_s,
            httponly=True,
            samesite="strict",
            path="/",
            secure=ctx(request).settings.https_only or request.url.scheme == "https",
        )
    return response


def _service_signer(request: Request):
    return getattr(getattr(request.app.state, "ctx", None), "signer", None)


@router.post("/logout", dependencies=[Depends(verify_csrf)])
def logout(request: Request):
    logout_session(request)
    response = redirect(request, "/login")
    if _service_signer(request) is not None:
        response.delete_cookie(SERVICE_SESSION_COOKIE, path="/")
    return response
