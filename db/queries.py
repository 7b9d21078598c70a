"""The dashboard's main read queries, each served by an index (measured times: docs/database.md).

List queries return lightweight rows (``Row`` named tuples with the listed columns, ready for JSON) rather
than ORM objects: building thousands of ORM objects costs more than the query itself. Each has a ``*_stmt``
twin returning the SELECT (for paging, counting, or measuring the database's share of the time).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Row, Select, and_, or_, select
from sqlalchemy.orm import Session

from db.models import GRID_DEG, Flight, ProcessingRun, TrackRow, TrackSpeed, Violation, as_naive_utc, grid_cell

MAX_FLIGHT = timedelta(days=1)
MAX_BOX_CELLS = 2500  # 0.5 x 0.5 degrees at the 0.01 degree grid
_COLS = round(360 / GRID_DEG)

FLIGHT_COLUMNS = (
    Flight.id,
    Flight.device_id,
    Flight.pilot_id,
    Flight.task_round_id,
    Flight.start_time,
    Flight.end_time,
    Flight.clock,
    Flight.home_lat,
    Flight.home_lon,
    Flight.status,
    Flight.sample_count,
)
TRACK_COLUMNS = (
    TrackRow.id,
    TrackRow.track_no,
    TrackRow.class_name,
    TrackRow.first_t,
    TrackRow.last_t,
    TrackRow.first_frame,
    TrackRow.last_frame,
    TrackRow.moving,
    TrackRow.median_speed_kmh,
    TrackRow.max_speed_kmh,
)
SPEED_COLUMNS = (
    TrackSpeed.frame,
    TrackSpeed.t_s,
    TrackSpeed.speed_kmh,
    TrackSpeed.sigma_kmh,
    TrackSpeed.lat,
    TrackSpeed.lon,
    TrackSpeed.flag,
)
VIOLATION_COLUMNS = (
    Violation.id,
    Violation.run_id,
    Violation.track_id,
    Violation.task_id,
    Violation.speed_kmh,
    Violation.limit_kmh,
    Violation.occurred_at,
    Violation.time_is_estimate,
    Violation.lat,
    Violation.lon,
)


def flights_in_range(
    session: Session, start: datetime, end: datetime, device_id: int | None = None, limit: int = 1000
) -> list[Row]:
    """Flights overlapping [start, end], by start time (ix_flights_start_time, ix_flights_device_id_start_time)."""
    return list(session.execute(flights_in_range_stmt(start, end, device_id, limit)).all())


def flights_in_range_stmt(start: datetime, end: datetime, device_id: int | None = None, limit: int = 1000) -> Select:
    """The lower bound ``start - MAX_FLIGHT`` keeps the index range small: a flight that started earlier than that
    cannot still be in the air."""
    start, end = as_naive_utc(start), as_naive_utc(end)
    q = select(*FLIGHT_COLUMNS).where(
        Flight.start_time <= end,
        Flight.start_time >= start - MAX_FLIGHT,
        or_(Flight.end_time >= start, and_(Flight.end_time.is_(None), Flight.start_time >= start)),
    )
    if device_id is not None:
        q = q.where(Flight.device_id == device_id)
    return q.order_by(Flight.start_time).limit(limit)


def complete_run_of_video(session: Session, video_id: int, baseline: bool = False) -> ProcessingRun | None:
    return session.scalar(
        select(ProcessingRun).where(
            ProcessingRun.video_id == video_id, ProcessingRun.baseline == baseline, ProcessingRun.status == "complete"
        )
    )


def runs_of_flight(session: Session, flight_id: int) -> list[ProcessingRun]:
    """Runs of a flight (ix_processing_runs_flight_id), oldest first."""
    return list(
        session.scalars(select(ProcessingRun).where(ProcessingRun.flight_id == flight_id).order_by(ProcessingRun.id))
    )


def tracks_of_run(session: Session, run_id: int, with_paths: bool = False) -> list[Row]:
    """All tracks of a run (uq_tracks_run_id_track_no); ``with_paths`` adds the GeoJSON path column."""
    return list(session.execute(tracks_of_run_stmt(run_id, with_paths)).all())


def tracks_of_run_stmt(run_id: int, with_paths: bool = False) -> Select:
    columns = TRACK_COLUMNS + ((TrackRow.path_geojson,) if with_paths else ())
    return select(*columns).where(TrackRow.run_id == run_id).order_by(TrackRow.track_no)


def speeds_of_track(session: Session, track_id: int) -> list[Row]:
    """Per-frame rows of one track (ix_track_speeds_track_id_frame)."""
    return list(session.execute(speeds_of_track_stmt(track_id)).all())


def speeds_of_track_stmt(track_id: int) -> Select:
    return select(*SPEED_COLUMNS).where(TrackSpeed.track_id == track_id).order_by(TrackSpeed.frame)


def violations_in_bbox(
    session: Session,
    min_lat: float,
    min_lon: float,
    max_lat: float,
    max_lon: float,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 5000,
) -> list[Row]:
    """Violations inside a lat/lon box, optionally within a time range, newest first."""
    return list(session.execute(violations_in_bbox_stmt(min_lat, min_lon, max_lat, max_lon, start, end, limit)).all())


def violations_in_bbox_stmt(
    min_lat: float,
    min_lon: float,
    max_lat: float,
    max_lon: float,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 5000,
) -> Select:
    """Box query plan:

    A box of up to MAX_BOX_CELLS grid cells is looked up by ``cell IN (...)`` on ix_violations_cell_occurred_at
    (cost grows with the result, not the table); a larger box matches densely, and the newest-first scan of
    ix_violations_occurred_at finds ``limit`` rows quickly. Violations exist only for complete runs (they are
    written in the transaction that completes the run and deleted with a superseded run), so no join is needed.
    """
    conds: list[ColumnElement[bool]] = [
        Violation.lat.between(min_lat, max_lat),
        Violation.lon.between(min_lon, max_lon),
    ]
    cells = cells_in_box(min_lat, min_lon, max_lat, max_lon)
    if cells is not None:
        conds.append(Violation.cell.in_(cells))
    if start is not None:
        conds.append(Violation.occurred_at >= as_naive_utc(start))
    if end is not None:
        conds.append(Violation.occurred_at <= as_naive_utc(end))
    return select(*VIOLATION_COLUMNS).where(and_(*conds)).order_by(Violation.occurred_at.desc()).limit(limit)


def cells_in_box(min_lat: float, min_lon: float, max_lat: float, max_lon: float) -> list[int] | None:
    """Grid cells covering the box, or None when there are more than MAX_BOX_CELLS (or it crosses 180 deg)."""
    low, high = grid_cell(min_lat, min_lon), grid_cell(max_lat, max_lon)
    rows = range(low // _COLS, high // _COLS + 1)
    cols = range(low % _COLS, high % _COLS + 1)
    if not rows or not cols or len(rows) * len(cols) > MAX_BOX_CELLS:
        return None
    return [r * _COLS + c for r in rows for c in cols]
