"""Users (Argon2 hashes), device tokens, tasks, field-test check-in/out, dashboard queries - with validation."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select

from db.crud import (
    authenticate_device,
    authenticate_user,
    check_in,
    check_out,
    create_device,
    create_task,
    create_user,
    issue_device_token,
)
from db.engine import session_scope
from db.models import DeviceToken, FieldTest, Flight, User
from db.queries import flights_in_range
from db.validation import DbValidationError


def test_users_and_password_hashes(db_url):
    with session_scope(db_url) as s:
        create_user(s, "ana", "correct horse battery", role="operator", email="ana@example.org")
    with session_scope(db_url) as s:
        u = s.scalar(select(User))
        assert u.password_hash.startswith("$argon2id$") and "correct horse" not in u.password_hash
        assert authenticate_user(s, "ana", "correct horse battery").id == u.id
        assert authenticate_user(s, "ana", "wrong password") is None
        with pytest.raises(DbValidationError, match="already exists"):
            create_user(s, "ana", "another password")
        with pytest.raises(DbValidationError, match="role"):
            create_user(s, "bob", "long enough pw", role="root")
        with pytest.raises(DbValidationError, match="password"):
            create_user(s, "bob", "short")
        with pytest.raises(DbValidationError, match="username"):
            create_user(s, "b" * 65, "long enough pw")


def test_device_tokens_store_only_hashes(db_url):
    with session_scope(db_url) as s:
        d = create_device(s, "EDGE-7", kind="edge_node", camera_preset="dji_mavic3")
        token = issue_device_token(s, d, "field laptop")
    with session_scope(db_url) as s:
        stored = s.scalar(select(DeviceToken))
        assert token not in stored.token_hash and len(stored.token_hash) == 64
        assert authenticate_device(s, token).serial == "EDGE-7"
        assert authenticate_device(s, token + "x") is None
        stored.revoked_at = datetime(2024, 1, 1)
        s.flush()
        assert authenticate_device(s, token) is None
        with pytest.raises(DbValidationError, match="kind"):
            create_device(s, "X1", kind="submarine")
        with pytest.raises(DbValidationError, match="model"):
            create_device(s, "X2", model="m" * 129)


def test_tasks_validate_geometry_and_limits(db_url):
    with session_scope(db_url) as s:
        t = create_task(
            s,
            "Ring road",
            area=[(6.5, 46.4), (6.8, 46.4), (6.8, 46.7)],
            speed_limit_kmh=80,
            road=[(6.5, 46.5), (6.7, 46.6)],
        )
        ring = json.loads(t.area_geojson)["coordinates"][0]
        assert ring[0] == ring[-1] and (t.min_lat, t.max_lon) == (46.4, 6.8)
        for bad, match in (
            ({"speed_limit_kmh": "fast"}, "speed_limit_kmh"),
            ({"speed_limit_kmh": -5}, "speed_limit_kmh"),
            ({"area": [(200.0, 10.0), (1.0, 1.0), (2.0, 2.0)]}, "area"),
            ({"area": [(1.0, 1.0), (2.0, 2.0)]}, "at least 3"),
            ({"colour": "red"}, "colour"),
        ):
            with pytest.raises(DbValidationError, match=match):
                create_task(s, "bad", **bad)


def test_field_test_check_in_and_out(db_url):
    t0 = datetime(2024, 6, 1, 8, 0)
    with session_scope(db_url) as s:
        ft = FieldTest(name="Airfield trial", started_at=t0)
        s.add(ft)
        d = create_device(s, "M3-2")
        u = create_user(s, "pilot1", "long enough pw", role="operator")
        s.flush()
        cd = check_in(s, ft, device=d, at=t0)
        cu = check_in(s, ft, user=u, at=t0)
        cp = check_in(s, ft, person_name="Visitor Vera", at=t0)
        with pytest.raises(DbValidationError, match="already checked in"):
            check_in(s, ft, device=d)
        with pytest.raises(DbValidationError, match="needs a device"):
            check_in(s, ft)
        with pytest.raises(DbValidationError, match="before the check-in"):
            check_out(s, cd, at=t0 - timedelta(hours=1))
        check_out(s, cd, at=t0 + timedelta(hours=2))
        check_in(s, ft, device=d, at=t0 + timedelta(hours=3))  # back in after checking out
        assert cu.checked_out_at is None and cp.person_name == "Visitor Vera"
        assert len(ft.checkins) == 4


def test_flights_in_range(db_url):
    base = datetime(2024, 6, 1, 8, 0)
    with session_scope(db_url) as s:
        d = create_device(s, "M3-3")
        for h in range(10):
            s.add(
                Flight(
                    device_id=d.id,
                    start_time=base + timedelta(hours=h),
                    end_time=base + timedelta(hours=h, minutes=30),
                    status="complete",
                )
            )
        s.add(
            Flight(
                device_id=d.id,
                start_time=base - timedelta(hours=1),
                end_time=base + timedelta(minutes=10),
                status="complete",
            )
        )  # started before the range, still flying in it
    with session_scope(db_url) as s:
        found = flights_in_range(s, base, base + timedelta(hours=2, minutes=5))
        assert [f.start_time.hour for f in found] == [7, 8, 9, 10]
        assert flights_in_range(s, base + timedelta(days=3), base + timedelta(days=4)) == []


def test_violations_in_bbox_matches_brute_force(db_url):
    import random

    from db.models import ProcessingRun, TrackRow, Violation, grid_cell
    from db.queries import cells_in_box, violations_in_bbox

    rng = random.Random(3)
    t0 = datetime(2024, 1, 1)
    with session_scope(db_url) as s:
        run = ProcessingRun(status="complete")
        s.add(run)
        s.flush()
        track = TrackRow(run_id=run.id, track_no=1, class_name="car", first_t=0, last_t=1, first_frame=0, last_frame=1)
        s.add(track)
        s.flush()
        points = [(rng.uniform(46.0, 47.0), rng.uniform(6.0, 7.0)) for _ in range(2000)]
        points += [(46.5, 6.5), (46.51, 6.52), (46.52, 6.52)]  # exactly on cell and box edges
        for i, (lat, lon) in enumerate(points):
            s.add(
                Violation(
                    run_id=run.id,
                    track_id=track.id,
                    speed_kmh=70,
                    limit_kmh=50,
                    t_s=0.0,
                    lat=lat,
                    lon=lon,
                    cell=grid_cell(lat, lon),
                    occurred_at=t0 + timedelta(hours=i),
                )
            )
    boxes = [(46.5, 6.5, 46.52, 6.52), (46.1, 6.2, 46.4, 6.35), (46.0, 6.0, 47.0, 7.0), (46.93, 6.05, 46.931, 6.051)]
    with session_scope(db_url) as s:
        for box in boxes:
            want = sorted(i for i, (la, lo) in enumerate(points) if box[0] <= la <= box[2] and box[1] <= lo <= box[3])
            got = sorted(int((v.occurred_at - t0).total_seconds() // 3600) for v in violations_in_bbox(s, *box))
            assert got == want, box
        assert cells_in_box(*boxes[0]) is not None and cells_in_box(*boxes[2]) is None  # both query paths covered
        window = violations_in_bbox(s, 46.0, 6.0, 47.0, 7.0, t0 + timedelta(hours=10), t0 + timedelta(hours=19))
        assert len(window) == 10 and window[0].occurred_at > window[-1].occurred_at  # newest first
