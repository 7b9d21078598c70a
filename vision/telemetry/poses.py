"""Camera pose at any video time, interpolated from a flight log.

``log time = video time + time_offset_s``. Values are interpolated linearly between samples; angles (heading,
gimbal yaw/pitch/roll) and longitude are unwrapped first so 359 deg -> 1 deg passes through 0, not 180. Each field
is interpolated over the samples that have it; outside a field's own span (beyond the tolerance) it is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vision.telemetry.types import FlightLog, TelemetrySample
from vision.types import CameraModel, CameraPose

COVERAGE_TOLERANCE_S = 1.0

_LINEAR = ("lat", "rel_alt_m", "abs_alt_m", "focal_len_mm")
_CIRCULAR = ("lon", "heading_deg", "gimbal_yaw_deg", "gimbal_pitch_deg", "gimbal_roll_deg")


class TelemetryCoverageError(ValueError):
    """The flight log does not cover (part of) the video."""


@dataclass
class _Series:
    t: np.ndarray
    v: np.ndarray


@dataclass
class PoseTrack:
    t: np.ndarray  # log times of the samples, sorted
    series: dict[str, _Series]
    camera: CameraModel | None = None
    time_offset_s: float = 0.0
    source: str = ""
    tolerance_s: float = COVERAGE_TOLERANCE_S

    @classmethod
    def from_flight_log(
        cls,
        log: FlightLog,
        camera: CameraModel | None = None,
        time_offset_s: float = 0.0,
        tolerance_s: float = COVERAGE_TOLERANCE_S,
    ) -> "PoseTrack":
        return cls.from_samples(log.samples, camera, time_offset_s, str(log.path), tolerance_s)

    @classmethod
    def from_samples(
        cls,
        samples: list[TelemetrySample],
        camera: CameraModel | None = None,
        time_offset_s: float = 0.0,
        source: str = "",
        tolerance_s: float = COVERAGE_TOLERANCE_S,
    ) -> "PoseTrack":
        if not samples:
            raise TelemetryCoverageError(f"{source or 'flight log'}: no telemetry samples")
        ordered = sorted(samples, key=lambda s: s.t_s)
        t_all = np.array([s.t_s for s in ordered], float)
        series = {}
        for name in _LINEAR + _CIRCULAR:
            pairs = [(s.t_s, getattr(s, name)) for s in ordered if getattr(s, name) is not None]
            if not pairs:
                continue
            t, v = (np.array(x, float) for x in zip(*pairs))
            t, keep = np.unique(t, return_index=True)  # np.interp needs strictly increasing times
            v = v[keep]
            if name in _CIRCULAR:
                v = np.unwrap(v, period=360.0)
            series[name] = _Series(t, v)
        return cls(
            t=t_all, series=series, camera=camera, time_offset_s=time_offset_s, source=source, tolerance_s=tolerance_s
        )

    @property
    def start_s(self) -> float:
        """First video time with telemetry (may be negative: telemetry started before the video)."""
        return float(self.t[0]) - self.time_offset_s

    @property
    def end_s(self) -> float:
        return float(self.t[-1]) - self.time_offset_s

    @property
    def duration_s(self) -> float:
        """Time spanned by the samples."""
        return float(self.t[-1] - self.t[0])

    def covers(self, duration_s: float) -> bool:
        """True if telemetry spans video times [0, duration_s] within the tolerance."""
        return self.start_s <= self.tolerance_s and self.end_s >= duration_s - self.tolerance_s

    def require_covers(self, duration_s: float) -> None:
        if not self.covers(duration_s):
            raise TelemetryCoverageError(
                f"{self.source or 'flight log'}: telemetry covers video time {self.start_s:.1f}..{self.end_s:.1f} s "
                f"but the video runs 0..{duration_s:.1f} s (time offset {self.time_offset_s:+.1f} s); "
                "check the log belongs to this video or set the time offset"
            )

    def _value(self, name: str, t: float) -> float | None:
        s = self.series.get(name)
        if s is None or t < s.t[0] - self.tolerance_s or t > s.t[-1] + self.tolerance_s:
            return None
        return float(np.interp(t, s.t, s.v))

    def pose_at(self, t_video_s: float) -> CameraPose:
        t = t_video_s + self.time_offset_s
        if t < self.t[0] - self.tolerance_s or t > self.t[-1] + self.tolerance_s:
            raise TelemetryCoverageError(
                f"{self.source or 'flight log'}: no telemetry at video time {t_video_s:.2f} s "
                f"(telemetry covers {self.start_s:.1f}..{self.end_s:.1f} s)"
            )
        v = {name: self._value(name, t) for name in _LINEAR + _CIRCULAR}
        for name in ("lon", "gimbal_yaw_deg", "gimbal_pitch_deg", "gimbal_roll_deg"):
            value = v[name]
            if value is not None:
                v[name] = (value + 180.0) % 360.0 - 180.0
        yaw = v["gimbal_yaw_deg"] if v["gimbal_yaw_deg"] is not None else v["heading_deg"]
        return CameraPose(
            t=t_video_s,
            altitude_m=v["rel_alt_m"],
            lat=v["lat"],
            lon=v["lon"],
            abs_altitude_m=v["abs_alt_m"],
            heading_deg=None if yaw is None else yaw % 360.0,
            gimbal_pitch_deg=v["gimbal_pitch_deg"],
            gimbal_roll_deg=v["gimbal_roll_deg"],
            focal_length_mm=v["focal_len_mm"],  # 35 mm-equivalent, as logged
            camera=self.camera,
        )


def find_sidecar_srt(video_path: str | Path) -> Path | None:
    """The DJI ``.SRT``/``.srt`` written next to a video (same stem), if any."""
    video = Path(video_path)
    exact = [video.with_suffix(ext) for ext in (".SRT", ".srt")]
    for candidate in exact:
        if candidate.is_file():
            return candidate
    if video.parent.is_dir():  # other cases (.Srt) on case-sensitive file systems
        for candidate in sorted(video.parent.iterdir()):
            if candidate.stem == video.stem and candidate.suffix.lower() == ".srt" and candidate.is_file():
                return candidate
    return None
