"""Flights: list and search, detail (telemetry charts, map, videos, runs), uploads, exports."""

from __future__ import annotations

import hashlib
import re
import secrets
import shutil
from pathlib import Path

from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from dashboard import charts, exports
from dashboard.auth import operator, verify_csrf, viewer
from dashboard.context import ctx, flash, get_db, render
from dashboard.mapdata import feature_collection, flight_samples, flight_track_features
from dashboard.routes.common import BadQuery, not_found, opt_int, opt_time, redirect
from db.engine import WRITE
from db.models import Device, Flight, ProcessingRun, TaskRound, Video, as_naive_utc

router = APIRouter()
PAGE_SIZE = 50
CHART_POINTS = 3000


class UploadTooLarge(ValueError):
    pass


def _safe_name(name: str | None, default: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name or default).name).strip("._") or default
    return stem[:120]


def save_upload(upload: UploadFile, folder: Path, max_bytes: int) -> tuple[Path, str]:
    """Copy an upload to ``folder`` under a unique name; returns (path, sha256). Refuses files over ``max_bytes``."""
    folder.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    tmp = folder / f".upload-{secrets.token_hex(8)}"
    try:
        with open(tmp, "wb") as out:
            while chunk := upload.file.read(1024 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise UploadTooLarge(f"{upload.filename}: larger than the {max_bytes // 2**20} MiB upload limit")
                digest.update(chunk)
                out.write(chunk)
        if size == 0:
            raise UploadTooLarge(f"{upload.filename or 'upload'}: file is empty")
        sha = digest.hexdigest()
        final = folder / f"{sha[:12]}_{_safe_name(upload.filename, 'upload')}"
        shutil.move(tmp, final)
        return final, sha
    finally:
        tmp.unlink(missing_ok=True)


@router.get("/flights", name="flights")
def flight_list(request: Request, user=Depends(viewer), db: Session = Depends(get_db)):
    q = request.query_params
    try:
        device_id, page = opt_int(q.get("device_id"), "device_id"), max(1, opt_int(q.get("page"), "page") or 1)
        start, end = opt_time(q.get("start"), "start"), opt_time(q.get("end"), "end")
    except BadQuery as exc:
        raise HTTPException(400, str(exc)) from None
    text = (q.get("q") or "").strip()[:100]
    query = select(Flight).outerjoin(Device, Device.id == Flight.device_id)
    if text:
        like = f"%{text}%"
        query = query.where(
            or_(
                Device.serial.ilike(like),
                Device.name.ilike(like),
                Flight.source_file.ilike(like),
                Flight.status.ilike(like),
                Flight.notes.ilike(like),
            )
        )
    if device_id is not None:
        query = query.where(Flight.device_id == device_id)
    if start is not None:
        query = query.where(Flight.start_time >= as_naive_utc(start))
    if end is not None:
        query = query.where(Flight.start_time <= as_naive_utc(end))
    total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
    flights = list(
        db.scalars(
            query.order_by(Flight.start_time.desc(), Flight.id.desc()).offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)
        )
    )
    devices = list(db.scalars(select(Device).order_by(Device.serial)))
    return render(
        request,
        "flights.html",
        user,
        flights=flights,
        devices=devices,
        total=total,
        page=page,
        pages=max(1, -(-total // PAGE_SIZE)),
        q=text,
        device_id=device_id,
        start=q.get("start", ""),
        end=q.get("end", ""),
    )


@router.get("/flights/{flight_id}", name="flight")
def flight_detail(request: Request, flight_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    flight = db.get(Flight, flight_id)
    if flight is None:
        raise not_found(f"flight {flight_id}")
    samples = flight_samples(db, flight_id, CHART_POINTS)
    figure = (
        charts.flight_telemetry(
            [s.t_s for s in samples],
            [s.rel_alt_m for s in samples],
            [None if s.ground_speed_ms is None else s.ground_speed_ms * 3.6 for s in samples],
            [s.battery_pct for s in samples],
        )
        if samples
        else None
    )
    track = feature_collection(flight_track_features(db, [flight], max_points=1500))
    videos = list(db.scalars(select(Video).where(Video.flight_id == flight_id).order_by(Video.id)))
    runs = list(
        db.scalars(select(ProcessingRun).where(ProcessingRun.flight_id == flight_id).order_by(ProcessingRun.id))
    )
    rnd = db.get(TaskRound, flight.task_round_id) if flight.task_round_id else None
    return render(
        request,
        "flight.html",
        user,
        flight=flight,
        figure=figure,
        track=track,
        videos=videos,
        runs=runs,
        task_round=rnd,
        formats=exports.FLIGHT_FORMATS,
    )


@router.post("/flights/upload-log", dependencies=[Depends(verify_csrf)])
def upload_log(
    request: Request,
    log: UploadFile = File(...),
    device_serial: str = Form(""),
    create_device: bool = Form(False),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    """Store the file, then import it (db.importer): one flight with all its samples, or a one-line error."""
    from db.importer import import_flight_log
    from vision.telemetry import load_flight_log

    c = ctx(request)
    db.rollback()  # no database lock while the file is copied and parsed
    try:
        path, _ = save_upload(log, c.data_dir / "uploads" / "logs", c.settings.max_upload_mb * 2**20)
        parsed = load_flight_log(path)
        db.connection(execution_options=WRITE)  # then one write transaction for the whole flight
        result = import_flight_log(
            db,
            path,
            device_serial=device_serial.strip() or None,
            create_device=create_device,
            progress=False,
            log=parsed,
        )
        db.commit()  # the whole file in one transaction: the flight appears with all its samples or not at all
    except ValueError as exc:
        db.rollback()
        flash(request, f"upload failed: {exc}", "error")
        return redirect(request, "/flights")
    if result.created:
        flash(request, f"flight {result.flight_id} imported: {result.samples} samples ({result.status})")
    else:
        flash(request, f"this log was already imported as flight {result.flight_id}")
    return redirect(request, f"/flights/{result.flight_id}")


@router.post("/flights/{flight_id}/upload-video", dependencies=[Depends(verify_csrf)])
def upload_video(
    request: Request,
    flight_id: int,
    video: UploadFile = File(...),
    time_offset_s: str = Form("0"),
    user=Depends(operator),
    db: Session = Depends(get_db),
):
    """Store a recorded video of this flight and register it (processing it is a job of the service or the CLI)."""
    from vision.source import open_source

    c = ctx(request)
    flight = db.get(Flight, flight_id)
    if flight is None:
        raise not_found(f"flight {flight_id}")
    db.rollback()  # no database lock while the file is copied and probed
    try:
        offset = float(time_offset_s or 0)
        path, sha = save_upload(video, c.data_dir / "uploads" / "videos", c.settings.max_upload_mb * 2**20)
        try:
            with open_source(path) as src:
                info = src.info
        except Exception as exc:  # any decoder failure means: not a video we can process
            path.unlink(missing_ok=True)
            raise ValueError(f"{video.filename}: not a readable video ({str(exc).splitlines()[0][:200]})") from None
        db.connection(execution_options=WRITE)
        row = Video(
            flight_id=flight_id,
            file_path=str(path),
            checksum=sha,
            fps=info.fps,
            width=info.width,
            height=info.height,
            frame_count=info.frame_count,
            duration_s=info.duration_s,
            time_offset_s=offset,
        )
        db.add(row)
        db.commit()
    except ValueError as exc:
        db.rollback()
        flash(request, f"upload failed: {exc}", "error")
        return redirect(request, f"/flights/{flight_id}")
    flash(request, f"video {row.id} stored ({info.width}x{info.height}, {info.fps:g} fps)")
    return redirect(request, f"/flights/{flight_id}")


@router.get("/flights/{flight_id}/export.{fmt}")
def flight_export(flight_id: int, fmt: str, user=Depends(viewer), db: Session = Depends(get_db)):
    flight = db.get(Flight, flight_id)
    if flight is None:
        raise not_found(f"flight {flight_id}")
    if fmt not in exports.FLIGHT_FORMATS:
        raise HTTPException(404, f"unknown export format {fmt!r} (one of {', '.join(exports.FLIGHT_FORMATS)})")
    headers = {"Content-Disposition": f'attachment; filename="flight_{flight_id}.{fmt}"'}
    if fmt == "csv":
        return StreamingResponse(exports.flight_csv(db, flight), media_type="text/csv", headers=headers)
    make = {"geojson": exports.flight_geojson, "kml": exports.flight_kml, "gpx": exports.flight_gpx}[fmt]
    try:
        body = make(db, flight)
    except exports.ExportUnavailable as exc:
        return PlainTextResponse(str(exc), status_code=404)
    return Response(body, media_type=exports.MEDIA_TYPES[fmt], headers=headers)
