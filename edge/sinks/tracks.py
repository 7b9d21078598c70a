"""Per-track accumulation with bounded memory: a track is handed on as soon as it has ended.

Only tracks still active are held, so memory does not grow with the length of the video.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tracking.types import FrameResult


@dataclass
class TrackPoint:
    frame: int
    t: float
    x: float
    y: float
    speed_kmh: float | None
    lon: float | None
    lat: float | None
    ground_xy: tuple[float, float] | None
    moving: bool
    sigma_kmh: float | None = None
    scale_source: str | None = None


@dataclass
class TrackRecord:
    track_id: int
    points: list[TrackPoint] = field(default_factory=list)
    classes: Counter = field(default_factory=Counter)

    @property
    def class_id(self) -> int:
        return self.classes.most_common(1)[0][0]

    @property
    def speeds(self) -> list[float]:
        return [p.speed_kmh for p in self.points if p.speed_kmh is not None]


class TrackAccumulator:
    def __init__(self, on_track_end: Callable[[TrackRecord], None], gap_frames: int = 60):
        self.on_track_end = on_track_end
        self.gap = gap_frames
        self.active: dict[int, TrackRecord] = {}

    def add(self, result: FrameResult) -> None:
        f = result.frame
        for tr in result.tracks:
            rec = self.active.setdefault(tr.track_id, TrackRecord(tr.track_id))
            cx, cy = tr.center
            rec.points.append(
                TrackPoint(
                    f.index,
                    f.t,
                    cx,
                    cy,
                    tr.speed_kmh,
                    tr.lon,
                    tr.lat,
                    tr.ground_xy,
                    tr.moving,
                    tr.speed_sigma_kmh,
                    result.scale_source,
                )
            )
            rec.classes[tr.class_id] += 1
        for tid in [k for k, r in self.active.items() if f.index - r.points[-1].frame > self.gap]:
            self.on_track_end(self.active.pop(tid))

    def flush(self) -> None:
        for tid in sorted(self.active):
            self.on_track_end(self.active.pop(tid))
