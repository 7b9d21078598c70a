"""Migrations build exactly the ORM schema, on SQLite and MariaDB; both back ends store the same values."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Table, inspect, select

from db.engine import make_db_engine, session_scope
from db.migrate import SchemaOutOfDateError, current_revision, head_revision, require_current, upgrade
from db.models import Base, Device, Flight, ProcessingRun, TelemetrySampleRow


def test_upgrade_builds_the_model_schema(empty_db_url):
    with pytest.raises(SchemaOutOfDateError, match="airpatrol db upgrade"):
        require_current(empty_db_url)
    assert upgrade(empty_db_url) == head_revision() == "0006"
    assert upgrade(empty_db_url) == head_revision()  # idempotent
    require_current(empty_db_url)
    engine = make_db_engine(empty_db_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
        assert diff == [], f"migrations and models disagree: {diff}"
        names = set(inspect(engine).get_table_names())
        assert {
            "users",
            "devices",
            "device_tokens",
            "tasks",
            "task_rounds",
            "flights",
            "telemetry_samples",
            "videos",
            "processing_runs",
            "tracks",
            "track_speeds",
            "violations",
            "field_tests",
            "field_test_checkins",
            "service_streams",
            "service_uploads",
            "service_jobs",
            "login_throttle",
            "audit_log",
            "counting_lines",
            "study_approaches",
        } <= names
        indexes = {ix["name"] for t in names for ix in inspect(engine).get_indexes(t)}
        for required in (
            "ix_flights_start_time",
            "ix_processing_runs_flight_id",
            "ix_violations_occurred_at",
            "ix_violations_cell_occurred_at",
            "ix_telemetry_samples_flight_id_t_s",
            "ix_track_speeds_track_id_frame",
            "ix_service_uploads_owner_created_at",
            "ix_counting_lines_task_id",
        ):
            assert required in indexes
    finally:
        engine.dispose()
    assert current_revision(empty_db_url) == head_revision()


def test_same_values_on_both_back_ends(db_url):
    when = datetime(2024, 5, 17, 10, 11, 12, 345678)
    with session_scope(db_url) as s:
        d = Device(serial="SN-ü-1", name="Drohne 🚁 Süd", model="DJI Mavic 3")
        s.add(d)
        s.flush()
        f = Flight(
            device_id=d.id, start_time=when, home_lat=-35.363262123456, home_lon=149.165237412345, status="complete"
        )
        s.add(f)
        s.flush()
        s.add(TelemetrySampleRow(flight_id=f.id, t_s=3601.123456, lat=47.123456789, lon=8.987654321, rel_alt_m=80.5))
    with session_scope(db_url) as s:
        d = s.scalar(select(Device))
        assert d.name == "Drohne 🚁 Süd" and d.serial == "SN-ü-1"  # utf8mb4 (4-byte emoji)
        f = s.scalar(select(Flight))
        assert f.start_time == when  # DATETIME(6): microseconds kept
        assert f.home_lat == -35.363262123456 and f.home_lon == 149.165237412345  # DOUBLE, not FLOAT
        row = s.scalar(select(TelemetrySampleRow))
        assert row.t_s == 3601.123456 and row.lat == 47.123456789 and isinstance(row.id, int)


def test_foreign_keys_are_enforced(db_url):
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        with session_scope(db_url) as s:
            s.add(TelemetrySampleRow(flight_id=999999, t_s=0.0))


def test_upgrade_adopts_service_tables_made_before_they_were_migrations(empty_db_url):
    """A deployment whose service created its own tables (at schema 0001) upgrades in place, rows kept."""
    from sqlalchemy import text

    from db.service_models import JobRow, StreamRow, UploadRow

    assert upgrade(empty_db_url, "0001") == "0001"
    engine = make_db_engine(empty_db_url)
    try:
        for model in (JobRow, StreamRow, UploadRow):  # what the service's create_all did before
            cast(Table, model.__table__).create(engine)  # a mapped class's table (typed as any FROM clause)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO service_streams (name, kind, active, created_by, created_at) "
                    "VALUES ('cam', 'pull', 1, 'user:admin', '2026-01-01 00:00:00')"
                )
            )
    finally:
        engine.dispose()
    assert upgrade(empty_db_url) == head_revision()
    with session_scope(empty_db_url) as s:
        assert [r.name for r in s.scalars(select(StreamRow))] == ["cam"]
        run = ProcessingRun(status="complete")
        s.add(run)
        s.flush()
        assert run.completeness == "complete" and run.losses_json is None


def test_upgrade_to_0003_fills_existing_violations_from_their_speed_rows(empty_db_url):
    """Violations stored before 0003 get the sigma of the speed row they were taken from (same track and video
    time) and speed - 2 sigma; a violation without such a row keeps sigma NULL and its speed as the lower bound."""
    from sqlalchemy import text

    from db.models import Violation

    assert upgrade(empty_db_url, "0002") == "0002"
    engine = make_db_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO processing_runs (id, status, baseline, progress, frames_done, completeness,"
                    " created_at) VALUES (1, 'complete', 0, 1, 10, 'complete', '2026-01-01 00:00:00')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO tracks (id, run_id, track_no, class_name, first_t, last_t, first_frame,"
                    " last_frame, moving) VALUES (1, 1, 7, 'car', 0, 2, 0, 20, 1), (2, 1, 8, 'car', 0, 2, 0, 20, 1)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO track_speeds (track_id, frame, t_s, speed_kmh, sigma_kmh) VALUES"
                    " (1, 5, 0.5, 88, 3), (1, 6, 0.6, 91, 4.5)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO violations (run_id, track_id, speed_kmh, limit_kmh, time_is_estimate, t_s)"
                    " VALUES (1, 1, 91, 80, 1, 0.6), (1, 2, 99, 80, 1, 1.0)"
                )
            )
    finally:
        engine.dispose()
    assert upgrade(empty_db_url) == head_revision()
    with session_scope(empty_db_url) as s:
        got = {v.track_id: (v.sigma_kmh, v.lower_bound_kmh, v.rule) for v in s.scalars(select(Violation))}
    assert got == {1: (4.5, 82.0, None), 2: (None, 99.0, None)}
