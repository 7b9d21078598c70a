"""One telemetry sample stream for every flight-log format.

Every parser (DJI SRT/CSV, PX4 ULog, MAVLink tlog, ArduPilot BIN, GPX) produces a :class:`FlightLog` of
:class:`TelemetrySample` in SI units, so the rest of the system never sees feet, mph, 1e7-degrees or DJI's
``focal_len : 240`` convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from vision.types import CameraModel, CameraPose


class FlightLogError(ValueError):
    """A flight log that cannot be read at all (unknown format, empty, nothing valid in it)."""


@dataclass(slots=True)
class TelemetrySample:
    """The aircraft/camera state at one instant. Everything but ``t_s`` is optional: formats carry different fields.

    ``t_s`` is seconds from the start of the log (for a DJI SRT: the video time the subtitle is shown at).
    ``time_utc`` is timezone-aware UTC when the format gives real UTC; ``time_local`` is DJI's naive wall-clock time
    (the remote controller's local time zone, which the SRT does not state).
    Angles are degrees: ``heading_deg`` is the aircraft yaw from true north, clockwise; ``gimbal_pitch_deg`` is -90
    straight down; ``gimbal_yaw_deg`` is the gimbal yaw from true north when the log gives it.
    ``focal_len_mm`` is the 35 mm-equivalent focal length as DJI writes it (24.0 for a 24 mm lens).
    """

    t_s: float
    time_utc: datetime | None = None
    time_local: datetime | None = None
    lat: float | None = None
    lon: float | None = None
    rel_alt_m: float | None = None  # above take-off
    abs_alt_m: float | None = None  # above mean sea level / GPS altitude
    heading_deg: float | None = None
    gimbal_pitch_deg: float | None = None
    gimbal_yaw_deg: float | None = None
    gimbal_roll_deg: float | None = None
    ground_speed_ms: float | None = None
    vertical_speed_ms: float | None = None  # positive up
    battery_pct: float | None = None
    focal_len_mm: float | None = None
    iso: int | None = None
    shutter_s: float | None = None  # exposure time in seconds (1/250 s -> 0.004)
    fnum: float | None = None
    frame_cnt: int | None = None

    @property
    def has_position(self) -> bool:
        return self.lat is not None and self.lon is not None


@dataclass
class FlightLog:
    """A parsed flight log.

    ``complete`` is False when the file was damaged and only the valid part before the damage was read;
    ``stopped_at`` then says where and why (``"line 117: truncated entry (no position)"``).
    ``device`` holds what the log says about the aircraft (``model``, ``serial``, ``firmware``...), possibly empty.
    ``home`` is (lat, lon, abs_alt_m or None) of the take-off/home point when the log has one.
    """

    samples: list[TelemetrySample]
    path: Path
    format: str  # dji_srt, dji_csv, px4_ulog, mavlink_tlog, ardupilot_bin, gpx
    checksum: str  # sha256 of the file bytes, hex
    variant: str | None = None  # dialect within the format, e.g. "bracketed" / "legacy_home" for DJI SRT
    device: dict[str, str] = field(default_factory=dict)
    home: tuple[float, float, float | None] | None = None
    warnings: list[str] = field(default_factory=list)
    complete: bool = True
    stopped_at: str | None = None

    @property
    def duration_s(self) -> float:
        return self.samples[-1].t_s - self.samples[0].t_s if self.samples else 0.0

    @property
    def has_positions(self) -> bool:
        return any(s.has_position for s in self.samples)

    @property
    def start_time(self) -> datetime | None:
        """Wall-clock time of the first sample that has one (UTC if known, else DJI local time)."""
        for s in self.samples:
            if s.time_utc is not None or s.time_local is not None:
                return s.time_utc or s.time_local
        return None


def to_pose(sample: TelemetrySample, camera: CameraModel | None = None) -> CameraPose:
    """The camera pose of one sample.

    The camera's yaw is the gimbal yaw when the log has it (DJI gimbals yaw independently of the airframe), else the
    aircraft heading. ``CameraPose.focal_length_mm`` is the 35 mm-equivalent focal length as logged, which is what
    ``vision.camera.camera_for_pose`` expects when the pose has no camera model.
    """
    yaw = sample.gimbal_yaw_deg if sample.gimbal_yaw_deg is not None else sample.heading_deg
    return CameraPose(
        t=sample.t_s,
        altitude_m=sample.rel_alt_m,
        lat=sample.lat,
        lon=sample.lon,
        abs_altitude_m=sample.abs_alt_m,
        heading_deg=None if yaw is None else yaw % 360.0,
        gimbal_pitch_deg=sample.gimbal_pitch_deg,
        gimbal_roll_deg=sample.gimbal_roll_deg,
        focal_length_mm=sample.focal_len_mm,
        camera=camera,
    )
