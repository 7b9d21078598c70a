"""The map page and its data: flights, drones, trajectories coloured by speed, violations; a vehicle's profile."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard import charts
from dashboard.auth import viewer
from dashboard.context import ctx, get_db, render
from dashboard.labels import flight_label, run_label
from dashboard.mapdata import map_layers
from dashboard.routes.common import map_filter, not_found, redirect
from db.models import Device, Flight, ProcessingRun, Task, TrackRow, TrackSpeed, Violation
from tracking.types import trusted_speed

router = APIRouter()
MAX_PROFILE_POINTS = 3000
PICKER_SIZE = 200  # newest runs / flights offered by name in the filter


@router.get("/")
def home(request: Request):
    return redirect(request, "/map")


@router.get("/map", name="map")
def map_page(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    f = map_filter(request)
    tasks = list(db.scalars(select(Task).order_by(Task.name)))
    devices = list(db.scalars(select(Device).order_by(Device.serial)))
    runs = list(
        db.scalars(
            select(ProcessingRun)
            .where(ProcessingRun.status == "complete")
            .order_by(ProcessingRun.id.desc())
            .limit(PICKER_SIZE)
        )
    )
    flights = list(db.scalars(select(Flight).order_by(Flight.start_time.desc(), Flight.id.desc()).limit(PICKER_SIZE)))
    # an older run or flight asked for by id still shows by name
    if f.run_id is not None and all(r.id != f.run_id for r in runs) and (run := db.get(ProcessingRun, f.run_id)):
        runs.insert(0, run)
    if f.flight_id is not None and all(x.id != f.flight_id for x in flights) and (fl := db.get(Flight, f.flight_id)):
        flights.insert(0, fl)
    from dashboard.routes.live import service_context

    return render(
        request,
        "map.html",
        user,
        filter=f,
        tasks=tasks,
        devices=devices,
        live_attached=service_context(request) is not None,
        run_choices=[(r.id, run_label(r)) for r in runs],
        flight_choices=[(x.id, flight_label(x)) for x in flights],
    )


@router.get("/basemap/{z}/{x}/{y}")
def basemap_tile(request: Request, z: int, x: int, y: int, user=Depends(viewer)):
    """A tile of the operator's offline base map (basemap_file); 404 outside its area."""
    basemap = ctx(request).basemap
    tile = basemap.tile(z, x, y) if basemap is not None else None
    if basemap is None or tile is None:
        raise not_found(f"base-map tile {z}/{x}/{y}")
    return Response(tile, media_type=basemap.media_type, headers={"Cache-Control": "private, max-age=86400"})


@router.get("/api/map")
def map_data(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    from dashboard.routes.counting import site_line_features

    c = ctx(request)
    layers = map_layers(db, map_filter(request), max_runs=c.settings.map_max_runs, live_stale_s=c.settings.live_stale_s)
    layers["counting_lines"] = site_line_features(db, [r["run_id"] for r in layers["runs"]])
    return layers


@router.get("/api/tracks/{track_id}/profile")
def track_profile(track_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """A vehicle's speed over time (plotly figure JSON) and its numbers."""
    track = db.get(TrackRow, track_id)
    if track is None:
        raise not_found(f"track {track_id}")
    rows = db.execute(
        select(TrackSpeed.t_s, TrackSpeed.speed_kmh, TrackSpeed.sigma_kmh, TrackSpeed.flag)
        .where(TrackSpeed.track_id == track_id)
        .order_by(TrackSpeed.frame)
    ).all()
    step = max(1, len(rows) // MAX_PROFILE_POINTS + (len(rows) % MAX_PROFILE_POINTS > 0))
    rows = rows[::step]
    limit = db.scalar(select(Violation.limit_kmh).where(Violation.track_id == track_id).limit(1))
    run = db.get(ProcessingRun, track.run_id)
    trusted = [trusted_speed(r.flag, r.sigma_kmh) for r in rows]  # size-prior speeds count, with their sigma
    figure = charts.speed_profile(
        [r.t_s for r in rows],
        [r.speed_kmh if ok else None for r, ok in zip(rows, trusted)],
        None,
        limit,
        sigmas=[r.sigma_kmh if ok else None for r, ok in zip(rows, trusted)],
    )
    return {
        "track_id": track.id,
        "track_no": track.track_no,
        "run_id": track.run_id,
        "class": track.class_name,
        "moving": track.moving,
        "median_speed_kmh": track.median_speed_kmh,
        "max_speed_kmh": track.max_speed_kmh,
        "first_t": track.first_t,
        "last_t": track.last_t,
        "limit_kmh": limit,
        "baseline": run.baseline if run else None,
        "median_sigma_kmh": track.median_sigma_kmh,
        # the track's own source (a run can switch, e.g. telemetry lost mid-flight), else the run's
        "scale_source": track.scale_source
        or (run.scale_source if run else None)
        or (((run.summary_json or {}).get("scale") or {}).get("source") if run else None),
        "figure": figure,
    }
