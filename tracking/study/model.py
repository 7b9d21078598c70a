"""The study's data: trajectories in, approaches, per-vehicle movements, smoothed tracks, conflicts and tables out.

Units: metres (ground plane of the run: x east, y north where the run is georeferenced), seconds, degrees
(headings clockwise from north, as compasses and maps give them), km/h for speeds in tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class StudyInputError(ValueError):
    """Input the study cannot use (no ground coordinates, unreadable run folder, approaches outside the view):
    the message is one line that names the file and the problem."""


@dataclass
class Trajectory:
    """One tracked vehicle on the ground plane."""

    track_id: int
    vehicle_class: str
    t: np.ndarray  # seconds, (N,)
    xy: np.ndarray  # ground metres, (N, 2)
    lonlat: np.ndarray | None = None  # (N, 2), when the run is georeferenced


@dataclass
class Approach:
    """A leg of the junction: where vehicles come from and go to. ``(x, y)`` is a point on the leg near the edge of
    the view; ``heading_deg`` is the direction of travel *into* the junction along it (clockwise from north);
    ``radius_m`` is how far across the leg (both directions of travel) it reaches."""

    id: str
    name: str
    x: float
    y: float
    heading_deg: float
    radius_m: float
    lon: float | None = None
    lat: float | None = None

    @property
    def inbound(self) -> np.ndarray:
        """Unit vector of travel into the junction, ground (x east, y north)."""
        h = math.radians(self.heading_deg)
        return np.array([math.sin(h), math.cos(h)])


@dataclass
class CountingLine:
    """A ground segment (two points, metres) vehicles are counted across; used for section speeds and densities."""

    name: str
    a: tuple[float, float]
    b: tuple[float, float]


@dataclass
class StudyConfig:
    """Settings of a traffic study. Every field has a default; ``bin_s`` is shortened (with a warning in the study)
    when the flight is shorter than one bin."""

    bin_s: float = 900.0  # table time bins (15 min, the usual turning-movement count interval)
    ttc_s: float = 1.5  # a conflict: time to collision below this ...
    pet_s: float = 1.0  # ... or post-encroachment time below this
    min_bin_s: float = 10.0  # shortest bin used for short flights
    # position noise of the tracked ground positions (Kalman measurement noise; two vehicles closer than it is no
    # measured gap, tracking/study/conflicts.py)
    measurement_sigma_m: float = 0.5
    jerk_psd: float = 2.0  # spectral density of jerk (m^2/s^5): how quickly acceleration may change
    approach_cluster_m: float = 25.0  # track ends closer than this (and heading alike) belong to one approach
    approach_heading_deg: float = 50.0  # ... heading tolerance for the same approach
    min_approach_tracks: int = 2  # fewer boundary events than this: no approach (a stray track end)
    edge_margin_m: float = 12.0  # a track starting/ending this close to the edge of the observed area is at the edge
    stationary_speed_kmh: float = 5.0  # a vehicle whose 95th-percentile speed stays below this is stationary
    min_track_s: float = 1.0  # shorter tracks are ignored (counted in the warnings)
    turn_through_deg: float = 45.0  # |heading change| below this is through
    turn_uturn_deg: float = 135.0  # ... above this a U-turn; between the two left or right
    lane_gap_m: float = 1.6  # lateral offsets further apart than this start a new lane (lanes are ~3-3.75 m)
    vehicle_length_m: float = 4.5  # footprint used for conflicts when the class gives none
    vehicle_width_m: float = 1.8
    conflict_max_range_m: float = 60.0  # only pairs closer than this are checked for time to collision
    counting_lines: list[CountingLine] = field(default_factory=list)  # for section speed (pairs) and density
    segment_length_m: float = 50.0  # density: length of road segment per approach (lanes x length)

    def __post_init__(self) -> None:
        for name in ("bin_s", "ttc_s", "pet_s", "min_bin_s", "measurement_sigma_m", "jerk_psd"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise StudyInputError(f"study setting {name} = {value!r}: must be a positive number")


@dataclass
class SmoothedTrack:
    """Rauch-Tung-Striebel smoothed states of one trajectory."""

    track_id: int
    t: np.ndarray  # (N,)
    xy: np.ndarray  # (N, 2) m
    velocity: np.ndarray  # (N, 2) m/s
    accel: np.ndarray  # (N, 2) m/s^2

    @property
    def speed(self) -> np.ndarray:
        """Ground speed, m/s."""
        return np.hypot(self.velocity[:, 0], self.velocity[:, 1])

    @property
    def heading_deg(self) -> np.ndarray:
        """Direction of travel, clockwise from north."""
        return np.degrees(np.arctan2(self.velocity[:, 0], self.velocity[:, 1])) % 360.0

    @property
    def longitudinal_accel(self) -> np.ndarray:
        """Acceleration along the direction of travel (m/s^2; negative = braking)."""
        v = self.velocity
        s = np.maximum(self.speed, 1e-6)
        return (self.accel[:, 0] * v[:, 0] + self.accel[:, 1] * v[:, 1]) / s


MOVEMENTS = ("left", "through", "right", "u_turn")
# Vehicles without both ends on an approach are counted under these instead of a turning movement.
PARTIAL_MOVEMENTS = ("entered_mid_view", "left_mid_view", "mid_view_only", "stationary")


@dataclass
class VehicleMovement:
    """One vehicle of the study: where it came from and went, how, in which lane, when."""

    track_id: int
    vehicle_class: str
    origin: str | None  # approach id
    destination: str | None
    movement: str  # one of MOVEMENTS or PARTIAL_MOVEMENTS
    lane: int | None  # 1 = the lane nearest the centre of the road (leftmost in right-hand traffic) of its origin
    entry_t: float
    exit_t: float
    heading_change_deg: float  # signed, positive = clockwise (right turn)
    mean_speed_kmh: float
    present_at_start: bool = False  # already in view when the flight began
    present_at_end: bool = False  # still in view when it ended
    # an origin (destination) inferred from the vehicle's heading and lane at the flight's start (end), where one
    # approach alone lies behind (ahead of) it: it was already past its origin's corridor (not yet in its
    # destination's) when the flight began (ended); past the junction's centre at the start (before it at the end)
    # only where the flight's complete movements do not divide there (movements.INFER_MIN_SHARE); also an arm a
    # turn cut by the frame's edge comes from (goes on to)
    origin_inferred: bool = False
    destination_inferred: bool = False
    entry_xy: tuple[float, float] = (math.nan, math.nan)
    exit_xy: tuple[float, float] = (math.nan, math.nan)

    def as_row(self) -> dict[str, Any]:
        return {
            "track_id": self.track_id,
            "vehicle_class": self.vehicle_class,
            "origin": self.origin or "",
            "destination": self.destination or "",
            "movement": self.movement,
            "lane": "" if self.lane is None else self.lane,
            "entry_t": round(self.entry_t, 2),
            "exit_t": round(self.exit_t, 2),
            "heading_change_deg": round(self.heading_change_deg, 1),
            "mean_speed_kmh": round(self.mean_speed_kmh, 1),
            "present_at_start": int(self.present_at_start),
            "present_at_end": int(self.present_at_end),
            "origin_inferred": int(self.origin_inferred),
            "destination_inferred": int(self.destination_inferred),
            "entry_x_m": round(self.entry_xy[0], 2),
            "entry_y_m": round(self.entry_xy[1], 2),
            "exit_x_m": round(self.exit_xy[0], 2),
            "exit_y_m": round(self.exit_xy[1], 2),
        }


@dataclass
class Lane:
    """A lane of an approach (inbound), from clustering the lateral offsets of its vehicles."""

    approach: str
    lane: int  # 1 = nearest the road centre
    offset_m: float  # mean lateral offset from the approach axis (positive = right of the inbound direction)
    vehicles: int
    line: np.ndarray  # (2, 2) ground points along the lane, outer end first


@dataclass
class Conflict:
    """A near-miss between two vehicles: time to collision (``kind`` 'ttc') or post-encroachment time ('pet')."""

    kind: str
    value_s: float
    t: float  # when (TTC: at its minimum; PET: when the second vehicle reached the shared point)
    x: float
    y: float
    track_a: int
    track_b: int
    class_a: str
    class_b: str
    speed_a_kmh: float
    speed_b_kmh: float
    lon: float | None = None
    lat: float | None = None

    def as_row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "value_s": round(self.value_s, 3),
            "t": round(self.t, 2),
            "x_m": round(self.x, 2),
            "y_m": round(self.y, 2),
            "lon": "" if self.lon is None else round(self.lon, 7),
            "lat": "" if self.lat is None else round(self.lat, 7),
            "track_a": self.track_a,
            "track_b": self.track_b,
            "class_a": self.class_a,
            "class_b": self.class_b,
            "speed_a_kmh": round(self.speed_a_kmh, 1),
            "speed_b_kmh": round(self.speed_b_kmh, 1),
        }


@dataclass
class Study:
    """Everything a traffic study found in one flight."""

    approaches: list[Approach]
    vehicles: list[VehicleMovement]
    smoothed: dict[int, SmoothedTrack]
    tables: dict[str, list[dict[str, Any]]]
    conflicts: list[Conflict]
    warnings: list[str]
    lanes: list[Lane] = field(default_factory=list)
    config: StudyConfig = field(default_factory=StudyConfig)
    bin_s: float = 900.0  # the bin length used (may be shorter than config.bin_s for short flights)
    t0: float = 0.0
    t1: float = 0.0
    georef: np.ndarray | None = None  # (3, 2) affine ground xy -> lon/lat, fitted on the trajectories

    def to_lonlat(self, xy: np.ndarray) -> np.ndarray | None:
        """Ground metres -> lon/lat (None when the run has no georeference)."""
        if self.georef is None:
            return None
        xy = np.asarray(xy, np.float64).reshape(-1, 2)
        return np.column_stack([xy, np.ones(len(xy))]) @ self.georef
