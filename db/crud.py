"""Validated creation of the reference rows (users, devices and their tokens, tasks, field-test check-ins).

Each function takes an open session (the caller owns the transaction) and raw values; values go through the
pydantic models in :mod:`db.validation` first.
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import Device, DeviceToken, FieldTest, FieldTestCheckin, Task, User, as_naive_utc, utcnow
from db.security import hash_api_token, hash_password, new_api_token, verify_password
from db.validation import DbValidationError, DeviceIn, TaskIn, UserIn, validate


def create_user(session: Session, username: str, password: str, role: str = "viewer", **extra) -> User:
    data = validate(UserIn, {"username": username, "password": password, "role": role, **extra}, f"user {username!r}")
    if session.scalar(select(User.id).where(User.username == data.username)) is not None:
        raise DbValidationError(f"user {data.username!r} already exists")
    user = User(
        username=data.username,
        role=data.role,
        display_name=data.display_name,
        email=data.email,
        password_hash=hash_password(data.password),
    )
    session.add(user)
    session.flush()
    return user


def authenticate_user(session: Session, username: str, password: str, end_transaction: bool = False) -> User | None:
    """The active user with this name and password, else None.

    ``end_transaction``: commit the session's transaction after reading the user and before the Argon2 check
    (about 0.5 s of CPU). A login request's transaction may hold SQLite's write lock (``BEGIN IMMEDIATE``); kept
    through the hash, 50 logins at once queued past the busy timeout and failed with "database is locked"
    (bench/load_test.py).
    """
    user = session.scalar(select(User).where(User.username == username, User.active.is_(True)))
    if end_transaction:
        session.commit()
    return user if user is not None and verify_password(user.password_hash, password) else None


def get_device(session: Session, serial: str) -> Device | None:
    return session.scalar(select(Device).where(Device.serial == serial.strip()))


def create_device(session: Session, serial: str, kind: str = "drone", **extra) -> Device:
    data = validate(DeviceIn, {"serial": serial, "kind": kind, **extra}, f"device {serial!r}")
    if get_device(session, data.serial) is not None:
        raise DbValidationError(f"device {data.serial!r} already exists")
    device = Device(**data.model_dump())
    session.add(device)
    session.flush()
    return device


def issue_device_token(session: Session, device: Device, label: str | None = None) -> str:
    """A new API token for ``device``; the plain token is returned once and never stored."""
    token, digest = new_api_token()
    session.add(DeviceToken(device_id=device.id, token_hash=digest, label=(label or "")[:128] or None))
    session.flush()
    return token


def authenticate_device(session: Session, token: str) -> Device | None:
    row = session.scalar(
        select(DeviceToken).where(DeviceToken.token_hash == hash_api_token(token), DeviceToken.revoked_at.is_(None))
    )
    if row is None:
        return None
    row.last_used_at = utcnow()
    return row.device


def create_task(session: Session, name: str, **extra) -> Task:
    data = validate(TaskIn, {"name": name, **extra}, f"task {name!r}")
    task = Task(
        name=data.name, description=data.description, road_name=data.road_name, speed_limit_kmh=data.speed_limit_kmh
    )
    if data.area:
        ring = [list(p) for p in data.area]
        if ring[0] != ring[-1]:
            ring.append(ring[0])  # GeoJSON rings are closed
        task.area_geojson = json.dumps({"type": "Polygon", "coordinates": [ring]})
        lons, lats = [p[0] for p in ring], [p[1] for p in ring]
        task.min_lon, task.max_lon, task.min_lat, task.max_lat = min(lons), max(lons), min(lats), max(lats)
    if data.road:
        task.road_geojson = json.dumps({"type": "LineString", "coordinates": [list(p) for p in data.road]})
    session.add(task)
    session.flush()
    return task


def check_in(
    session: Session,
    field_test: FieldTest,
    *,
    device: Device | None = None,
    user: User | None = None,
    person_name: str | None = None,
    at: datetime | None = None,
) -> FieldTestCheckin:
    """Check a device or a person in to a field test; refuses a second open check-in of the same one."""
    if device is None and user is None and not (person_name and person_name.strip()):
        raise DbValidationError("check-in needs a device, a user or a person's name")
    if person_name is not None and len(person_name.strip()) > 128:
        raise DbValidationError("person_name: at most 128 characters")
    open_ = select(FieldTestCheckin).where(
        FieldTestCheckin.field_test_id == field_test.id, FieldTestCheckin.checked_out_at.is_(None)
    )
    if device is not None:
        open_ = open_.where(FieldTestCheckin.device_id == device.id)
    elif user is not None:
        open_ = open_.where(FieldTestCheckin.user_id == user.id)
    else:
        assert person_name is not None  # checked above
        open_ = open_.where(FieldTestCheckin.person_name == person_name.strip())
    if session.scalar(open_) is not None:
        raise DbValidationError(f"already checked in to field test {field_test.name!r}")
    row = FieldTestCheckin(
        field_test_id=field_test.id,
        device_id=device.id if device else None,
        user_id=user.id if user else None,
        person_name=person_name.strip() if person_name else None,
        checked_in_at=as_naive_utc(at) or utcnow(),
    )
    session.add(row)
    session.flush()
    return row


def check_out(session: Session, checkin: FieldTestCheckin, at: datetime | None = None) -> FieldTestCheckin:
    if checkin.checked_out_at is not None:
        raise DbValidationError("already checked out")
    when = as_naive_utc(at) or utcnow()
    if when < checkin.checked_in_at:
        raise DbValidationError("check-out time is before the check-in time")
    checkin.checked_out_at = when
    session.flush()
    return checkin
