"""Processing runs: list with live status and progress, per-run summary, side-by-side with the baseline, exports."""

from __future__ import annotations

import statistics

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, PlainTextResponse, Response, StreamingResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dashboard import charts, counts, exports
from dashboard.auth import operator, verify_csrf, viewer
from dashboard.context import flash, get_db, render
from dashboard.labels import flight_label, run_label, violation_time
from dashboard.routes.common import BadQuery, not_found, opt_int, redirect
from db.models import RUN_STATUSES, Flight, ProcessingRun, Task, TaskRound, TrackRow, Video, Violation
from db.vehicles import MIN_VEHICLE_S, counted, vehicle_counts
from vision import evidence
from vision.orthophoto import ORTHO_PNG, read_orthophoto

router = APIRouter()
PAGE_SIZE = 50
MAX_VEHICLE_ROWS = 2000  # the vehicle table is sorted and searched in the browser


def run_row(run: ProcessingRun, vehicles: int | None = None) -> dict:
    """A run for the lists; ``vehicles``: its counted vehicles (:mod:`db.vehicles`), None while not complete."""
    s = run.summary_json or {}
    return {
        "run_id": run.id,
        "status": run.status,
        "progress": round(run.progress or 0.0, 4),
        "frames_done": run.frames_done,
        "frame_count": run.frame_count,
        "baseline": run.baseline,
        "flight_id": run.flight_id,
        "video_id": run.video_id,
        "error": run.error,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "tracks": vehicles if run.status == "complete" else None,
        "violations": s.get("violations"),
        "label": run_label(run),
        "completeness": run.completeness or "complete",
        "losses": run.losses_json or [],
    }


def loss_text(loss: dict) -> str:
    """One lost stretch of a damaged input, for the run page ("video frames 123-177 (4.9-7.0 s): reason")."""
    t = loss.get("t_s") or [None, None]
    span = f"{t[0]:.1f}-{t[1]:.1f} s" if None not in t else "?"
    frames = loss.get("frames")
    where = f"frames {frames[0]}-{frames[1]} ({span})" if frames else span
    return f"{loss.get('input', 'input')} {where}: {loss.get('reason', 'lost')}"


def run_rows(db: Session, runs: list[ProcessingRun]) -> list[dict]:
    counts = vehicle_counts(db, [r.id for r in runs])
    flight_ids = {r.flight_id for r in runs if r.flight_id}
    flights = (
        {f.id: flight_label(f) for f in db.scalars(select(Flight).where(Flight.id.in_(flight_ids)))}
        if flight_ids
        else {}
    )
    return [
        {**run_row(r, counts.get(r.id, 0)), "flight": flights.get(r.flight_id) if r.flight_id else None} for r in runs
    ]


def _runs_query(request: Request):
    q = request.query_params
    status = q.get("status") or None
    if status is not None and status not in RUN_STATUSES:
        raise HTTPException(400, f"status: expected one of {', '.join(RUN_STATUSES)}")
    query = select(ProcessingRun)
    if status:
        query = query.where(ProcessingRun.status == status)
    try:
        flight_id = opt_int(q.get("flight_id"), "flight_id")
    except BadQuery as exc:
        raise HTTPException(400, str(exc)) from None
    if flight_id is not None:
        query = query.where(ProcessingRun.flight_id == flight_id)
    return query.order_by(ProcessingRun.id.desc()), status


def service_jobs(request: Request, db: Session) -> list | None:
    """The edge service's batch jobs (its own table), newest first; None when no service is attached."""
    svc = getattr(request.app.state, "ctx", None)
    if svc is None or not hasattr(svc, "jobs"):
        return None
    from db.service_models import JobRow

    return list(db.scalars(select(JobRow).order_by(JobRow.id.desc()).limit(PAGE_SIZE)))


@router.get("/runs", name="runs")
def run_list(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    query, status = _runs_query(request)
    runs = list(db.scalars(query.limit(PAGE_SIZE)))
    return render(
        request,
        "runs.html",
        user,
        runs=run_rows(db, runs),
        status=status or "",
        statuses=RUN_STATUSES,
        jobs=service_jobs(request, db),
    )


@router.get("/api/runs")
def run_list_api(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    query, _ = _runs_query(request)
    return {"runs": run_rows(db, list(db.scalars(query.limit(PAGE_SIZE))))}


def run_stats(db: Session, run: ProcessingRun) -> dict:
    tracks = list(db.scalars(select(TrackRow).where(TrackRow.run_id == run.id, counted())))
    moving = [t.median_speed_kmh for t in tracks if t.moving and t.median_speed_kmh is not None]
    s = run.summary_json or {}
    timings = s.get("timings") or run.timings_json or {}
    n_viol = db.scalar(select(func.count()).select_from(Violation).where(Violation.run_id == run.id)) or 0
    n_all = db.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run.id)) or 0
    return {
        "tracks": len(tracks),
        "fragments": n_all - len(tracks),
        "min_vehicle_s": MIN_VEHICLE_S,
        "moving": sum(t.moving for t in tracks),
        "stationary": sum(not t.moving for t in tracks),
        "frames": run.frames_done,
        "median_speed_kmh": round(statistics.median(moving), 1) if moving else None,
        "max_speed_kmh": round(max(moving), 1) if moving else None,
        "violations": n_viol,
        "fps": timings.get("fps"),
        "ms_per_frame": timings.get("ms_per_frame"),
        "mode": s.get("mode") or ("baseline" if run.baseline else "dual_layer"),
        "device": run.device,
        "weights": run.weights,
        "moving_speeds": moving,
        "scale": s.get("scale") or {},
        "violation_rule": s.get("violation_rule"),
    }


def counterpart(db: Session, run: ProcessingRun) -> ProcessingRun | None:
    """The complete run of the same video in the other mode (baseline <-> AirPatrol)."""
    if run.video_id is None:
        return None
    return db.scalar(
        select(ProcessingRun)
        .where(
            ProcessingRun.video_id == run.video_id,
            ProcessingRun.baseline == (not run.baseline),
            ProcessingRun.status == "complete",
        )
        .order_by(ProcessingRun.id.desc())
        .limit(1)
    )


def _get_run(db: Session, run_id: int) -> ProcessingRun:
    run = db.get(ProcessingRun, run_id)
    if run is None:
        raise not_found(f"run {run_id}")
    return run


@router.get("/runs/{run_id}", name="run")
def run_detail(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    run = _get_run(db, run_id)
    stats = run_stats(db, run)
    flight = db.get(Flight, run.flight_id) if run.flight_id else None
    out_dir = exports.run_output_dir(run, db)
    # each violation stores its evidence: speed, sigma, speed - 2 sigma, time over the limit, rule, scale source
    violations = [
        (
            v,
            no,
            cls,
            violation_time(
                v.occurred_at, v.t_s, flight.clock if flight else None, flight.start_time if flight else None
            ),
            evidence.snapshot_path(out_dir, no) is not None,
            v.sigma_kmh,
            evidence.clip_path(out_dir, no) is not None,
        )
        for v, no, cls in db.execute(
            select(Violation, TrackRow.track_no, TrackRow.class_name)
            .join(TrackRow, TrackRow.id == Violation.track_id)
            .where(Violation.run_id == run_id)
            .order_by(Violation.speed_kmh.desc())
        )
    ]
    tracks = list(
        db.scalars(
            select(TrackRow)
            .where(TrackRow.run_id == run_id, counted())
            .order_by(TrackRow.max_speed_kmh.desc())
            .limit(MAX_VEHICLE_ROWS)
        )
    )
    video = db.get(Video, run.video_id) if run.video_id else None
    has_video = bool(out_dir and (out_dir / "annotated.mp4").is_file())
    limit = run_speed_limit(db, run, [v for v, *_ in violations])
    traffic = counts.run_counts(db, run)
    histogram = (
        charts.speed_histogram([(stats["mode"], stats["moving_speeds"])], limit_kmh=limit)
        if stats["moving_speeds"]
        else None
    )
    return render(
        request,
        "run.html",
        user,
        run=run,
        row=run_row(run, stats["tracks"]),
        stats=stats,
        violations=violations,
        violator_ids={v.track_id for v, *_ in violations},
        tracks=tracks,
        max_rows=MAX_VEHICLE_ROWS,
        video=video,
        flight=flight,
        limit_kmh=limit,
        flight_name=flight_label(flight) if flight else None,
        other=counterpart(db, run),
        histogram=histogram,
        has_video=has_video,
        formats=exports.RUN_FORMATS,
        format_labels=exports.RUN_FORMAT_LABELS,
        can_make=bool(out_dir)
        and (
            read_orthophoto(out_dir) is None
            or any(not (snap and clip) for _v, _no, _cls, _when, snap, _sigma, clip in violations)
        ),
        traffic=traffic,
        traffic_figure=counts.counts_figure(traffic),
        clip_seconds=round(evidence.CLIP_BEFORE_S + evidence.CLIP_AFTER_S),
        losses=[loss_text(x) for x in run.losses_json or []],
    )


def run_speed_limit(db: Session, run: ProcessingRun, violations: list[Violation]) -> float | None:
    """The limit the run was checked against: its violations say it, else its task's."""
    if violations:
        return max(v.limit_kmh for v in violations)
    if run.task_round_id is None:
        return None
    return db.scalar(
        select(Task.speed_limit_kmh)
        .join(TaskRound, TaskRound.task_id == Task.id)
        .where(TaskRound.id == run.task_round_id)
    )


@router.get("/runs/{run_id}/compare", name="run_compare")
def run_compare(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    run = _get_run(db, run_id)
    try:
        other_id = opt_int(request.query_params.get("other"), "other")
    except BadQuery as exc:
        raise HTTPException(400, str(exc)) from None
    other = _get_run(db, other_id) if other_id is not None else counterpart(db, run)
    if other is None:
        raise HTTPException(
            404, f"run {run_id} has no complete run of the same video in the other mode to compare with"
        )
    left, right = (other, run) if other.baseline and not run.baseline else (run, other)
    stats = [run_stats(db, left), run_stats(db, right)]
    histogram = charts.speed_histogram(
        [(f"run {r.id} ({s['mode']})", s["moving_speeds"]) for r, s in zip((left, right), stats)]
    )
    return render(request, "compare.html", user, runs=[left, right], stats=stats, histogram=histogram)


@router.get("/runs/{run_id}/export.{fmt}")
def run_export(run_id: int, fmt: str, user=Depends(viewer), db: Session = Depends(get_db)):
    run = _get_run(db, run_id)
    if fmt not in exports.RUN_FORMATS:
        raise HTTPException(404, f"unknown export format {fmt!r} (one of {', '.join(exports.RUN_FORMATS)})")
    name = f"run_{run_id}.{'txt' if fmt == 'mot' else fmt}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    try:
        if fmt == "csv":
            return StreamingResponse(exports.run_csv(db, run), media_type="text/csv", headers=headers)
        if fmt == "mot":
            return FileResponse(exports.run_mot_path(run, db), media_type="text/plain", filename=name)
        if fmt == "counts":
            return StreamingResponse(
                counts.counts_csv_lines(counts.run_counts(db, run)),
                media_type="text/csv",
                headers={"Content-Disposition": f'attachment; filename="run_{run_id}_counts.csv"'},
            )
        if fmt == "zip":
            name = f"run_{run_id}_violations.zip"
            return Response(
                exports.run_violations_zip(db, run),
                media_type="application/zip",
                headers={"Content-Disposition": f'attachment; filename="{name}"'},
            )
        body = {"geojson": exports.run_geojson, "kml": exports.run_kml}[fmt](db, run)
    except exports.ExportUnavailable as exc:
        return PlainTextResponse(str(exc), status_code=404)
    return Response(body, media_type=exports.MEDIA_TYPES[fmt], headers=headers)


@router.get("/runs/{run_id}/ortho.png")
def run_orthophoto(run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The run's orthophoto (its video projected to the ground, RGBA PNG); its bounds come with the map data."""
    out_dir = exports.run_output_dir(_get_run(db, run_id), db)
    if out_dir is None or read_orthophoto(out_dir) is None:
        raise not_found(f"orthophoto of run {run_id}")
    return FileResponse(out_dir / ORTHO_PNG, media_type="image/png")


@router.post("/runs/{run_id}/artefacts", dependencies=[Depends(verify_csrf)])
def run_make_artefacts(request: Request, run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Make the orthophoto and the violation snapshots and clips of a run that lacks them (e.g. a service job's run)."""
    from vision.orthophoto import OrthophotoError, make_orthophoto

    run = _get_run(db, run_id)
    out_dir = exports.run_output_dir(run, db)
    if out_dir is None or not (out_dir / "summary.json").is_file():
        flash(request, f"run {run_id}: its output folder is unknown or gone; nothing to make them from", "error")
        return redirect(request, f"/runs/{run_id}")
    notes = []
    if read_orthophoto(out_dir) is None:
        try:
            o = make_orthophoto(out_dir)
            notes.append(f"orthophoto of {o.frames} frames at {o.metres_per_pixel:.2f} m/px")
        except OrthophotoError as exc:
            notes.append(f"no orthophoto: {exc}")
    wanted = [
        evidence.Wanted(no, t)
        for no, t in db.execute(
            select(TrackRow.track_no, Violation.t_s)
            .join(TrackRow, TrackRow.id == Violation.track_id)
            .where(Violation.run_id == run_id)
        )
    ]
    fps = db.scalar(select(Video.fps).where(Video.id == run.video_id)) if run.video_id else None
    if wanted:
        try:
            notes.append(
                f"{len(evidence.make_snapshots(out_dir, wanted, fps or 25.0))} of {len(wanted)} violation snapshots"
            )
        except (OSError, ValueError) as exc:
            notes.append(f"no snapshots: {str(exc).splitlines()[0][:200]}")
        try:
            notes.append(f"{len(evidence.make_clips(out_dir, wanted, fps or 25.0))} of {len(wanted)} violation clips")
        except (OSError, ValueError) as exc:
            notes.append(f"no clips: {str(exc).splitlines()[0][:200]}")
    flash(request, f"run {run_id}: " + "; ".join(notes or ["nothing to make"]))
    return redirect(request, f"/runs/{run_id}")


@router.get("/runs/{run_id}/evidence/{track_no}.jpg")
def run_violation_snapshot(run_id: int, track_no: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The snapshot of a violation (vision.evidence), made when the run was imported."""
    path = evidence.snapshot_path(exports.run_output_dir(_get_run(db, run_id), db), track_no)
    if path is None:
        raise not_found(f"snapshot of vehicle #{track_no} of run {run_id}")
    return FileResponse(path, media_type="image/jpeg")


@router.get("/runs/{run_id}/evidence/{track_no}.mp4")
def run_violation_clip(run_id: int, track_no: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The short clip around a violation (vision.evidence), served with range requests so the browser can seek."""
    path = evidence.clip_path(exports.run_output_dir(_get_run(db, run_id), db), track_no)
    if path is None:
        raise not_found(f"clip of vehicle #{track_no}'s violation in run {run_id}")
    return FileResponse(path, media_type="video/mp4")


@router.get("/runs/{run_id}/annotated.mp4")
def run_video(run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The run's annotated H.264 video, served with range requests so the browser can seek."""
    out_dir = exports.run_output_dir(_get_run(db, run_id), db)
    path = out_dir / "annotated.mp4" if out_dir else None
    if path is None or not path.is_file():
        raise not_found(f"annotated video of run {run_id}")
    return FileResponse(path, media_type="video/mp4")
