"""Back up -> restore into a fresh database keeps every object a user makes: users, devices and their tokens, tasks
and rounds, flights, runs and their results, counting lines and zones, study approaches, stream calibrations, uploads,
jobs, field tests, the audit log. The test makes one of each, runs `airpatrol db backup`, restores into a new, empty database
with `airpatrol db restore --yes` and compares every table row by row - on SQLite and on a real MariaDB server."""

from __future__ import annotations

import os
from datetime import datetime

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from db import approaches, crud
from db.engine import dispose_engines, make_db_engine, session_scope
from db.models import (
    AuditEntry,
    Base,
    FieldTest,
    Flight,
    ProcessingRun,
    TaskRound,
    TelemetrySampleRow,
    TrackRow,
    TrackSpeed,
    Video,
    Violation,
)
from db.service_models import JobRow, StreamRow, UploadRow
from tracking.config import CalibrationConfig

WHEN = datetime(2026, 11, 20, 10, 11, 12, 345678)
# tables filled by the service or the login code on their own (not made by a user), allowed to be empty
NOT_USER_MADE = {"login_throttle"}


def _make_one_of_each(url: str) -> None:
    from dashboard import counting_store
    from edge.service import stream_calibration

    with session_scope(url) as s:
        user = crud.create_user(s, "op-ünï", "a long password 🚁", role="operator", display_name="Opérateur")
        device = crud.create_device(s, "M3-0042", model="Mavic 3", name="Süd")
        crud.issue_device_token(s, device, label="controller")
        task = crud.create_task(
            s, "B4 north", speed_limit_kmh=80, area=[(8.54, 47.38), (8.55, 47.38), (8.55, 47.39)], road_name="B4"
        )
        rnd = TaskRound(task_id=task.id, round_no=1, status="done")
        s.add(rnd)
        s.flush()
        flight = Flight(device_id=device.id, pilot_id=user.id, task_round_id=rnd.id, start_time=WHEN, status="ok")
        s.add(flight)
        s.flush()
        s.add(TelemetrySampleRow(flight_id=flight.id, t_s=0.1, lat=47.381234567, lon=8.541234567))
        video = Video(flight_id=flight.id, file_path="/videos/DJI_0001.MP4", fps=29.97, width=3840, height=2160)
        s.add(video)
        s.flush()
        run = ProcessingRun(video_id=video.id, flight_id=flight.id, task_round_id=rnd.id, status="complete")
        run_alone = ProcessingRun(status="complete")  # a run without a task: its lines are its own
        s.add_all([run, run_alone])
        s.flush()
        track = TrackRow(
            run_id=run.id, track_no=7, class_name="car", first_t=0.0, last_t=2.0, first_frame=0, last_frame=60
        )
        s.add(track)
        s.flush()
        s.add(TrackSpeed(track_id=track.id, frame=12, t_s=0.4, speed_kmh=91.5, sigma_kmh=2.0, lat=47.38, lon=8.54))
        s.add(Violation(run_id=run.id, track_id=track.id, task_id=task.id, speed_kmh=91.5, limit_kmh=80, t_s=0.4))
        counting_store.add_line(
            s,
            counting_store.site_key(task.id, run.id),
            {"kind": "line", "name": "north gate", "coordinates": [[8.541, 47.381], [8.542, 47.381]]},
            user.username,
        )
        counting_store.add_line(
            s,
            counting_store.site_key(None, run_alone.id),
            {"kind": "zone", "name": "yard", "coordinates": [[8.54, 47.38], [8.541, 47.38], [8.541, 47.381]]},
            user.username,
        )
        approaches.replace_site_approaches(  # a junction's study approaches, kept for the task (issue 24)
            s,
            approaches.Site(task.id, None),
            approaches.clean([{"key": "A", "name": "north arm", "lon": 8.541, "lat": 47.382, "heading_deg": 180}]),
            user.id,
        )
        stream = StreamRow(name="gate cam", kind="push", device_id=device.id, created_by=f"user:{user.username}")
        s.add(stream)
        s.flush()
        stream_calibration.save(s, stream.id, CalibrationConfig(metres_per_pixel=0.05))
        s.add(UploadRow(id="b" * 32, kind="video", filename="DJI_0001.MP4", size=123456, owner="user:op"))
        s.add(JobRow(video_upload_id="b" * 32, created_by="user:op", params={"speed_limit_kmh": 80}))
        field_test = FieldTest(name="Dübendorf trial", task_id=task.id, started_at=WHEN)
        s.add(field_test)
        s.flush()
        crud.check_out(s, crud.check_in(s, field_test, device=device, at=WHEN), at=WHEN.replace(hour=12))
        s.add(AuditEntry(actor="admin", action="user.create", target=f"user:{user.id}", detail={"role": "operator"}))


def _tables(url: str) -> dict[str, list[dict]]:
    """Every table's rows, ordered by primary key."""
    engine = make_db_engine(url)
    try:
        with engine.connect() as conn:
            return {
                t.name: [dict(r._mapping) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
                for t in Base.metadata.sorted_tables
            }
    finally:
        engine.dispose()


@pytest.fixture
def fresh_url(db_url, tmp_path, request):
    """A second, empty database on the same back end as ``db_url`` (no schema: the restore brings it)."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh' / 'airpatrol.db'}"
        return
    server = request.getfixturevalue("mariadb_server")
    name = f"fresh_{os.getpid()}"
    url = server.create_database(name)
    yield url
    dispose_engines()
    server.drop_database(name)


def test_backup_restore_keeps_every_user_made_object(db_url, fresh_url, tmp_path):
    from edge.cli import app

    _make_one_of_each(db_url)
    before = _tables(db_url)
    empty = sorted(name for name, rows in before.items() if not rows and name not in NOT_USER_MADE)
    assert empty == [], f"the test makes no row in {empty}: add one"
    file = tmp_path / ("airpatrol.bak" if db_url.startswith("sqlite") else "airpatrol.sql.gz")
    runner = CliRunner()
    r = runner.invoke(app, ["db", "backup", str(file), "--database-url", db_url])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["db", "restore", str(file), "--yes", "--database-url", fresh_url])
    assert r.exit_code == 0, r.output
    dispose_engines()
    after = _tables(fresh_url)
    for name, rows in before.items():
        assert after[name] == rows, f"table {name} differs after the restore"
    with session_scope(fresh_url) as s:  # what the pages and the service read back
        from dashboard import counting_store
        from edge.service import stream_calibration

        task_id = s.scalar(select(TaskRound.task_id))
        (line,) = counting_store.site_lines(s, counting_store.site_key(task_id, 0))
        assert line["name"] == "north gate" and line["coordinates"] == [[8.541, 47.381], [8.542, 47.381]]
        stream_id = s.scalar(select(StreamRow.id))
        assert stream_calibration.describe(stream_calibration.load(s, stream_id)) == "0.05 m per pixel"
