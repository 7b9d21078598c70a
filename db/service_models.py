"""The edge service's tables: registered streams, resumable uploads, the persistent batch-job queue.

Same ``Base`` (so the same Alembic history: ``airpatrol db upgrade`` creates them, migration 0002) and portability
rules as :mod:`db.models`. They refer to the other rows by id only (no foreign keys): a job outlives the upload
files it was made from, a stream the device row it named.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models import MYSQL_TABLE, Base, utcnow

JOB_STATUSES = ("queued", "running", "complete", "failed", "cancelled")
UPLOAD_STATUSES = ("receiving", "complete", "rejected", "discarded")  # discarded: file deleted, row kept (limits)
STREAM_KINDS = ("pull", "push", "publish")  # publish: an RTMP publisher via the relay


class StreamRow(Base):
    __tablename__ = "service_streams"
    __table_args__ = (MYSQL_TABLE,)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(8))  # pull | push | publish
    url: Mapped[str | None] = mapped_column(String(2048))  # may hold credentials: never shown unredacted
    device_id: Mapped[int | None] = mapped_column(Integer, index=True)
    speed_limit_kmh: Mapped[float | None] = mapped_column(Float)
    task_round_id: Mapped[int | None] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_by: Mapped[str] = mapped_column(String(96))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    stopped_at: Mapped[datetime | None]
    # the stream's own scale (CalibrationConfig fields; edge/service/stream_calibration.py), NULL: the service's
    calibration_json: Mapped[dict[str, Any] | None]


class UploadRow(Base):
    __tablename__ = "service_uploads"
    __table_args__ = (Index(None, "owner", "created_at"), MYSQL_TABLE)  # a user's uploads, newest first (limits)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # random hex: unguessable, never a path
    kind: Mapped[str] = mapped_column(String(16))  # video | flight_log
    filename: Mapped[str] = mapped_column(String(255))  # sanitised; display only
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="receiving")
    owner: Mapped[str] = mapped_column(String(96))
    device_id: Mapped[int | None] = mapped_column(Integer)
    info: Mapped[dict[str, Any] | None]  # what the content probe found
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    completed_at: Mapped[datetime | None]


class JobRow(Base):
    """One batch job. ``lease_owner``/``lease_expires_at`` make a claim exclusive and let a dead worker's job be retried."""

    __tablename__ = "service_jobs"
    __table_args__ = (Index(None, "status", "lease_expires_at"), MYSQL_TABLE)

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    video_upload_id: Mapped[str] = mapped_column(String(32), index=True)
    log_upload_id: Mapped[str | None] = mapped_column(String(32))
    params: Mapped[dict[str, Any] | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    lease_owner: Mapped[str | None] = mapped_column(String(96))
    lease_expires_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    frames_done: Mapped[int] = mapped_column(Integer, default=0)
    frame_count: Mapped[int | None] = mapped_column(Integer)
    run_id: Mapped[int | None] = mapped_column(Integer)  # processing_runs.id of the latest attempt
    out_dir: Mapped[str | None] = mapped_column(String(1024))
    error: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(96))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
