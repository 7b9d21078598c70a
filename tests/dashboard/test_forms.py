"""Form flows: uploads, tasks and rounds, field tests, users, devices; and pages that need nothing from the internet."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import pytest
from sqlalchemy import func, select

from tests.dashboard.dash_helpers import csrf_of, write_gpx


def _flash(client) -> str:
    return " ".join(
        re.findall(r'<div class="flash[^"]*" role="status">([^<]*)</div>', client.get("/dashboard/tasks").text)
    )


def test_upload_log_creates_a_flight(client_for, tmp_path, db_url):
    from db.engine import session_scope
    from db.models import Flight

    c = client_for("operator")
    gpx = write_gpx(tmp_path / "up.gpx", datetime(2024, 6, 2, 8, 0, tzinfo=timezone.utc), seconds=30)
    r = c.post(
        "/dashboard/flights/upload-log",
        data={"csrf_token": csrf_of(c), "device_serial": "UP-1", "create_device": "true"},
        files={"log": ("up.gpx", gpx.read_bytes(), "application/gpx+xml")},
        follow_redirects=False,
    )
    assert r.status_code == 303 and re.search(r"/dashboard/flights/\d+$", r.headers["location"])
    with session_scope(db_url) as s:
        flight = s.scalar(select(Flight))
        assert flight.sample_count == 31 and flight.device.serial == "UP-1"
        assert flight.source_file.endswith("up.gpx")
    page = c.get(r.headers["location"])
    assert "31 samples" in page.text


def test_upload_bad_log_is_a_one_line_error(client_for, db_url):
    from db.engine import session_scope
    from db.models import Flight

    c = client_for("operator")
    r = c.post(
        "/dashboard/flights/upload-log",
        data={"csrf_token": csrf_of(c)},
        files={"log": ("notes.txt", b"hello, this is not telemetry", "text/plain")},
    )
    assert r.status_code == 200 and "upload failed:" in r.text and "not a recognised flight log" in r.text
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(Flight)) == 0


def test_viewer_cannot_upload(client_for):
    c = client_for("viewer")
    r = c.post(
        "/dashboard/flights/upload-log",
        data={"csrf_token": csrf_of(c)},
        files={"log": ("a.gpx", b"<gpx/>", "application/gpx+xml")},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert 'id="upload-log"' not in c.get("/dashboard/flights").text


def test_upload_video(client_for, imported, tmp_path, db_url):
    import cv2

    from db.engine import session_scope
    from db.models import Video

    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    for i in range(12):
        writer.write(np.full((48, 64, 3), i * 20, np.uint8))
    writer.release()
    c = client_for("operator")
    url = f"/dashboard/flights/{imported.flight_id}/upload-video"
    r = c.post(
        url,
        data={"csrf_token": csrf_of(c), "time_offset_s": "1.5"},
        files={"video": ("clip.avi", path.read_bytes(), "video/x-msvideo")},
    )
    assert r.status_code == 200 and "stored (64x48, 10 fps)" in r.text
    with session_scope(db_url) as s:
        v = s.scalar(select(Video).where(Video.file_path.like("%clip.avi")))
        assert v.flight_id == imported.flight_id and v.time_offset_s == 1.5 and v.frame_count == 12
    r = c.post(url, data={"csrf_token": csrf_of(c)}, files={"video": ("x.mp4", b"garbage" * 100, "video/mp4")})
    assert "upload failed: x.mp4: not a readable video" in r.text


def test_task_round_lifecycle(client_for, db_url):
    from db.engine import session_scope
    from db.models import Task, TaskRound

    c = client_for("operator")
    r = c.post(
        "/dashboard/tasks",
        data={
            "csrf_token": csrf_of(c),
            "name": "A9 north",
            "speed_limit_kmh": "100",
            "area": "11.57, 48.13\n11.58, 48.13\n11.58, 48.14",
        },
        follow_redirects=False,
    )
    task_url = r.headers["location"]
    with session_scope(db_url) as s:
        task = s.scalar(select(Task))
        assert task.speed_limit_kmh == 100 and task.max_lat == pytest.approx(48.14) and task.created_by_id
    c.post(task_url + "/rounds", data={"csrf_token": csrf_of(c), "scheduled_at": "2024-07-01T08:00"})
    with session_scope(db_url) as s:
        rnd = s.scalar(select(TaskRound))
        assert rnd.round_no == 1 and rnd.status == "planned"
    bad = c.post(f"/dashboard/rounds/{rnd.id}/status", data={"csrf_token": csrf_of(c), "status": "done"})
    assert "cannot go from planned to done" in bad.text
    c.post(f"/dashboard/rounds/{rnd.id}/status", data={"csrf_token": csrf_of(c), "status": "in_progress"})
    c.post(f"/dashboard/rounds/{rnd.id}/status", data={"csrf_token": csrf_of(c), "status": "done"})
    with session_scope(db_url) as s:
        rnd = s.get(TaskRound, rnd.id)
        assert rnd.status == "done" and rnd.started_at <= rnd.ended_at
    assert (
        c.get("/dashboard/api/map?task_id=%d" % task.id).json()["tasks"]["features"][0]["properties"]["name"]
        == "A9 north"
    )
    r = c.post("/dashboard/tasks", data={"csrf_token": csrf_of(c), "name": "x", "speed_limit_kmh": "-5"})
    assert "task not created" in r.text and "speed_limit_kmh" in r.text


def test_field_test_check_in_and_out(client_for, db_url):
    from db.engine import session_scope
    from db.models import FieldTestCheckin

    c = client_for("operator")
    r = c.post(
        "/dashboard/field-tests",
        data={"csrf_token": csrf_of(c), "name": "Airfield day", "location": "EDMX"},
        follow_redirects=False,
    )
    test_url = r.headers["location"]
    c.post(test_url + "/checkin", data={"csrf_token": csrf_of(c), "person_name": "Ana"})
    again = c.post(test_url + "/checkin", data={"csrf_token": csrf_of(c), "person_name": "Ana"})
    assert "check-in refused: already checked in" in again.text
    with session_scope(db_url) as s:
        row = s.scalar(select(FieldTestCheckin))
    c.post(f"/dashboard/checkins/{row.id}/checkout", data={"csrf_token": csrf_of(c)})
    c.post(test_url + "/checkin", data={"csrf_token": csrf_of(c), "person_name": "Ben"})
    c.post(test_url + "/end", data={"csrf_token": csrf_of(c)})
    with session_scope(db_url) as s:
        rows = list(s.scalars(select(FieldTestCheckin)))
    assert len(rows) == 2 and all(r.checked_out_at is not None for r in rows)
    viewer = client_for("viewer")
    page = viewer.get(test_url)
    assert "Ana" in page.text and 'id="checkin-form"' not in page.text


def test_admin_manages_users_but_not_the_last_admin(client_for, db_url):
    from db.engine import session_scope
    from db.models import User

    c = client_for("admin")
    r = c.post(
        "/dashboard/users",
        data={"csrf_token": csrf_of(c), "username": "newbie", "password": "long-enough-1", "role": "operator"},
    )
    assert "user &#39;newbie&#39; created with role operator" in r.text
    r = c.post("/dashboard/users", data={"csrf_token": csrf_of(c), "username": "shorty", "password": "short"})
    assert "user not created" in r.text and "password" in r.text
    with session_scope(db_url) as s:
        admin_id = s.scalar(select(User.id).where(User.username == "admin"))
    r = c.post(f"/dashboard/users/{admin_id}", data={"csrf_token": csrf_of(c), "role": "viewer"})
    assert "last active admin" in r.text
    with session_scope(db_url) as s:
        assert s.get(User, admin_id).role == "admin"


def test_admin_registers_device_and_token_is_shown_once(client_for, db_url):
    from db.crud import authenticate_device
    from db.engine import session_scope
    from db.models import Device

    c = client_for("admin")
    c.post(
        "/dashboard/devices",
        data={"csrf_token": csrf_of(c), "serial": "M3E-0042", "kind": "drone", "model": "Mavic 3E"},
    )
    with session_scope(db_url) as s:
        dev_id = s.scalar(select(Device.id).where(Device.serial == "M3E-0042"))
    page = c.post(f"/dashboard/devices/{dev_id}/token", data={"csrf_token": csrf_of(c)}).text
    token = page.split('id="new-token">', 1)[1].split("<", 1)[0]
    with session_scope(db_url) as s:
        assert authenticate_device(s, token).serial == "M3E-0042"
    assert 'id="new-token"' not in c.get("/dashboard/devices").text
    bad = c.post("/dashboard/devices", data={"csrf_token": csrf_of(c), "serial": "bad serial!"})
    assert "device not registered" in bad.text


PAGES = [
    "/map",
    "/flights",
    "/flights/{flight}",
    "/live",
    "/runs",
    "/runs/{run}",
    "/tasks",
    "/field-tests",
    "/devices",
    "/users",
]


def test_pages_load_nothing_from_the_internet(client_for, imported):
    """Every script, style and image comes from this server; the static files are really there."""
    c = client_for("admin")
    seen: set[str] = set()
    for page in PAGES:
        html = c.get("/dashboard" + page.format(flight=imported.flight_id, run=imported.run_id)).text
        refs = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert not [r for r in refs if re.match(r"(https?:)?//", r)], page
        seen.update(r for r in refs if "/static/" in r)
    seen.add("/dashboard/static/plotly.min.js")  # loaded by common.js when a page draws a chart
    for ref in seen:
        assert c.get(ref).status_code == 200, ref
    assert any("leaflet.js" in s for s in seen)


def test_tile_url_setting_is_passed_to_the_map(settings, users):
    from fastapi.testclient import TestClient

    from dashboard.app import create_app
    from tests.dashboard.dash_helpers import login

    s = settings.model_copy(update={"tile_url": "http://tiles.local/{z}/{x}/{y}.png"})
    with TestClient(create_app(s)) as c:
        login(c, "viewer", users["viewer"])
        assert "http://tiles.local/{z}/{x}/{y}.png" in c.get("/dashboard/map").text


def test_admin_actions_are_in_the_audit_log(client_for):
    """Creating a user, changing a role, registering a device, issuing and revoking tokens: each leaves an entry
    (who, from where, what) that admins see on the Users page; token values never appear in it."""
    from tests.dashboard.dash_helpers import csrf_of

    c = client_for("admin")
    token = csrf_of(c)
    assert (
        c.post(
            "/dashboard/users",
            data={"username": "eve", "password": "a-long-password", "role": "viewer", "csrf_token": token},
        ).status_code
        == 200
    )
    users = c.get("/dashboard/users").text
    import re

    eve_id = re.search(r'action="/dashboard/users/(\d+)"', users.split("<td>eve</td>", 1)[1]).group(1)
    c.post(f"/dashboard/users/{eve_id}", data={"role": "operator", "active": "1", "csrf_token": token})
    c.post("/dashboard/devices", data={"serial": "AUD-1", "kind": "drone", "csrf_token": token})
    page = c.get("/dashboard/devices").text
    dev_id = re.search(r"/dashboard/devices/(\d+)/token", page).group(1)
    c.post(f"/dashboard/devices/{dev_id}/token", data={"label": "", "csrf_token": token}, follow_redirects=False)
    issued = c.get("/dashboard/devices").text  # shown once, on this page
    plain = re.search(r"apt_[A-Za-z0-9_\-]+", issued).group(0)
    c.post(f"/dashboard/devices/{dev_id}/revoke-tokens", data={"csrf_token": token})
    audit = c.get("/dashboard/users").text.split('id="audit-table"', 1)[1]
    for action, target in [
        ("user.create", "user:eve"),
        ("user.update", "user:eve"),
        ("device.create", "device:AUD-1"),
        ("device.token_issue", "device:AUD-1"),
        ("device.tokens_revoke", "device:AUD-1"),
    ]:
        assert re.search(rf"<td>{re.escape(action)}</td><td>{re.escape(target)}</td>", audit), action
    assert "user:admin" in audit and "role=operator" in audit and "testclient" in audit
    assert plain not in audit
    assert client_for("operator").get("/dashboard/users").status_code == 403  # admins only
