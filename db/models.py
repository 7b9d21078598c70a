"""The relational schema (SQLAlchemy 2 typed ORM). Changes go through an Alembic migration in db/migrations.

Portability rules (SQLite and MariaDB behave the same): every string has a length, tables are InnoDB/utf8mb4,
timestamps are DATETIME(6) holding naive UTC, coordinates are DOUBLE, high-volume rows use BIGINT ids.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, overload

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Double,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

# Re-exported: callers import these from db.models, as before db/base.py existed.
from db.base import MYSQL_TABLE, NAMING, Base, BigId, DateTime6, utcnow  # noqa: F401

ROLES = ("admin", "operator", "viewer")
DEVICE_KINDS = ("drone", "controller", "edge_node", "other")
RUN_STATUSES = ("queued", "running", "complete", "failed", "superseded")
COMPLETENESS = ("complete", "incomplete")  # did the run see all of its input (edge/completeness.py)?
THROTTLE_SCOPES = ("client", "account", "trusted")
ROUND_STATUSES = ("planned", "in_progress", "done", "cancelled")


@overload
def as_naive_utc(value: datetime) -> datetime: ...
@overload
def as_naive_utc(value: None) -> None: ...
@overload
def as_naive_utc(value: datetime | None) -> datetime | None: ...
def as_naive_utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class User(Base):
    __tablename__ = "users"
    __table_args__ = (CheckConstraint(_in("role", ROLES), name="role"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(128))
    email: Mapped[str | None] = mapped_column(String(254))
    role: Mapped[str] = mapped_column(String(16), default="viewer")
    password_hash: Mapped[str] = mapped_column(String(255))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Device(Base):
    """A drone, remote controller or edge computer, identified by its serial number."""

    __tablename__ = "devices"
    __table_args__ = (CheckConstraint(_in("kind", DEVICE_KINDS), name="kind"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16), default="drone")
    model: Mapped[str | None] = mapped_column(String(128))
    name: Mapped[str | None] = mapped_column(String(128))
    camera_preset: Mapped[str | None] = mapped_column(String(64))
    notes: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    tokens: Mapped[list[DeviceToken]] = relationship(back_populates="device", cascade="all, delete-orphan")


class DeviceToken(Base):
    """API token of a device (edge node uploading results). Only a SHA-256 of the token is stored."""

    __tablename__ = "device_tokens"
    __table_args__ = (MYSQL_TABLE,)

    id: Mapped[int] = mapped_column(primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    device: Mapped[Device] = relationship(back_populates="tokens")


class Task(Base):
    """A patrol mission: an area (GeoJSON polygon + its bounding box), a road segment, a speed limit."""

    __tablename__ = "tasks"
    __table_args__ = (
        CheckConstraint("speed_limit_kmh IS NULL OR speed_limit_kmh > 0", name="speed_limit"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    area_geojson: Mapped[str | None] = mapped_column(Text)
    min_lat: Mapped[float | None] = mapped_column(Double)
    min_lon: Mapped[float | None] = mapped_column(Double)
    max_lat: Mapped[float | None] = mapped_column(Double)
    max_lon: Mapped[float | None] = mapped_column(Double)
    road_name: Mapped[str | None] = mapped_column(String(200))
    road_geojson: Mapped[str | None] = mapped_column(Text)
    speed_limit_kmh: Mapped[float | None] = mapped_column(Float)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    rounds: Mapped[list[TaskRound]] = relationship(back_populates="task", cascade="all, delete-orphan")


class TaskRound(Base):
    """One execution of a task (e.g. the Monday morning patrol)."""

    __tablename__ = "task_rounds"
    __table_args__ = (
        UniqueConstraint("task_id", "round_no"),
        CheckConstraint(_in("status", ROUND_STATUSES), name="status"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    round_no: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="planned")
    scheduled_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    notes: Mapped[str | None] = mapped_column(Text)

    task: Mapped[Task] = relationship(back_populates="rounds")


class Flight(Base):
    """One flight; ``status`` is ``complete``, ``partial: <where the log stopped>`` or ``planned`` (no log yet)."""

    __tablename__ = "flights"
    __table_args__ = (Index(None, "device_id", "start_time"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(primary_key=True)
    device_id: Mapped[int | None] = mapped_column(ForeignKey("devices.id", ondelete="RESTRICT"))
    pilot_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    task_round_id: Mapped[int | None] = mapped_column(ForeignKey("task_rounds.id", ondelete="SET NULL"), index=True)
    start_time: Mapped[datetime | None] = mapped_column(index=True)
    end_time: Mapped[datetime | None]
    clock: Mapped[str | None] = mapped_column(String(8))  # "utc", or "local" (DJI SRT wall clock, zone unknown)
    home_lat: Mapped[float | None] = mapped_column(Double)
    home_lon: Mapped[float | None] = mapped_column(Double)
    home_alt_m: Mapped[float | None] = mapped_column(Float)
    source_file: Mapped[str | None] = mapped_column(String(1024))
    source_format: Mapped[str | None] = mapped_column(String(32))
    checksum: Mapped[str | None] = mapped_column(String(64), unique=True)  # sha256 of the log file
    sample_count: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(255), default="planned")
    notes: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    device: Mapped[Device | None] = relationship()


class TelemetrySampleRow(Base):
    __tablename__ = "telemetry_samples"
    __table_args__ = (Index(None, "flight_id", "t_s"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id", ondelete="CASCADE"))
    t_s: Mapped[float] = mapped_column(Double)
    time_utc: Mapped[datetime | None]
    lat: Mapped[float | None] = mapped_column(Double)
    lon: Mapped[float | None] = mapped_column(Double)
    rel_alt_m: Mapped[float | None] = mapped_column(Float)
    abs_alt_m: Mapped[float | None] = mapped_column(Float)
    heading_deg: Mapped[float | None] = mapped_column(Float)
    gimbal_pitch_deg: Mapped[float | None] = mapped_column(Float)
    gimbal_yaw_deg: Mapped[float | None] = mapped_column(Float)
    gimbal_roll_deg: Mapped[float | None] = mapped_column(Float)
    ground_speed_ms: Mapped[float | None] = mapped_column(Float)
    vertical_speed_ms: Mapped[float | None] = mapped_column(Float)
    battery_pct: Mapped[float | None] = mapped_column(Float)
    focal_len_mm: Mapped[float | None] = mapped_column(Float)
    frame_cnt: Mapped[int | None] = mapped_column(Integer)


class Video(Base):
    __tablename__ = "videos"
    __table_args__ = (MYSQL_TABLE,)

    id: Mapped[int] = mapped_column(primary_key=True)
    flight_id: Mapped[int | None] = mapped_column(ForeignKey("flights.id", ondelete="SET NULL"), index=True)
    file_path: Mapped[str] = mapped_column(String(1024))
    checksum: Mapped[str | None] = mapped_column(String(64), index=True)
    duration_s: Mapped[float | None] = mapped_column(Double)
    fps: Mapped[float | None] = mapped_column(Float)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    frame_count: Mapped[int | None] = mapped_column(Integer)
    time_offset_s: Mapped[float] = mapped_column(Double, default=0.0)  # telemetry time = video time + offset
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ProcessingRun(Base):
    __tablename__ = "processing_runs"
    __table_args__ = (
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
        CheckConstraint(_in("completeness", COMPLETENESS), name="completeness"),
        CheckConstraint("progress >= 0 AND progress <= 1", name="progress"),
        Index(None, "video_id", "status"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    video_id: Mapped[int | None] = mapped_column(ForeignKey("videos.id", ondelete="SET NULL"))
    flight_id: Mapped[int | None] = mapped_column(ForeignKey("flights.id", ondelete="SET NULL"), index=True)
    task_round_id: Mapped[int | None] = mapped_column(ForeignKey("task_rounds.id", ondelete="SET NULL"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    baseline: Mapped[bool] = mapped_column(Boolean, default=False)
    source: Mapped[str | None] = mapped_column(String(1024))
    config_json: Mapped[dict[str, Any] | None]
    weights: Mapped[str | None] = mapped_column(String(1024))
    device: Mapped[str | None] = mapped_column(String(64))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    frames_done: Mapped[int] = mapped_column(Integer, default=0)
    # index of the last frame processed: a live run's frames are numbered from the stream's start and paced, so
    # frames_done - 1 is not its last frame (db.vehicles.counted asks which tracks were tracked at the end)
    last_frame: Mapped[int | None] = mapped_column(Integer)
    frame_count: Mapped[int | None] = mapped_column(Integer)
    timings_json: Mapped[dict[str, Any] | None]
    summary_json: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
    # 'incomplete': part of the input (video frames, flight log) was damaged; losses_json lists what and where
    completeness: Mapped[str] = mapped_column(String(16), default="complete", server_default="complete")
    losses_json: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # the scale source most frames used (summary_json -> scale has the detail): telemetry, calibration, size_prior
    scale_source: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]  # last batch written; a 'running' run that stopped beating died
    finished_at: Mapped[datetime | None]


class TrackRow(Base):
    __tablename__ = "tracks"
    __table_args__ = (UniqueConstraint("run_id", "track_no"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("processing_runs.id", ondelete="CASCADE"))
    track_no: Mapped[int] = mapped_column(Integer)  # the tracker's id within the run
    class_name: Mapped[str] = mapped_column(String(16))
    first_t: Mapped[float] = mapped_column(Double)
    last_t: Mapped[float] = mapped_column(Double)
    first_frame: Mapped[int] = mapped_column(Integer)
    last_frame: Mapped[int] = mapped_column(Integer)
    moving: Mapped[bool] = mapped_column(Boolean, default=True)
    median_speed_kmh: Mapped[float | None] = mapped_column(Float)
    max_speed_kmh: Mapped[float | None] = mapped_column(Float)
    median_sigma_kmh: Mapped[float | None] = mapped_column(Float)  # of the speeds counted in median_speed_kmh
    # where the scale of its speeds came from (tracking.types.ScaleSource: telemetry, calibration, size_prior),
    # the one most of its speeds used
    scale_source: Mapped[str | None] = mapped_column(String(16))
    path_geojson: Mapped[str | None] = mapped_column(Text)  # LineString of [lon, lat] when georeferenced


class TrackSpeed(Base):
    """One track in one frame (the big table: one row per vehicle per frame)."""

    __tablename__ = "track_speeds"
    __table_args__ = (Index(None, "track_id", "frame"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    track_id: Mapped[int] = mapped_column(BigId, ForeignKey("tracks.id", ondelete="CASCADE"))
    frame: Mapped[int] = mapped_column(Integer)
    t_s: Mapped[float] = mapped_column(Double)
    speed_kmh: Mapped[float | None] = mapped_column(Float)
    sigma_kmh: Mapped[float | None] = mapped_column(Float)
    lat: Mapped[float | None] = mapped_column(Double)
    lon: Mapped[float | None] = mapped_column(Double)
    flag: Mapped[str | None] = mapped_column(String(32))


GRID_DEG = 0.01  # map-grid cell size for bounding-box queries (~1.1 km north-south)
_GRID_PER_DEG = round(1 / GRID_DEG)
_GRID_COLS = 360 * _GRID_PER_DEG


@overload
def grid_cell(lat: float, lon: float) -> int: ...
@overload
def grid_cell(lat: float | None, lon: float | None) -> int | None: ...
def grid_cell(lat: float | None, lon: float | None) -> int | None:
    """Integer id of the GRID_DEG x GRID_DEG cell holding (lat, lon): a portable stand-in for a spatial index.

    A bounding box becomes ``cell IN (...)`` over the few cells it covers, which both SQLite and MariaDB answer
    from the (cell, occurred_at) index in time proportional to the result, not to the table.
    """
    if lat is None or lon is None:
        return None
    row = min(int(math.floor((lat + 90.0) * _GRID_PER_DEG)), 180 * _GRID_PER_DEG - 1)
    col = int(math.floor((lon + 180.0) * _GRID_PER_DEG)) % _GRID_COLS
    return row * _GRID_COLS + col


class Violation(Base):
    __tablename__ = "violations"
    __table_args__ = (Index(None, "cell", "occurred_at"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("processing_runs.id", ondelete="CASCADE"), index=True)
    track_id: Mapped[int] = mapped_column(BigId, ForeignKey("tracks.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id", ondelete="SET NULL"), index=True)
    speed_kmh: Mapped[float] = mapped_column(Float)
    limit_kmh: Mapped[float] = mapped_column(Float)
    # the evidence: speed_kmh's 1-sigma uncertainty, speed - 2 sigma (what exceeded the limit), how long the
    # vehicle was over the limit by that rule, the rule in words (tracking.types.violation_rule) and the scale
    # source of the speed (a size-prior speed is low confidence; its sigma carries the scale's error)
    sigma_kmh: Mapped[float | None] = mapped_column(Float)
    lower_bound_kmh: Mapped[float | None] = mapped_column(Float)
    over_limit_s: Mapped[float | None] = mapped_column(Float)
    rule: Mapped[str | None] = mapped_column(String(96))
    scale_source: Mapped[str | None] = mapped_column(String(16))
    occurred_at: Mapped[datetime | None] = mapped_column(index=True)
    time_is_estimate: Mapped[bool] = mapped_column(Boolean, default=False)  # no flight clock: processing time used
    t_s: Mapped[float] = mapped_column(Double)
    lat: Mapped[float | None] = mapped_column(Double)
    lon: Mapped[float | None] = mapped_column(Double)
    cell: Mapped[int | None] = mapped_column(Integer)  # grid_cell(lat, lon)


class StudyApproach(Base):
    """An approach of a junction for the traffic study (``tracking.study``): where vehicles enter and leave the view.

    Kept per **site**, as counting lines are: the run's task (every flight of the task is studied with the same
    approaches), or the run itself when it has no task. Position in lon/lat (a site outlives any one run's local
    metres); ``key`` is the approach's id in the study's tables (``A``, ``B``, ...), ``name`` what people call it.
    """

    __tablename__ = "study_approaches"
    __table_args__ = (
        CheckConstraint(
            "(task_id IS NOT NULL AND run_id IS NULL) OR (task_id IS NULL AND run_id IS NOT NULL)", name="site"
        ),
        CheckConstraint("radius_m > 0", name="radius"),
        UniqueConstraint("task_id", "key"),
        UniqueConstraint("run_id", "key"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("processing_runs.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(80))
    lon: Mapped[float] = mapped_column(Double)
    lat: Mapped[float] = mapped_column(Double)
    heading_deg: Mapped[float] = mapped_column(Float)  # direction of travel into the junction, compass degrees
    radius_m: Mapped[float] = mapped_column(Float)
    updated_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class FieldTest(Base):
    __tablename__ = "field_tests"
    __table_args__ = (MYSQL_TABLE,)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    location: Mapped[str | None] = mapped_column(String(200))
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id", ondelete="SET NULL"))
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    notes: Mapped[str | None] = mapped_column(Text)

    checkins: Mapped[list[FieldTestCheckin]] = relationship(back_populates="field_test", cascade="all, delete-orphan")


class FieldTestCheckin(Base):
    """A device or a person checked in to (and later out of) a field test."""

    __tablename__ = "field_test_checkins"
    __table_args__ = (
        CheckConstraint("device_id IS NOT NULL OR user_id IS NOT NULL OR person_name IS NOT NULL", name="who"),
        CheckConstraint("checked_out_at IS NULL OR checked_out_at >= checked_in_at", name="order"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    field_test_id: Mapped[int] = mapped_column(ForeignKey("field_tests.id", ondelete="CASCADE"), index=True)
    device_id: Mapped[int | None] = mapped_column(ForeignKey("devices.id", ondelete="RESTRICT"), index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="RESTRICT"), index=True)
    person_name: Mapped[str | None] = mapped_column(String(128))  # people without an account
    checked_in_at: Mapped[datetime] = mapped_column(default=utcnow)
    checked_out_at: Mapped[datetime | None]
    notes: Mapped[str | None] = mapped_column(Text)

    field_test: Mapped[FieldTest] = relationship(back_populates="checkins")


class LoginThrottleRow(Base):
    """Failed logins, shared by every worker and kept across restarts (db/throttle.py).

    ``scope`` ``client``: failures from one address (any account); ``account``: failures for one user name (any
    address); ``trusted``: a (user name, address) pair that logged in successfully, which the account-wide delay
    does not hold back - so a stranger hammering ``admin`` cannot keep the real admin out.
    """

    __tablename__ = "login_throttle"
    __table_args__ = (
        UniqueConstraint("scope", "key"),
        CheckConstraint(_in("scope", THROTTLE_SCOPES), name="scope"),
        Index(None, "last_at"),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scope: Mapped[str] = mapped_column(String(8))
    key: Mapped[str] = mapped_column(String(191))  # 191: utf8mb4 unique index limit of older InnoDB row formats
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_at: Mapped[datetime] = mapped_column(default=utcnow)


class AuditEntry(Base):
    """An administrative action (users, devices, tokens, deletes): who, from where, what, when."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "at"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(96))
    client: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(255))
    detail: Mapped[dict[str, Any] | None]


COUNTING_KINDS = ("line", "zone")


class CountingLine(Base):
    """A counting line (two points; first to second names its sides) or zone (a polygon) drawn on a site's map.

    The site is a task (every run of the task sees it) or, for a run without a task, the run itself: exactly one of
    ``task_id`` / ``run_id`` is set. ``public_id`` is the id the pages and exports name it by (kept from the JSON
    file the lines lived in before revision 0004); ``id`` orders a site's lines as they were drawn.
    """

    __tablename__ = "counting_lines"
    __table_args__ = (
        CheckConstraint(_in("kind", COUNTING_KINDS), name="kind"),
        CheckConstraint(
            "(task_id IS NOT NULL AND run_id IS NULL) OR (task_id IS NULL AND run_id IS NOT NULL)", name="one_site"
        ),
        MYSQL_TABLE,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    public_id: Mapped[str] = mapped_column(String(32), unique=True)
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("processing_runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(80))
    kind: Mapped[str] = mapped_column(String(8))
    geometry_geojson: Mapped[str] = mapped_column(Text)  # LineString (line) or Polygon with a closed ring (zone)
    created_by: Mapped[str | None] = mapped_column(String(96))  # the username then; kept if the account goes
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# The edge service's tables share this metadata (one Alembic history); imported last, as it subclasses Base.
from db import service_models  # noqa: E402,F401
