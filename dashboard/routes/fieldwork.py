"""Tasks and their rounds, field tests with check-in/out. Viewers read; operators create and change."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Form, Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dashboard.auth import operator, verify_csrf, viewer
from dashboard.context import flash, get_db, render
from dashboard.routes.common import BadQuery, not_found, opt_float, opt_int, opt_time, redirect
from db.crud import check_in, check_out, create_task
from db.models import (
    Device,
    FieldTest,
    FieldTestCheckin,
    Flight,
    ProcessingRun,
    Task,
    TaskRound,
    User,
    as_naive_utc,
    utcnow,
)

router = APIRouter()
csrf = [Depends(verify_csrf)]

# round status -> the statuses it may move to, and which timestamp that sets
ROUND_MOVES = {"planned": {"in_progress", "cancelled"}, "in_progress": {"done", "cancelled"}}


def parse_coords(text: str, what: str) -> list[tuple[float, float]] | None:
    """Points as a GeoJSON geometry, or one 'lon, lat' (or 'lon lat') pair per line / separated by ';'."""
    text = (text or "").strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            geom = json.loads(text)
            coords = geom["coordinates"][0] if geom.get("type") == "Polygon" else geom["coordinates"]
            return [(float(p[0]), float(p[1])) for p in coords]
        except (ValueError, KeyError, TypeError, IndexError):
            raise BadQuery(f"{what}: not a GeoJSON Polygon/LineString") from None
    points = []
    for part in text.replace(";", "\n").splitlines():
        if part.strip():
            bits = part.replace(",", " ").split()
            if len(bits) != 2:
                raise BadQuery(f"{what}: {part.strip()[:40]!r} is not a 'lon, lat' pair")
            try:
                points.append((float(bits[0]), float(bits[1])))
            except ValueError:
                raise BadQuery(f"{what}: {part.strip()[:40]!r} is not a 'lon, lat' pair") from None
    return points


# -- tasks ---------------------------------------------------------------------------------------------------------
@router.get("/tasks", name="tasks")
def task_list(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    rounds = dict(db.execute(select(TaskRound.task_id, func.count()).group_by(TaskRound.task_id)).all())
    tasks = list(db.scalars(select(Task).order_by(Task.active.desc(), Task.name)))
    return render(request, "tasks.html", user, tasks=tasks, round_counts=rounds)


@router.post("/tasks", dependencies=csrf)
def task_create(
    request: Request,
    name: str = Form(""),
    description: str = Form(""),
    road_name: str = Form(""),
    speed_limit_kmh: str = Form(""),
    area: str = Form(""),
    road: str = Form(""),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    try:
        task = create_task(
            db,
            name,
            description=description.strip() or None,
            road_name=road_name.strip() or None,
            speed_limit_kmh=opt_float(speed_limit_kmh, "speed limit"),
            area=parse_coords(area, "area"),
            road=parse_coords(road, "road"),
        )
        task.created_by_id = user.id
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"task not created: {exc}", "error")
        return redirect(request, "/tasks")
    flash(request, f"task {task.name!r} created")
    return redirect(request, f"/tasks/{task.id}")


@router.get("/tasks/{task_id}", name="task")
def task_detail(request: Request, task_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    task = db.get(Task, task_id)
    if task is None:
        raise not_found(f"task {task_id}")
    rounds = list(db.scalars(select(TaskRound).where(TaskRound.task_id == task_id).order_by(TaskRound.round_no)))
    ids = [r.id for r in rounds]
    flights = list(db.scalars(select(Flight).where(Flight.task_round_id.in_(ids)).order_by(Flight.id))) if ids else []
    runs = (
        list(db.scalars(select(ProcessingRun).where(ProcessingRun.task_round_id.in_(ids)).order_by(ProcessingRun.id)))
        if ids
        else []
    )
    return render(request, "task.html", user, task=task, rounds=rounds, flights=flights, runs=runs, moves=ROUND_MOVES)


@router.post("/tasks/{task_id}/active", dependencies=csrf)
def task_toggle(request: Request, task_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    task = db.get(Task, task_id)
    if task is None:
        raise not_found(f"task {task_id}")
    task.active = not task.active
    db.commit()
    return redirect(request, f"/tasks/{task_id}")


@router.post("/tasks/{task_id}/rounds", dependencies=csrf)
def round_create(
    request: Request,
    task_id: int,
    scheduled_at: str = Form(""),
    notes: str = Form(""),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    if db.get(Task, task_id) is None:
        raise not_found(f"task {task_id}")
    try:
        when = as_naive_utc(opt_time(scheduled_at, "scheduled at"))
    except BadQuery as exc:
        flash(request, f"round not created: {exc}", "error")
        return redirect(request, f"/tasks/{task_id}")
    number = (db.scalar(select(func.max(TaskRound.round_no)).where(TaskRound.task_id == task_id)) or 0) + 1
    db.add(TaskRound(task_id=task_id, round_no=number, scheduled_at=when, notes=notes.strip()[:10000] or None))
    db.commit()
    flash(request, f"round {number} planned")
    return redirect(request, f"/tasks/{task_id}")


@router.post("/rounds/{round_id}/status", dependencies=csrf)
def round_status(
    request: Request, round_id: int, status: str = Form(""), user=Depends(operator), db: Session = Depends(get_db)
):
    rnd = db.get(TaskRound, round_id)
    if rnd is None:
        raise not_found(f"task round {round_id}")
    if status not in ROUND_MOVES.get(rnd.status, set()):
        flash(request, f"round {rnd.round_no}: cannot go from {rnd.status} to {status or '(nothing)'}", "error")
        return redirect(request, f"/tasks/{rnd.task_id}")
    rnd.status = status
    if status == "in_progress":
        rnd.started_at = utcnow()
    else:
        rnd.ended_at = utcnow()
    db.commit()
    return redirect(request, f"/tasks/{rnd.task_id}")


@router.post("/flights/{flight_id}/round", dependencies=csrf)
def flight_assign_round(
    request: Request, flight_id: int, round_id: str = Form(""), user=Depends(operator), db: Session = Depends(get_db)
):
    flight = db.get(Flight, flight_id)
    if flight is None:
        raise not_found(f"flight {flight_id}")
    try:
        rid = opt_int(round_id, "round")
    except BadQuery as exc:
        flash(request, str(exc), "error")
        return redirect(request, f"/flights/{flight_id}")
    if rid is not None and db.get(TaskRound, rid) is None:
        flash(request, f"no task round {rid}", "error")
        return redirect(request, f"/flights/{flight_id}")
    flight.task_round_id = rid
    db.commit()
    return redirect(request, f"/flights/{flight_id}")


# -- field tests ---------------------------------------------------------------------------------------------------
@router.get("/field-tests", name="field_tests")
def field_test_list(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    tests = list(db.scalars(select(FieldTest).order_by(FieldTest.id.desc())))
    open_counts = dict(
        db.execute(
            select(FieldTestCheckin.field_test_id, func.count())
            .where(FieldTestCheckin.checked_out_at.is_(None))
            .group_by(FieldTestCheckin.field_test_id)
        ).all()
    )
    tasks = list(db.scalars(select(Task).order_by(Task.name)))
    return render(request, "field_tests.html", user, tests=tests, open_counts=open_counts, tasks=tasks)


@router.post("/field-tests", dependencies=csrf)
def field_test_create(
    request: Request,
    name: str = Form(""),
    location: str = Form(""),
    task_id: str = Form(""),
    notes: str = Form(""),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    name, location = name.strip(), location.strip()
    try:
        tid = opt_int(task_id, "task")
        if not name or len(name) > 200:
            raise BadQuery("name: 1 to 200 characters")
        if len(location) > 200:
            raise BadQuery("location: at most 200 characters")
        if tid is not None and db.get(Task, tid) is None:
            raise BadQuery(f"task: no task {tid}")
    except BadQuery as exc:
        flash(request, f"field test not created: {exc}", "error")
        return redirect(request, "/field-tests")
    test = FieldTest(
        name=name, location=location or None, task_id=tid, started_at=utcnow(), notes=notes.strip()[:10000] or None
    )
    db.add(test)
    db.commit()
    return redirect(request, f"/field-tests/{test.id}")


def _get_test(db: Session, test_id: int) -> FieldTest:
    test = db.get(FieldTest, test_id)
    if test is None:
        raise not_found(f"field test {test_id}")
    return test


@router.get("/field-tests/{test_id}", name="field_test")
def field_test_detail(request: Request, test_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    test = _get_test(db, test_id)
    checkins = list(
        db.scalars(
            select(FieldTestCheckin)
            .where(FieldTestCheckin.field_test_id == test_id)
            .order_by(FieldTestCheckin.checked_in_at)
        )
    )
    devices = {d.id: d for d in db.scalars(select(Device).order_by(Device.serial))}
    users = {u.id: u for u in db.scalars(select(User).where(User.active.is_(True)).order_by(User.username))}
    return render(
        request,
        "field_test.html",
        user,
        test=test,
        checkins=checkins,
        devices=devices,
        users=users,
        task=db.get(Task, test.task_id) if test.task_id else None,
    )


@router.post("/field-tests/{test_id}/checkin", dependencies=csrf)
def field_test_checkin(
    request: Request,
    test_id: int,
    device_id: str = Form(""),
    user_id: str = Form(""),
    person_name: str = Form(""),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    test = _get_test(db, test_id)
    try:
        if test.ended_at is not None:
            raise BadQuery("the field test has ended")
        did, uid = opt_int(device_id, "device"), opt_int(user_id, "user")
        device = db.get(Device, did) if did is not None else None
        person = db.get(User, uid) if uid is not None else None
        if (did is not None and device is None) or (uid is not None and person is None):
            raise BadQuery("unknown device or user")
        check_in(db, test, device=device, user=person, person_name=person_name.strip() or None)
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"check-in refused: {exc}", "error")
    return redirect(request, f"/field-tests/{test_id}")


@router.post("/checkins/{checkin_id}/checkout", dependencies=csrf)
def field_test_checkout(request: Request, checkin_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    row = db.get(FieldTestCheckin, checkin_id)
    if row is None:
        raise not_found(f"check-in {checkin_id}")
    try:
        check_out(db, row)
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"check-out refused: {exc}", "error")
    return redirect(request, f"/field-tests/{row.field_test_id}")


@router.post("/field-tests/{test_id}/end", dependencies=csrf)
def field_test_end(request: Request, test_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    test = _get_test(db, test_id)
    now = utcnow()
    for row in db.scalars(
        select(FieldTestCheckin).where(
            FieldTestCheckin.field_test_id == test_id, FieldTestCheckin.checked_out_at.is_(None)
        )
    ):
        check_out(db, row, now)  # everyone still on site is checked out when the test ends
    test.ended_at = now
    db.commit()
    return redirect(request, f"/field-tests/{test_id}")
