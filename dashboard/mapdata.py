"""Map layers as GeoJSON: flights' GPS tracks, drones' last positions, vehicle trajectories, violations.

Coordinates are [lon, lat] (GeoJSON order). Every layer is thinned on the server so a browser never gets more
points than a map can show: GPS tracks to at most ``max_points`` vertices, trajectories to one vertex per
``spacing_s`` seconds (a modulo on the frame number, so the database returns only those rows).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from dashboard.exports import run_output_dir
from dashboard.labels import flight_label, run_label, violation_time
from db.models import (
    Device,
    Flight,
    ProcessingRun,
    Task,
    TaskRound,
    TelemetrySampleRow,
    TrackRow,
    TrackSpeed,
    Video,
    Violation,
    as_naive_utc,
    utcnow,
)
from db.vehicles import counted, vehicle_counts
from vision.evidence import clip_path, snapshot_path
from vision.orthophoto import read_orthophoto


@dataclass
class MapFilter:
    start: datetime | None = None
    end: datetime | None = None
    task_id: int | None = None
    device_id: int | None = None
    run_id: int | None = None
    flight_id: int | None = None


def feature_collection(features: list[dict]) -> dict:
    return {"type": "FeatureCollection", "features": features}


def _thin(rows: list, max_points: int) -> list:
    if len(rows) <= max_points:
        return rows
    step = math.ceil(len(rows) / max_points)
    return rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])


# -- flights -------------------------------------------------------------------------------------------------------
def select_flights(db: Session, f: MapFilter, limit: int = 200) -> list[Flight]:
    q = select(Flight)
    if f.flight_id is not None:
        q = q.where(Flight.id == f.flight_id)
    if f.device_id is not None:
        q = q.where(Flight.device_id == f.device_id)
    if f.task_id is not None:
        q = q.join(TaskRound, TaskRound.id == Flight.task_round_id).where(TaskRound.task_id == f.task_id)
    if f.start is not None:
        q = q.where(
            or_(
                Flight.end_time >= as_naive_utc(f.start),
                and_(Flight.end_time.is_(None), Flight.start_time >= as_naive_utc(f.start)),
            )
        )
    if f.end is not None:
        q = q.where(Flight.start_time <= as_naive_utc(f.end))
    return list(db.scalars(q.order_by(Flight.start_time.desc(), Flight.id.desc()).limit(limit)))


def flight_samples(db: Session, flight_id: int, max_points: int | None = None) -> list[TelemetrySampleRow]:
    rows = list(
        db.scalars(
            select(TelemetrySampleRow).where(TelemetrySampleRow.flight_id == flight_id).order_by(TelemetrySampleRow.t_s)
        )
    )
    return _thin(rows, max_points) if max_points else rows


def flight_track_features(db: Session, flights: list[Flight], max_points: int = 400) -> list[dict]:
    features = []
    for fl in flights:
        rows = db.execute(
            select(TelemetrySampleRow.lon, TelemetrySampleRow.lat)
            .where(
                TelemetrySampleRow.flight_id == fl.id,
                TelemetrySampleRow.lat.is_not(None),
                TelemetrySampleRow.lon.is_not(None),
            )
            .order_by(TelemetrySampleRow.t_s)
        ).all()
        coords = [[round(lon, 7), round(lat, 7)] for lon, lat in _thin(list(rows), max_points)]
        if not coords:
            continue
        geom = (
            {"type": "LineString", "coordinates": coords}
            if len(coords) > 1
            else {"type": "Point", "coordinates": coords[0]}
        )
        features.append(
            {
                "type": "Feature",
                "geometry": geom,
                "properties": {
                    "flight_id": fl.id,
                    "device": fl.device.serial if fl.device else None,
                    "status": fl.status,
                    "start_time": fl.start_time.isoformat(sep=" ", timespec="seconds") if fl.start_time else None,
                    "clock": fl.clock,
                    "label": flight_label(fl),
                    "samples": fl.sample_count,
                },
            }
        )
    return features


# -- drones --------------------------------------------------------------------------------------------------------
def drone_states(db: Session, live_stale_s: float = 60.0, now: datetime | None = None) -> list[dict]:
    """Per device: last known position, battery and when it was last seen (from its newest flight's log)."""
    now = now or utcnow()
    out = []
    for dev in db.scalars(select(Device).order_by(Device.serial)):
        fl = db.scalar(
            select(Flight)
            .where(Flight.device_id == dev.id)
            .order_by(Flight.start_time.desc(), Flight.id.desc())
            .limit(1)
        )
        state = {
            "device_id": dev.id,
            "serial": dev.serial,
            "name": dev.name,
            "kind": dev.kind,
            "model": dev.model,
            "flight_id": fl.id if fl else None,
            "clock": fl.clock if fl else None,
            "last_seen": None,
            "lat": None,
            "lon": None,
            "rel_alt_m": None,
            "battery_pct": None,
            "live": False,
        }
        if fl is not None:
            last = db.scalar(
                select(TelemetrySampleRow)
                .where(TelemetrySampleRow.flight_id == fl.id, TelemetrySampleRow.lat.is_not(None))
                .order_by(TelemetrySampleRow.t_s.desc())
                .limit(1)
            )
            battery = db.scalar(
                select(TelemetrySampleRow.battery_pct)
                .where(TelemetrySampleRow.flight_id == fl.id, TelemetrySampleRow.battery_pct.is_not(None))
                .order_by(TelemetrySampleRow.t_s.desc())
                .limit(1)
            )
            seen = fl.end_time or fl.start_time
            if last is not None:
                state.update(lat=last.lat, lon=last.lon, rel_alt_m=last.rel_alt_m)
                seen = last.time_utc or (fl.start_time + timedelta(seconds=last.t_s) if fl.start_time else seen)
            state["battery_pct"] = battery
            if seen is not None:
                state["last_seen"] = seen.isoformat(sep=" ", timespec="seconds")
                state["live"] = fl.clock == "utc" and 0 <= (now - seen).total_seconds() <= live_stale_s
        out.append(state)
    return out


def drone_features(states: list[dict]) -> list[dict]:
    return [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [s["lon"], s["lat"]]},
            "properties": {k: v for k, v in s.items() if k not in ("lat", "lon")},
        }
        for s in states
        if s["lat"] is not None and s["lon"] is not None
    ]


# -- processed runs ------------------------------------------------------------------------------------------------
def _run_time():
    return func.coalesce(Flight.start_time, ProcessingRun.started_at, ProcessingRun.created_at)


def select_runs(db: Session, f: MapFilter, limit: int = 10, include_baseline: bool = False) -> list[ProcessingRun]:
    q = (
        select(ProcessingRun)
        .outerjoin(Flight, Flight.id == ProcessingRun.flight_id)
        .where(ProcessingRun.status == "complete")
    )
    if f.run_id is not None:
        q = q.where(ProcessingRun.id == f.run_id)
    elif not include_baseline:
        q = q.where(ProcessingRun.baseline.is_(False))
    if f.flight_id is not None:
        q = q.where(ProcessingRun.flight_id == f.flight_id)
    if f.device_id is not None:
        q = q.where(Flight.device_id == f.device_id)
    if f.task_id is not None:
        q = q.join(TaskRound, TaskRound.id == ProcessingRun.task_round_id).where(TaskRound.task_id == f.task_id)
    if f.start is not None:
        q = q.where(_run_time() >= as_naive_utc(f.start))
    if f.end is not None:
        q = q.where(_run_time() <= as_naive_utc(f.end))
    return list(db.scalars(q.order_by(ProcessingRun.id.desc()).limit(limit)))


def _frame_step(db: Session, run: ProcessingRun, spacing_s: float) -> int:
    fps = db.scalar(select(Video.fps).where(Video.id == run.video_id)) if run.video_id else None
    return max(1, round((fps or 25.0) * spacing_s))


def trajectory_features(db: Session, runs: list[ProcessingRun], spacing_s: float = 0.5) -> list[dict]:
    """One LineString per georeferenced track, with a speed per vertex (None where the speed is unknown/flagged)."""
    features = []
    for run in runs:
        step = _frame_step(db, run, spacing_s)
        tracks = {t.id: t for t in db.scalars(select(TrackRow).where(TrackRow.run_id == run.id, counted()))}
        if not tracks:
            continue
        rows = db.execute(
            select(
                TrackSpeed.track_id,
                TrackSpeed.t_s,
                TrackSpeed.lon,
                TrackSpeed.lat,
                TrackSpeed.speed_kmh,
                TrackSpeed.flag,
            )
            .join(TrackRow, TrackRow.id == TrackSpeed.track_id)
            .where(
                TrackRow.run_id == run.id,
                counted(),
                TrackSpeed.lat.is_not(None),
                TrackSpeed.lon.is_not(None),
                or_(
                    TrackSpeed.frame % step == 0,
                    TrackSpeed.frame == TrackRow.first_frame,
                    TrackSpeed.frame == TrackRow.last_frame,
                ),
            )
            .order_by(TrackSpeed.track_id, TrackSpeed.frame)
        ).all()
        by_track: dict[int, list] = {}
        for r in rows:
            by_track.setdefault(r.track_id, []).append(r)
        for tid, pts in by_track.items():
            if len(pts) < 2:
                continue
            t = tracks[tid]
            features.append(
                {
                    "type": "Feature",
                    "geometry": {
                        "type": "LineString",
                        "coordinates": [[round(p.lon, 7), round(p.lat, 7)] for p in pts],
                    },
                    "properties": {
                        "track_id": t.id,
                        "track_no": t.track_no,
                        "run_id": run.id,
                        "class": t.class_name,
                        "moving": t.moving,
                        "median_speed_kmh": t.median_speed_kmh,
                        "max_speed_kmh": t.max_speed_kmh,
                        "first_t": t.first_t,
                        "last_t": t.last_t,
                        "times": [round(p.t_s, 2) for p in pts],
                        "speeds_kmh": [None if p.speed_kmh is None or p.flag else round(p.speed_kmh, 1) for p in pts],
                    },
                }
            )
    return features


# -- violations ----------------------------------------------------------------------------------------------------
def select_violations(db: Session, f: MapFilter, run_ids: list[int] | None = None, limit: int = 2000) -> list:
    q = (
        select(Violation, TrackRow.track_no, TrackRow.class_name, Flight.clock, Flight.start_time)
        .join(ProcessingRun, ProcessingRun.id == Violation.run_id)
        .join(TrackRow, TrackRow.id == Violation.track_id)
        .outerjoin(Flight, Flight.id == ProcessingRun.flight_id)
        .where(ProcessingRun.status == "complete")
    )
    if run_ids is not None:
        q = q.where(Violation.run_id.in_(run_ids))
    if f.task_id is not None:
        q = q.where(Violation.task_id == f.task_id)
    if f.device_id is not None:
        q = q.where(Flight.device_id == f.device_id)
    if f.flight_id is not None:
        q = q.where(ProcessingRun.flight_id == f.flight_id)
    if f.start is not None:
        q = q.where(Violation.occurred_at >= as_naive_utc(f.start))
    if f.end is not None:
        q = q.where(Violation.occurred_at <= as_naive_utc(f.end))
    return list(db.execute(q.order_by(Violation.occurred_at.desc(), Violation.id.desc()).limit(limit)).all())


def violation_features(rows: list) -> list[dict]:
    out = []
    for v, track_no, class_name, clock, flight_start in rows:
        if v.lat is None or v.lon is None:
            continue
        out.append(
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [v.lon, v.lat]},
                "properties": {
                    "violation_id": v.id,
                    "run_id": v.run_id,
                    "track_id": v.track_id,
                    "track_no": track_no,
                    "class": class_name,
                    "speed_kmh": round(v.speed_kmh, 1),
                    "limit_kmh": v.limit_kmh,
                    "t_s": round(v.t_s, 2),
                    "when": violation_time(v.occurred_at, v.t_s, clock, flight_start),
                    "occurred_at": v.occurred_at.isoformat(timespec="seconds")
                    if v.occurred_at and flight_start
                    else None,
                    "time_is_estimate": v.time_is_estimate,
                },
            }
        )
    return out


def task_area_features(db: Session, task_id: int | None) -> list[dict]:
    tasks = (
        [db.get(Task, task_id)] if task_id is not None else list(db.scalars(select(Task).where(Task.active.is_(True))))
    )
    out = []
    for t in tasks:
        if t is None:
            continue
        for kind, text in (("area", t.area_geojson), ("road", t.road_geojson)):
            if text:
                out.append(
                    {
                        "type": "Feature",
                        "geometry": json.loads(text),
                        "properties": {
                            "task_id": t.id,
                            "name": t.name,
                            "kind": kind,
                            "speed_limit_kmh": t.speed_limit_kmh,
                        },
                    }
                )
    return out


def _walk_coords(geometry: dict):
    """Every [lon, lat] position of a GeoJSON geometry."""
    coords = geometry.get("coordinates")
    if geometry.get("type") == "GeometryCollection":
        for g in geometry.get("geometries", []):
            yield from _walk_coords(g)
        return

    def walk(c):
        if c and isinstance(c[0], (int, float)):
            yield c
        else:
            for part in c or []:
                yield from walk(part)

    yield from walk(coords)


def features_bounds(features: list[dict]) -> list[list[float]] | None:
    """[[south, west], [north, east]] (Leaflet order) around the features, None when they have no position."""
    lats, lons = [], []
    for feat in features:
        for lon, lat, *_ in _walk_coords(feat["geometry"]):
            lats.append(lat)
            lons.append(lon)
    if not lats:
        return None
    return [[min(lats), min(lons)], [max(lats), max(lons)]]


def map_view(f: MapFilter, layers: dict, runs: list[ProcessingRun], flights: list[Flight]) -> dict:
    """Where the map opens: the selection, not everything in the database.

    A run filter shows that run's vehicles (else its flight); a flight filter the flight and its runs; other filters
    everything they selected; no filter the newest run with positions (else the newest flight, else the drones).
    """
    traj, viol = layers["trajectories"]["features"], layers["violations"]["features"]
    fl, drones, tasks = layers["flights"]["features"], layers["drones"]["features"], layers["tasks"]["features"]

    def of_runs(ids):
        return [x for x in traj + viol if x["properties"]["run_id"] in ids]

    candidates: list[tuple[str, list[dict]]] = []
    if f.run_id is not None:
        candidates = [(f"run {f.run_id}", of_runs({f.run_id})), (f"the flight of run {f.run_id}", fl)]
    elif f.flight_id is not None:
        candidates = [(f"flight {f.flight_id}", fl + of_runs({r.id for r in runs}))]
    elif any(v is not None for v in (f.task_id, f.device_id, f.start, f.end)):
        candidates = [
            ("the selection", traj + viol + fl + (tasks if f.task_id is not None else [])),
            ("the selection", drones if f.device_id is not None else []),
        ]
    else:
        positioned = [r for r in runs if of_runs({r.id})]
        if positioned:
            candidates.append((f"the latest run ({run_label(positioned[0])})", of_runs({positioned[0].id})))
        if flights:
            candidates.append(("the latest flight", [x for x in fl if x["properties"]["flight_id"] == flights[0].id]))
        candidates += [("all flights", fl), ("the drones", drones), ("task areas", tasks)]
    for what, feats in candidates:
        bounds = features_bounds(feats)
        if bounds is not None:
            return {"bounds": bounds, "what": what}
    if f.run_id is not None:
        return {
            "bounds": None,
            "what": f"run {f.run_id}, which has no map positions (no telemetry or georeferenced calibration)",
        }
    return {"bounds": None, "what": "nothing with a map position"}


def run_imagery(db: Session, runs: list[ProcessingRun]) -> list[dict]:
    """Orthophotos of the runs (their video projected to the ground), as image overlays with lon/lat bounds."""
    out = []
    for r in runs:
        meta = read_orthophoto(run_output_dir(r, db))
        if meta is not None:
            out.append(
                {
                    "run_id": r.id,
                    "bounds": meta["bounds"],
                    "metres_per_pixel": meta.get("metres_per_pixel"),
                    "frames": len(meta.get("frames", [])),
                }
            )
    return out


def map_layers(db: Session, f: MapFilter, max_runs: int = 10, live_stale_s: float = 60.0) -> dict:
    runs = select_runs(db, f, limit=max_runs)
    if f.run_id is not None and f.flight_id is None:
        # a run's map shows that run's flight, not every flight in the database
        flight = db.get(Flight, runs[0].flight_id) if runs and runs[0].flight_id else None
        flights = [flight] if flight is not None else []
    else:
        flights = select_flights(db, f)
    drones = drone_states(db, live_stale_s)
    if f.device_id is not None:
        drones = [d for d in drones if d["device_id"] == f.device_id]
    counts = vehicle_counts(db, [r.id for r in runs])
    layers: dict[str, Any] = {
        "flights": feature_collection(flight_track_features(db, flights)),
        "drones": feature_collection(drone_features(drones)),
        "trajectories": feature_collection(trajectory_features(db, runs)),
        "violations": feature_collection(violation_features(select_violations(db, f, run_ids=[r.id for r in runs]))),
        "tasks": feature_collection(task_area_features(db, f.task_id)),
        "runs": [
            {
                "run_id": r.id,
                "flight_id": r.flight_id,
                "baseline": r.baseline,
                "label": run_label(r),
                "vehicles": counts.get(r.id, 0),
                "finished_at": r.finished_at.isoformat(timespec="seconds") if r.finished_at else None,
            }
            for r in runs
        ],
    }
    layers["imagery"] = run_imagery(db, runs)
    labels = {r["run_id"]: r["label"] for r in layers["runs"]}
    folders = {r.id: run_output_dir(r, db) for r in runs}
    for v in layers["violations"]["features"]:
        p = v["properties"]
        p["run_label"] = labels.get(p["run_id"])
        p["snapshot"] = snapshot_path(folders.get(p["run_id"]), p["track_no"]) is not None
        p["clip"] = clip_path(folders.get(p["run_id"]), p["track_no"]) is not None
    layers["view"] = map_view(f, layers, runs, flights)
    return layers
