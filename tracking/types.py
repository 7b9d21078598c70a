"""Typed values produced by the motion layer: tracked vehicles, their speeds, per-frame results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from vision.types import Frame


def trusted_speed(flag: str | None, sigma_kmh: float | None) -> bool:
    """Speeds that count for a track's aggregates and for violations: unflagged ones, and size-prior ones
    (``low_confidence_scale``) that carry their sigma, which includes that scale's uncertainty. ``implausible_*``
    speeds never count."""
    return flag is None or (flag == "low_confidence_scale" and sigma_kmh is not None)


# speed_flag of a box not measured: a frame the tracker had lost the vehicle on, filled between the frames it was
# seen on (a recorded run: tracking/track_starts.py); such a box has a position but no speed
INTERPOLATED = "interpolated"

# a violation needs speed - VIOLATION_SIGMAS * sigma > limit: too fast with ~98 % confidence (one-sided 2 sigma)
VIOLATION_SIGMAS = 2.0


def violation_rule(min_over_limit_s: float) -> str:
    """The rule, in words, stored with the run (the run's ``violation_rule``) and shown with its violations."""
    return f"speed - {VIOLATION_SIGMAS:g} sigma > limit for at least {min_over_limit_s:g} s"


def lower_bound_kmh(speed_kmh: float, sigma_kmh: float | None) -> float:
    """The speed the vehicle was at least going (speed - 2 sigma); a speed without sigma counts as it is."""
    return speed_kmh - VIOLATION_SIGMAS * (sigma_kmh or 0.0)


class ScaleSource:
    """How the metres-per-pixel scale of a speed was obtained, best first."""

    TELEMETRY = "telemetry"
    CALIBRATION = "calibration"
    SIZE_PRIOR = "size_prior"


@dataclass
class TrackState:
    """One tracked vehicle in one frame."""

    track_id: int
    xyxy: np.ndarray  # box in the current frame, pixels
    score: float
    class_id: int
    moving: bool = True  # False for vehicles that are parked / standing still
    speed_kmh: float | None = None  # smoothed ground speed
    speed_sigma_kmh: float | None = None  # 1-sigma uncertainty of speed_kmh
    speed_flag: str | None = None  # e.g. "implausible_speed", "low_confidence_scale" (size-prior scale)
    ground_xy: tuple[float, float] | None = None  # metres in the run's ground frame
    lat: float | None = None
    lon: float | None = None
    # False: the box is the track's prediction (a frame the detector skipped, no motion blob on it) or the standing
    # hold's match of its last detector patch (tracking/standing_hold.py), not a box the detector or the motion layer
    # found this frame
    measured: bool = True

    @property
    def center(self) -> tuple[float, float]:
        x1, y1, x2, y2 = (float(v) for v in self.xyxy)
        return (x1 + x2) / 2.0, (y1 + y2) / 2.0


@dataclass
class FrameResult:
    """Everything the pipeline knows after one frame; what sinks receive."""

    frame: Frame
    tracks: list[TrackState]
    road_mask: np.ndarray | None = None  # uint8 0/255, frame size
    metres_per_pixel: float | None = None  # at the image centre
    scale_source: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    scale_detail: str | None = None  # the scale source in words (size prior: view, vehicles, segment, +- error)
    # tracks followed but not reported yet: motion-only ones younger than motion.min_motion_track_s. A recorded run
    # (and a live stream's stored run) reports them from this frame on once they are confirmed
    # (tracking/track_starts.py); the live feed never shows them here.
    withheld: list[TrackState] = field(default_factory=list)
    # confirmed tracks the tracker has lost on this frame (unmatched, kept to be found again): a recorded run fills
    # the frames of one found again within its hold-back (tracking/track_starts.py)
    lost_ids: frozenset[int] = frozenset()
    # this frame's pixels -> the run's first frame's (the drone's own motion chained), when the pipeline measures it:
    # a filled gap is interpolated there, so a drone that moved or shook in the gap does not bend the vehicle's path
    to_first: np.ndarray | None = None
    # recorded runs: colour histograms of some tracks' measured boxes this frame (track id -> histogram,
    # tracking/appearance.py), each track about once a second, for the whole-flight linking
    appearance: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class RunInfo:
    """What a run is: written at its start so every sink can describe itself."""

    source: str
    width: int
    height: int
    fps: float
    frame_count: int | None
    config: dict[str, Any]
    weights: str
    mode: str  # "dual_layer" or "baseline"
    device: str


class Sink(Protocol):
    """A consumer of pipeline output (files, database, live feed).

    ``open`` is called once before the first frame, ``write`` once per frame, then exactly one of
    ``close`` (the run completed; ``summary`` is the run summary) or ``abort`` (it failed; the sink must not leave
    anything that looks complete).
    """

    def open(self, info: RunInfo) -> None: ...

    def write(self, result: FrameResult) -> None: ...

    def close(self, summary: dict[str, Any]) -> None: ...

    def abort(self, error: BaseException | None) -> None: ...
