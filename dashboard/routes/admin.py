"""Devices and drone state (everyone reads, admins register devices and issue tokens); users (admins only)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dashboard.auth import admin, client_address, verify_csrf, viewer
from dashboard.context import ctx, flash, get_db, render
from dashboard.mapdata import drone_states
from dashboard.routes.common import not_found, redirect
from db.audit import audit, recent
from db.crud import create_device, create_user, issue_device_token
from db.models import DEVICE_KINDS, ROLES, Device, DeviceToken, User, utcnow
from db.security import hash_password
from db.validation import UserIn, validate

router = APIRouter()
csrf = [Depends(verify_csrf)]


# -- devices -------------------------------------------------------------------------------------------------------
@router.get("/devices", name="devices")
def device_list(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    states = drone_states(db, ctx(request).settings.live_stale_s)
    tokens = dict(
        db.execute(
            select(DeviceToken.device_id, func.count())
            .where(DeviceToken.revoked_at.is_(None))
            .group_by(DeviceToken.device_id)
        ).all()
    )
    # a token is shown exactly once, right after it was issued
    new_token = request.session.pop("ap_new_token", None)
    return render(request, "devices.html", user, states=states, tokens=tokens, kinds=DEVICE_KINDS, new_token=new_token)


@router.get("/api/devices")
def device_state_api(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    return {"devices": drone_states(db, ctx(request).settings.live_stale_s)}


@router.post("/devices", dependencies=csrf)
def device_create(
    request: Request,
    serial: str = Form(""),
    kind: str = Form("drone"),
    model: str = Form(""),
    name: str = Form(""),
    camera_preset: str = Form(""),
    user=Depends(admin),
    db: Session = Depends(get_db),
):
    try:
        dev = create_device(
            db,
            serial,
            kind=kind,
            model=model.strip() or None,
            name=name.strip() or None,
            camera_preset=camera_preset.strip() or None,
        )
        _audit(request, db, user, "device.create", f"device:{dev.serial}", kind=dev.kind)
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"device not registered: {exc}", "error")
        return redirect(request, "/devices")
    flash(request, f"device {dev.serial} registered")
    return redirect(request, "/devices")


@router.post("/devices/{device_id}/token", dependencies=csrf)
def device_token(
    request: Request, device_id: int, label: str = Form(""), user=Depends(admin), db: Session = Depends(get_db)
):
    dev = db.get(Device, device_id)
    if dev is None:
        raise not_found(f"device {device_id}")
    token = issue_device_token(db, dev, label.strip() or f"issued by {user.username}")
    _audit(request, db, user, "device.token_issue", f"device:{dev.serial}")  # never the token itself
    db.commit()
    request.session["ap_new_token"] = [dev.serial, token]
    return redirect(request, "/devices")


@router.post("/devices/{device_id}/revoke-tokens", dependencies=csrf)
def device_revoke(request: Request, device_id: int, user=Depends(admin), db: Session = Depends(get_db)):
    device = db.get(Device, device_id)
    if device is None:
        raise not_found(f"device {device_id}")
    n = 0
    for tok in db.scalars(
        select(DeviceToken).where(DeviceToken.device_id == device_id, DeviceToken.revoked_at.is_(None))
    ):
        tok.revoked_at, n = utcnow(), n + 1
    _audit(request, db, user, "device.tokens_revoke", f"device:{device.serial}", tokens=n)
    db.commit()
    flash(request, f"{n} token(s) revoked")
    return redirect(request, "/devices")


# -- users ---------------------------------------------------------------------------------------------------------
@router.get("/users", name="users")
def user_list(request: Request, user=Depends(admin), db: Session = Depends(get_db)):
    users = list(db.scalars(select(User).order_by(User.username)))
    return render(request, "users.html", user, users=users, roles=ROLES, audit=recent(db))


@router.post("/users", dependencies=csrf)
def user_create(
    request: Request,
    username: str = Form(""),
    password: str = Form(""),
    role: str = Form("viewer"),
    display_name: str = Form(""),
    email: str = Form(""),
    user=Depends(admin),
    db: Session = Depends(get_db),
):
    try:
        created = create_user(
            db, username, password, role=role, display_name=display_name.strip() or None, email=email.strip() or None
        )
        _audit(request, db, user, "user.create", f"user:{created.username}", role=created.role)
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"user not created: {exc}", "error")
        return redirect(request, "/users")
    flash(request, f"user {created.username!r} created with role {created.role}")
    return redirect(request, "/users")


def _active_admins(db: Session) -> int:
    return db.scalar(select(func.count()).select_from(User).where(User.role == "admin", User.active.is_(True))) or 0


@router.post("/users/{user_id}", dependencies=csrf)
def user_update(
    request: Request,
    user_id: int,
    role: str = Form(""),
    active: str = Form(""),
    password: str = Form(""),
    user=Depends(admin),
    db: Session = Depends(get_db),
):
    target = db.get(User, user_id)
    if target is None:
        raise not_found(f"user {user_id}")
    new_role = role or target.role
    new_active = target.active if active == "" else active == "1"
    if new_role not in ROLES:
        flash(request, f"unknown role {role!r}", "error")
        return redirect(request, "/users")
    losing_admin = target.role == "admin" and target.active and (new_role != "admin" or not new_active)
    if losing_admin and _active_admins(db) <= 1:
        flash(request, "refused: this is the last active admin", "error")
        return redirect(request, "/users")
    if password:
        try:
            validate(UserIn, {"username": target.username, "password": password}, f"user {target.username!r}")
        except ValueError as exc:
            flash(request, str(exc), "error")
            return redirect(request, "/users")
        target.password_hash = hash_password(password)
    changes = {
        k: v
        for k, v in (
            ("role", new_role if new_role != target.role else None),
            ("active", new_active if new_active != target.active else None),
            ("password", "changed" if password else None),
        )
        if v is not None
    }
    target.role, target.active = new_role, new_active
    if changes:
        _audit(request, db, user, "user.update", f"user:{target.username}", **changes)
    db.commit()
    flash(request, f"user {target.username!r} updated")
    return redirect(request, "/users")


def _audit(request: Request, db: Session, user: User, action: str, target: str, **detail) -> None:
    audit(db, f"user:{user.username}", action, target, client_address(request), via="dashboard", **detail)
