"""Request and response bodies of the HTTP API (what /docs shows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from db.validation import Serial


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# -- auth / admin -------------------------------------------------------------------------------------------
class LoginIn(_In):
    username: str = Field(max_length=64)
    password: str = Field(max_length=1024)


class TokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
    role: str
    expires_in: int


class PrincipalOut(BaseModel):
    kind: str
    id: int
    name: str
    role: str


class UserIn(_In):
    username: str
    password: str
    role: Literal["admin", "operator", "viewer"] = "viewer"


class DeviceIn(_In):
    serial: Serial
    kind: Literal["drone", "controller", "edge_node", "other"] = "drone"
    name: str | None = Field(None, max_length=128)
    model: str | None = Field(None, max_length=128)


class DeviceTokenOut(BaseModel):
    device_id: int
    serial: str
    token: str = Field(description="shown once; only its SHA-256 is stored")


# -- streams ------------------------------------------------------------------------------------------------
class StreamCalibrationIn(_In):
    """The scale of a stream's speeds: a constant ``metres_per_pixel`` (nadir view), or the lon/lat of the frame's
    four corners (top-left, top-right, bottom-right, bottom-left) in its first frame."""

    metres_per_pixel: float | None = Field(None, gt=0, le=100)
    corners_lonlat: list[tuple[float, float]] | None = Field(None, min_length=4, max_length=4)

    def config(self):
        from tracking.config import CalibrationConfig

        if (self.metres_per_pixel is None) == (self.corners_lonlat is None):
            raise ValueError("give either metres_per_pixel or corners_lonlat")
        if self.corners_lonlat is not None and not all(
            -180 <= lon <= 180 and -90 <= lat <= 90 for lon, lat in self.corners_lonlat
        ):
            raise ValueError("corners_lonlat: [lon, lat] pairs expected (longitude -180..180, latitude -90..90)")
        return CalibrationConfig(metres_per_pixel=self.metres_per_pixel, lonlat_points=self.corners_lonlat)


class StreamIn(_In):
    kind: Literal["pull", "push"] = "pull"
    url: str | None = Field(
        None,
        max_length=2048,
        description="pull: rtsp://, rtmp://, http(s)://, udp://, tcp://, "
        "srt:// URL, or a file under service.stream_file_root",
    )
    name: str | None = Field(None, max_length=128)
    device_serial: Serial | None = Field(None, description="the drone or ground station; a device caller is itself")
    speed_limit_kmh: float | None = Field(None, gt=0, le=300, description="live violations above this speed")
    task_round_id: int | None = None
    calibration: StreamCalibrationIn | None = Field(None, description="the stream's own scale (else the service's)")


class StreamOut(BaseModel):
    id: int
    name: str
    kind: str
    source: str | None
    device_id: int | None
    speed_limit_kmh: float | None
    calibration: str | None = Field(None, description="the stream's own calibration in words; null: the service's")
    state: str
    run_id: int | None
    received: int
    processed: int
    dropped: int
    queue: int
    fps: float
    errors: int
    reconnects: int
    lost: int = Field(0, description="pull: frames skipped because the data was damaged (until the next keyframe)")
    corruptions: int = Field(0, description="pull: damaged-data events, each followed by a resync at a keyframe")
    gaps: list[dict[str, float]] = Field([], description="source outages in this run (last 20): run time t, seconds")
    last_error: str | None
    db_error: str | None
    subscribers: int
    started_at: str
    process: dict[str, int | None] | None = Field(
        None,
        description="service.process_per_stream: the stream's process (pid) and how often it was restarted "
        "(restarts); null: the stream runs in the service process",
    )
    feed_url: str
    push_url: str | None
    preview_url: str


# -- uploads / jobs -----------------------------------------------------------------------------------------
class UploadIn(_In):
    kind: Literal["video", "flight_log"] = "video"
    filename: str = Field(min_length=1, max_length=1024)
    size: int = Field(gt=0, description="total bytes")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="checked on completion when given")


class UploadOut(BaseModel):
    id: str
    kind: str
    filename: str
    size: int
    offset: int
    status: str
    info: dict[str, Any] | None = None
    error: str | None = None
    upload_url: str


class JobParams(_In):
    speed_limit_kmh: float | None = Field(None, gt=0, le=300)
    baseline: bool = False
    task_round_id: int | None = None
    time_offset_s: float | None = Field(None, ge=-86400, le=86400, description="telemetry time = video time + offset")


class CompleteIn(JobParams):
    log_upload_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$", description="a completed flight-log upload")
    enqueue: bool = Field(True, description="a completed video becomes a queued batch job")


class JobIn(JobParams):
    video_upload_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    log_upload_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    status: str
    video_upload_id: str
    log_upload_id: str | None
    params: dict[str, Any] | None
    attempts: int
    max_attempts: int
    progress: float
    frames_done: int
    frame_count: int | None
    run_id: int | None
    error: str | None
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool


class CompleteOut(BaseModel):
    upload: UploadOut
    job: JobOut | None = None
