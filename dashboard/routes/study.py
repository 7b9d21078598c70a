"""The traffic study of a run (and of a task's site): page, printable report, map data, CSV exports and the
conflicts' evidence clips. The approaches' editing is :mod:`dashboard.routes.approaches`, the computing
:mod:`dashboard.study_view`."""

from __future__ import annotations

import csv
import io

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard import exports, study_charts, study_diagram, study_evidence
from dashboard import study_view as sv
from dashboard.auth import ROLE_RANK, operator, verify_csrf, viewer
from dashboard.context import flash, get_db, render
from dashboard.labels import run_label
from dashboard.routes.common import not_found, redirect
from db import approaches as store
from db.models import ProcessingRun, Task, TaskRound, Video
from vision.orthophoto import read_orthophoto

router = APIRouter()


def _run(db: Session, run_id: int) -> ProcessingRun:
    run = db.get(ProcessingRun, run_id)
    if run is None:
        raise not_found(f"run {run_id}")
    return run


def _bin(request: Request) -> tuple[float, str | None]:
    try:
        return sv.parse_bin(request.query_params.get("bin")), None
    except sv.BadBin as exc:
        return sv.BIN_CHOICES["15m"], f"{exc}; showing 15 min bins"


def _can_edit(user) -> bool:
    return ROLE_RANK.get(user.role, -1) >= ROLE_RANK["operator"]


def _conflicts(run: ProcessingRun, db: Session, result: sv.StudyResult) -> list[dict]:
    out_dir = exports.run_output_dir(run, db)
    rows = []
    for i, c in enumerate(result.study.conflicts if result.study is not None else []):
        name = study_evidence.clip_name(c)
        rows.append(
            {
                "no": i + 1,
                **sv.conflict_row(c),
                "clip": name if study_evidence.clip_path(out_dir, name) else None,
                "profile_a": result.track_ids.get(int(c.track_a)),
                "profile_b": result.track_ids.get(int(c.track_b)),
            }
        )
    return rows


def _page_values(db: Session, run: ProcessingRun, bin_s: float) -> dict:
    result = sv.run_study(db, run, bin_s)
    s = result.study
    values: dict = {"result": result, "study": s, "site": result.site.key, "saved": result.saved}
    if s is None:
        return values
    names = {a.id: a.name for a in s.approaches}
    labels, matrix = sv.od_matrix(s)
    starts, series = sv.movement_series(s)
    used_bin = float(s.bin_s)
    partial: dict[str, int] = {}
    for v in s.vehicles:
        if v.origin is None or v.destination is None:
            partial[v.movement] = partial.get(v.movement, 0) + 1
    values.update(
        names=names,
        od_labels=labels,
        od_matrix=matrix,
        od_figure=study_charts.od_heatmap(labels, matrix, names) if any(map(any, matrix)) else None,
        series_figure=study_charts.movement_series(starts, series, used_bin, sv.bin_label(used_bin))
        if series
        else None,
        movements=sv.movement_counts(s),
        partial=partial,
        used_bin=sv.bin_label(used_bin),
        tables={k: v for k, v in sv.tables(result).items() if k not in ("approaches", "od_matrix_grid")},
        table_title=sv.table_title,
        conflicts=_conflicts(run, db, result),
        warnings=list(s.warnings) + result.notes,
        approaches=sv.approach_rows(result),
        lanes=list(s.lanes),
    )
    return values


def _site_task(db: Session, site: store.Site) -> dict:
    """The task whose site the run is (for the page's link), or None."""
    return {"task": db.get(Task, site.task_id) if site.task_id is not None else None}


@router.get("/runs/{run_id}/study", name="run_study")
def study_page(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    run = _run(db, run_id)
    bin_s, bin_error = _bin(request)
    values = _page_values(db, run, bin_s)
    return render(
        request,
        "study.html",
        user,
        run=run,
        label=run_label(run),
        bin_s=bin_s,
        bin_error=bin_error,
        bin_choices=sv.BIN_CHOICES,
        bin_query=request.query_params.get("bin") or "15m",
        can_edit=_can_edit(user),
        has_folder=exports.run_output_dir(run, db) is not None,
        **_site_task(db, values["result"].site),
        **values,
    )


@router.get("/runs/{run_id}/study/report", name="run_study_report")
def study_report(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The study as one print-ready page: movement diagram on the orthophoto, tables and charts, no controls."""
    run = _run(db, run_id)
    bin_s, bin_error = _bin(request)
    values = _page_values(db, run, bin_s)
    out_dir = exports.run_output_dir(run, db)
    diagram = study_diagram.movement_diagram(out_dir, values["result"]) if values["study"] is not None else None
    return render(
        request,
        "study_report.html",
        user,
        run=run,
        label=run_label(run),
        bin_error=bin_error,
        diagram=diagram,
        video=db.get(Video, run.video_id) if run.video_id else None,
        **_site_task(db, values["result"].site),
        **values,
    )


@router.get("/api/runs/{run_id}/study")
def study_api(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The study for the page's map: approaches, movement arrows (lon/lat, width = share of the busiest), lanes,
    conflicts, the orthophoto's bounds; ``message`` when the run has no study."""
    run = _run(db, run_id)
    bin_s, _ = _bin(request)
    result = sv.run_study(db, run, bin_s)
    meta = read_orthophoto(exports.run_output_dir(run, db))
    data = sv.map_data(result)
    data["lanes"] = _lanes(result)
    return {
        "run_id": run.id,
        "site": result.site.key,
        "saved": result.saved,
        "can_edit": _can_edit(user),
        "message": result.message,
        "imagery": {"run_id": run.id, "bounds": meta["bounds"]} if meta else None,
        **data,
    }


def _lanes(result: sv.StudyResult) -> list[dict]:
    s, frame = result.study, result.frame
    out = []
    for lane in s.lanes if s is not None else []:
        pts = np.asarray(lane.line, float).reshape(-1, 2)
        coords = [list(sv._lonlat(frame, float(x), float(y))) for x, y in pts]
        out.append({"approach": lane.approach, "lane": lane.lane, "vehicles": lane.vehicles, "coordinates": coords})
    return out


# -- exports and evidence -----------------------------------------------------------------------------------------


@router.get("/runs/{run_id}/study/{table}.csv")
def study_csv(request: Request, run_id: int, table: str, user=Depends(viewer), db: Session = Depends(get_db)):
    """One table of the study as CSV (the names are the page's CSV links)."""
    run = _run(db, run_id)
    bin_s, _ = _bin(request)
    result = sv.run_study(db, run, bin_s)
    if result.study is None:
        return Response(f"run {run_id}: no study ({result.message})\n", status_code=409, media_type="text/plain")
    tables = sv.tables(result)
    if table not in tables:
        raise not_found(f"study table {table!r} (one of {', '.join(tables)})")
    rows = tables[table]
    buf = io.StringIO()
    columns = list(dict.fromkeys(k for r in rows for k in r)) or ["(no rows)"]
    w = csv.DictWriter(buf, columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return Response(
        buf.getvalue(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="run_{run_id}_study_{table}.csv"'},
    )


@router.post("/runs/{run_id}/study/clips", dependencies=[Depends(verify_csrf)])
def study_clips(request: Request, run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Cut an evidence clip for each conflict that has none (from the run folder's video)."""
    run = _run(db, run_id)
    back = f"/runs/{run_id}/study"
    result = sv.run_study(db, run)
    out_dir = exports.run_output_dir(run, db)
    if result.study is None or not result.study.conflicts:
        flash(request, f"run {run_id}: no conflicts to cut clips of")
        return redirect(request, back)
    if out_dir is None:
        flash(request, f"run {run_id}: its output folder is unknown or gone; no video to cut clips from", "error")
        return redirect(request, back)
    fps = db.scalar(select(Video.fps).where(Video.id == run.video_id)) if run.video_id else None
    try:
        n = study_evidence.make_conflict_clips(out_dir, result.study.conflicts, fps or 25.0)
    except (OSError, ValueError) as exc:
        flash(request, f"run {run_id}: no conflict clips ({str(exc).splitlines()[0][:200]})", "error")
        return redirect(request, back)
    flash(request, f"run {run_id}: {n} conflict clips cut of {len(result.study.conflicts)} conflicts")
    return redirect(request, back)


@router.get("/runs/{run_id}/study/clips/{name}")
def study_clip(run_id: int, name: str, user=Depends(viewer), db: Session = Depends(get_db)):
    path = study_evidence.clip_path(exports.run_output_dir(_run(db, run_id), db), name)
    if path is None:
        raise not_found(f"conflict clip {name} of run {run_id}")
    return FileResponse(path, media_type="video/mp4")


# -- a task's site ------------------------------------------------------------------------------------------------


@router.get("/tasks/{task_id}/study", name="task_study")
def task_study(request: Request, task_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The site's study: its approaches and, over every finished run of the task, the movements and O-D totals."""
    task = db.get(Task, task_id)
    if task is None:
        raise not_found(f"task {task_id}")
    bin_s, bin_error = _bin(request)
    runs = list(
        db.scalars(
            select(ProcessingRun)
            .join(TaskRound, TaskRound.id == ProcessingRun.task_round_id)
            .where(TaskRound.task_id == task_id, ProcessingRun.status == "complete")
            .order_by(ProcessingRun.id)
        )
    )
    per_run: list[dict] = []
    totals: dict[tuple[str, str, str], int] = {}
    od: dict[tuple[str, str], int] = {}
    for run in runs:
        r = sv.run_study(db, run, bin_s)
        moves = sv.movement_counts(r.study) if r.study is not None else []
        per_run.append(
            {
                "run": run,
                "label": run_label(run),
                "message": r.message,
                "vehicles": sum(m["vehicles"] for m in moves),
                "notes": r.notes,
            }
        )
        for m in moves:
            k = (m["origin"], m["destination"], m["movement"])
            totals[k] = totals.get(k, 0) + m["vehicles"]
        if r.study is not None:
            labels, matrix = sv.od_matrix(r.study)
            for i, o in enumerate(labels):
                for j, d in enumerate(labels):
                    if matrix[i][j]:
                        od[(o, d)] = od.get((o, d), 0) + matrix[i][j]
    site = store.Site(task_id, None)
    keys = [a.key for a in store.site_approaches(db, site)] or sorted({k for pair in od for k in pair} - {sv.MID_VIEW})
    labels = keys + ([sv.MID_VIEW] if any(sv.MID_VIEW in pair for pair in od) else [])
    return render(
        request,
        "task_study.html",
        user,
        task=task,
        approaches=store.site_approaches(db, site),
        runs=per_run,
        totals=[
            {"origin": o, "destination": d, "movement": mv, "vehicles": n} for (o, d, mv), n in sorted(totals.items())
        ],
        od_labels=labels,
        od_matrix=[[od.get((o, d), 0) for d in labels] for o in labels],
        bin_error=bin_error,
    )
