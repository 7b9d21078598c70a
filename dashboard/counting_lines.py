"""Counts at the counting lines and zones drawn on the map: vehicles per direction and class per time bin, with
their mean speed and violations.

The crossing logic is Roboflow ``supervision``'s (``LineZone``, ``PolygonZone``), fed with the run's stored
ground-plane trajectories: every counted vehicle's (:mod:`db.vehicles`) per-frame map position from
``track_speeds``, projected to local metres (east, north) around the site, one ``Detections`` per video frame with
the vehicle as a point. So a line counts the same on the map as the pipeline placed the vehicles, whatever the
camera did.

* **Line** (two points, A to B): a vehicle is counted when it crosses the segment (supervision's side test, within
  the segment's ends); its direction is the compass heading of the side it crossed to (drawn west to east, a
  vehicle crossing it northward is *northbound*). Its speed is the measured speed at the crossing frame (the
  nearest trusted one of its track), its time bin that of the crossing (video time).
* **Zone** (a polygon): a vehicle is counted once, when it is first inside; its direction is its direction of
  travel over the whole track (:func:`dashboard.counts.direction`), its speed the mean of its trusted speeds
  while inside, its time bin that of its entry.
* **Violations**: counted vehicles at that line or zone that have a violation in the run.

Runs without map positions (no telemetry, no georeferenced calibration) have nothing to count on a map: the result
says so.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard.counts import DIRECTIONS, bin_seconds, direction
from db.models import ProcessingRun, TrackRow, TrackSpeed, Violation
from db.vehicles import counted
from tracking.types import trusted_speed

EARTH_R = 6_371_000.0
COLUMNS = ["line", "kind", "direction", "class", "vehicles", "mean_speed_kmh", "violations"]


@dataclass
class Sample:
    frame: int
    t: float
    east: float
    north: float
    speed: float | None  # trusted speed, or None


@dataclass
class Vehicle:
    track_id: int
    track_no: int
    class_name: str
    violator: bool
    heading: str  # direction of travel over the whole track
    samples: list[Sample] = field(default_factory=list)


class LocalFrame:
    """Local tangent plane (east, north metres) around a reference lon/lat: fine for a site a few km across."""

    def __init__(self, lon0: float, lat0: float):
        self.lon0, self.lat0 = lon0, lat0
        self.kx = math.radians(1) * EARTH_R * math.cos(math.radians(lat0))
        self.ky = math.radians(1) * EARTH_R

    def to_local(self, lon: float, lat: float) -> tuple[float, float]:
        return (lon - self.lon0) * self.kx, (lat - self.lat0) * self.ky


def compass(east: float, north: float) -> str:
    return DIRECTIONS[int(((math.degrees(math.atan2(east, north)) % 360 + 45) % 360) // 90)]


def load_vehicles(db: Session, run: ProcessingRun, frame: LocalFrame) -> list[Vehicle]:
    tracks = {t.id: t for t in db.scalars(select(TrackRow).where(TrackRow.run_id == run.id, counted()))}
    violators = set(db.scalars(select(Violation.track_id).where(Violation.run_id == run.id)))
    vehicles = {
        tid: Vehicle(tid, t.track_no, t.class_name, tid in violators, direction(t.path_geojson, t.moving))
        for tid, t in tracks.items()
    }
    if not vehicles:
        return []
    rows = db.execute(
        select(
            TrackSpeed.track_id,
            TrackSpeed.frame,
            TrackSpeed.t_s,
            TrackSpeed.lon,
            TrackSpeed.lat,
            TrackSpeed.speed_kmh,
            TrackSpeed.sigma_kmh,
            TrackSpeed.flag,
        )
        .join(TrackRow, TrackRow.id == TrackSpeed.track_id)
        .where(TrackRow.run_id == run.id, TrackSpeed.lat.is_not(None), TrackSpeed.lon.is_not(None))
        .order_by(TrackSpeed.frame)
    )
    for tid, fr, t, lon, lat, speed, sigma, flag in rows:
        v = vehicles.get(tid)
        if v is not None:
            assert lon is not None and lat is not None  # the query keeps located samples only
            e, n = frame.to_local(lon, lat)
            v.samples.append(Sample(fr, t, e, n, speed if speed is not None and trusted_speed(flag, sigma) else None))
    return [v for v in vehicles.values() if v.samples]


def _frames(vehicles: list[Vehicle]):
    """(frame, [(vehicle index, sample)]) in frame order: what a camera-side counter would see frame by frame."""
    by_frame: dict[int, list[tuple[int, Sample]]] = defaultdict(list)
    for i, v in enumerate(vehicles):
        for s in v.samples:
            by_frame[s.frame].append((i, s))
    return sorted(by_frame.items())


def _detections(items, xy):
    import supervision as sv

    pts = np.array([xy(s) for _, s in items], dtype=float)
    return sv.Detections(
        xyxy=np.hstack([pts, pts]), tracker_id=np.array([i for i, _ in items]), class_id=np.zeros(len(items), int)
    )


def _speed_near(v: Vehicle, frame: int) -> float | None:
    known = [s for s in v.samples if s.speed is not None]
    return min(known, key=lambda s: abs(s.frame - frame)).speed if known else None


def line_events(vehicles: list[Vehicle], a: tuple[float, float], b: tuple[float, float]) -> list[dict]:
    """Crossings of the segment a -> b (local metres): one event per crossing."""
    import supervision as sv

    zone = sv.LineZone(sv.Point(*a), sv.Point(*b), triggering_anchors=[sv.Position.CENTER])
    # supervision's "in" is crossing to the right of a -> b in (x, y) = (east, north): the normal (dy, -dx)
    dx, dy = b[0] - a[0], b[1] - a[1]
    names = {True: compass(dy, -dx), False: compass(-dy, dx)}
    events = []
    for fr, items in _frames(vehicles):
        crossed_in, crossed_out = zone.trigger(_detections(items, lambda s: (s.east, s.north)))
        for (i, s), cin, cout in zip(items, crossed_in, crossed_out):
            if cin or cout:
                v = vehicles[i]
                events.append(
                    {
                        "track_id": v.track_id,
                        "track_no": v.track_no,
                        "class": v.class_name,
                        "t": s.t,
                        "direction": names[bool(cin)],
                        "speed_kmh": _speed_near(v, fr),
                        "violator": v.violator,
                    }
                )
    return events


def zone_events(vehicles: list[Vehicle], polygon: list[tuple[float, float]]) -> list[dict]:
    """Vehicles found inside the polygon (local metres): one event per vehicle, at its first frame inside."""
    import supervision as sv

    poly = np.array(polygon, float)
    lo = poly.min(axis=0) - 1.0
    extent = float((poly.max(axis=0) - lo).max())
    unit = max(0.1, extent / 4000.0)  # metres per mask cell: 10 cm, coarser for zones over 400 m across
    zone = sv.PolygonZone(np.round((poly - lo) / unit).astype(np.int64), triggering_anchors=[sv.Position.CENTER])
    inside: dict[int, list[Sample]] = defaultdict(list)
    for _fr, items in _frames(vehicles):
        mask = zone.trigger(_detections(items, lambda s: ((s.east - lo[0]) / unit, (s.north - lo[1]) / unit)))
        for (i, s), hit in zip(items, mask):
            if hit:
                inside[i].append(s)
    events = []
    for i, samples in inside.items():
        v = vehicles[i]
        speeds = [s.speed for s in samples if s.speed is not None]
        events.append(
            {
                "track_id": v.track_id,
                "track_no": v.track_no,
                "class": v.class_name,
                "t": samples[0].t,
                "direction": v.heading,
                "speed_kmh": sum(speeds) / len(speeds) if speeds else None,
                "violator": v.violator,
            }
        )
    return sorted(events, key=lambda e: e["t"])


def summarise(events: list[dict], step: float, n_bins: int) -> dict:
    table: dict[tuple[str, str], dict] = defaultdict(lambda: {"vehicles": 0, "speeds": [], "violations": 0})
    bins: dict[str, Counter] = defaultdict(Counter)
    for e in events:
        row = table[(e["direction"], e["class"])]
        row["vehicles"] += 1
        if e["speed_kmh"] is not None:
            row["speeds"].append(e["speed_kmh"])
        row["violations"] += bool(e["violator"])
        bins[e["direction"]][min(int(e["t"] // step), n_bins - 1)] += 1
    rows = [
        {
            "direction": d,
            "class": c,
            "vehicles": r["vehicles"],
            "mean_speed_kmh": round(sum(r["speeds"]) / len(r["speeds"]), 1) if r["speeds"] else None,
            "violations": r["violations"],
        }
        for (d, c), r in sorted(table.items())
    ]
    return {
        "rows": rows,
        "total": len(events),
        "series": {d: [bins[d].get(i, 0) for i in range(n_bins)] for d in sorted(bins)},
    }


def count_at_lines(db: Session, run: ProcessingRun, lines: list[dict]) -> dict:
    """Counts of the run at each of the site's lines and zones (``counting_store`` entries)."""
    duration = (
        db.scalar(select(TrackRow.last_t).where(TrackRow.run_id == run.id).order_by(TrackRow.last_t.desc()).limit(1))
        or 0.0
    )
    step = bin_seconds(duration)
    n_bins = int(duration // step) + 1
    # does the run have map positions at all (else a line on the map can count nothing, and the page says why)
    placed = db.scalar(
        select(TrackRow.id).where(TrackRow.run_id == run.id, TrackRow.path_geojson.is_not(None)).limit(1)
    )
    out: dict[str, Any] = {"bin_s": step, "bins": n_bins, "lines": [], "positions": placed is not None}
    if not lines:
        return out
    lon0, lat0 = lines[0]["coordinates"][0]
    frame = LocalFrame(lon0, lat0)
    vehicles = load_vehicles(db, run, frame)
    for line in lines:
        pts = [frame.to_local(lon, lat) for lon, lat in line["coordinates"]]
        events = (
            (line_events(vehicles, pts[0], pts[1]) if line["kind"] == "line" else zone_events(vehicles, pts))
            if vehicles
            else []
        )
        out["lines"].append({**line, **summarise(events, step, n_bins), "events": events})
    return out


def lines_figure(result: dict, line: dict) -> dict:
    import json

    import plotly.graph_objects as go

    step = result["bin_s"]
    x = [i * step for i in range(result["bins"])]
    fig = go.Figure([go.Bar(x=x, y=ys, name=d, offset=0, width=step * 0.9) for d, ys in line["series"].items()])
    what = "crossing" if line["kind"] == "line" else "entering"
    fig.update_layout(
        barmode="stack",
        title=f"{line['name']}: vehicles {what} per {step:g} s",
        xaxis_title="video time (s)",
        yaxis_title="vehicles",
        template="plotly_white",
        height=260,
        margin=dict(l=50, r=15, t=35, b=40),
        legend=dict(orientation="h", y=-0.3),
    )
    return json.loads(fig.to_json())


def lines_csv_lines(result: dict):
    from dashboard.exports import _csv_line

    yield _csv_line(COLUMNS)
    for line in result["lines"]:
        for r in line["rows"]:
            yield _csv_line([line["name"], line["kind"], *(r[c] for c in COLUMNS[2:])])
    yield _csv_line([])
    yield _csv_line(["line", "kind", "direction", *(f"{i * result['bin_s']:g}s" for i in range(result["bins"]))])
    for line in result["lines"]:
        for d, ys in line["series"].items():
            yield _csv_line([line["name"], line["kind"], d, *ys])
    yield _csv_line([])
    yield _csv_line(["line", "kind", "vehicle", "class", "t_s", "direction", "speed_kmh", "violation"])
    for line in result["lines"]:
        for e in line["events"]:
            yield _csv_line(
                [
                    line["name"],
                    line["kind"],
                    e["track_no"],
                    e["class"],
                    round(e["t"], 2),
                    e["direction"],
                    None if e["speed_kmh"] is None else round(e["speed_kmh"], 1),
                    int(bool(e["violator"])),
                ]
            )
