"""The traffic study of a run (and of a task's site): page, printable report, map data, CSV exports, the site's
approaches (edited on the page's map: drag, rename, merge) and the conflicts' evidence clips."""

from __future__ import annotations

import csv
import io
import math
import struct

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard import exports, study_charts, study_evidence
from dashboard import study_view as sv
from dashboard.auth import ROLE_RANK, operator, verify_csrf, viewer
from dashboard.context import flash, get_db, render
from dashboard.counting_lines import LocalFrame
from dashboard.labels import run_label
from dashboard.routes.common import not_found, redirect
from db import approaches as store
from db.models import ProcessingRun, Task, TaskRound, Video
from db.orthophoto import ORTHO_PNG, read_orthophoto

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
    diagram = _diagram_svg(out_dir, values["result"]) if values["study"] is not None else None
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


# -- approaches of the site ---------------------------------------------------------------------------------------


async def _json(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        raise HTTPException(422, "expected a JSON body") from None
    if not isinstance(body, dict):
        raise HTTPException(422, "expected a JSON object")
    return body


def _check_in_view(db: Session, run: ProcessingRun, items: list[dict]) -> None:
    """Refuse approaches drawn outside what this flight saw (422 naming them)."""
    from tracking.study import Approach

    rows, _ = sv._rows(db, run)
    if not rows:
        raise HTTPException(422, f"run {run.id} has no map positions: approaches cannot be placed on its map")
    frame = LocalFrame(float(np.median([r["lon"] for r in rows])), float(np.median([r["lat"] for r in rows])))
    points = np.array([frame.to_local(r["lon"], r["lat"]) for r in rows])
    candidates = [
        Approach(a["key"], a["name"], *frame.to_local(a["lon"], a["lat"]), a["heading_deg"], a["radius_m"])
        for a in items
    ]
    far = sv.outside_view(candidates, points)
    if far:
        a, d = far[0]
        raise HTTPException(
            422,
            f"approach {a.id} ({a.name}) is {d:.0f} m from the nearest vehicle this flight tracked: outside its "
            "view; place it on a road the vehicles use",
        )


def _save(db: Session, run: ProcessingRun, items: list[dict], user) -> dict:
    site = store.site_of_run(db, run)
    rows = store.replace_site_approaches(db, site, items, user.id)
    db.commit()
    return {"site": site.key, "approaches": [{k: getattr(r, k) for k in _FIELDS} for r in rows]}


_FIELDS = ("key", "name", "lon", "lat", "heading_deg", "radius_m")


@router.post("/api/runs/{run_id}/approaches", dependencies=[Depends(verify_csrf)])
async def save_approaches(request: Request, run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Replace the site's approaches with ``{"approaches": [{"key", "name", "lon", "lat", "heading_deg",
    "radius_m"}]}`` (what the map shows after a drag or a rename); 422 with the reason when they cannot be used."""
    body = await _json(request)
    run = _run(db, run_id)
    try:
        items = store.clean(body.get("approaches"))
    except store.BadApproach as exc:
        raise HTTPException(422, str(exc)) from None
    _check_in_view(db, run, items)
    return _save(db, run, items, user)


@router.post("/api/runs/{run_id}/approaches/merge", dependencies=[Depends(verify_csrf)])
async def merge_approaches(request: Request, run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Merge approach ``merge`` into ``keep`` (``{"keep": "A", "merge": "B"}``): one approach, named as ``keep``,
    centred between the two and wide enough to take in both, so the vehicles of either now count for it."""
    body = await _json(request)
    run = _run(db, run_id)
    result = sv.run_study(db, run)
    current = sv.approach_rows(result)
    by_key = {a["key"]: a for a in current}
    keep, merge = str(body.get("keep") or ""), str(body.get("merge") or "")
    if keep not in by_key or merge not in by_key or keep == merge:
        raise HTTPException(
            422, f"merge: 'keep' and 'merge' must be two different approaches of this site ({', '.join(by_key)})"
        )
    a, b = by_key[keep], by_key[merge]
    from tracking.study import StudyConfig

    turn = abs((a["heading_deg"] - b["heading_deg"] + 180.0) % 360.0 - 180.0)
    if turn > StudyConfig().approach_heading_deg:
        raise HTTPException(
            422,
            f"approaches {keep} and {merge} carry traffic in different directions (headings "
            f"{a['heading_deg']:.0f}° and {b['heading_deg']:.0f}°): only approaches of one road leg can be merged",
        )
    frame = LocalFrame(a["lon"], a["lat"])
    bx, by = frame.to_local(b["lon"], b["lat"])
    dist = math.hypot(bx, by)
    ha, hb = math.radians(a["heading_deg"]), math.radians(b["heading_deg"])
    merged = {
        **a,
        "lon": (a["lon"] + b["lon"]) / 2,
        "lat": (a["lat"] + b["lat"]) / 2,
        "heading_deg": math.degrees(math.atan2(math.sin(ha) + math.sin(hb), math.cos(ha) + math.cos(hb))) % 360,
        "radius_m": min(500.0, dist / 2 + max(a["radius_m"], b["radius_m"])),
    }
    items = [merged if x["key"] == keep else x for x in current if x["key"] != merge]
    return _save(db, run, store.clean(items), user)


@router.post("/api/runs/{run_id}/approaches/reset", dependencies=[Depends(verify_csrf)])
def reset_approaches(run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Forget the site's saved approaches: the study finds them from the trajectories again."""
    run = _run(db, run_id)
    site = store.site_of_run(db, run)
    n = store.clear_site_approaches(db, site)
    db.commit()
    return {"site": site.key, "deleted": n}


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


# -- the report's movement diagram --------------------------------------------------------------------------------


def _png_size(path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    w, h = struct.unpack(">II", head[16:24])
    return w, h


def _diagram_svg(out_dir, result: sv.StudyResult) -> dict:
    """The movement diagram as SVG drawing data: the orthophoto (when the run has one) with the approaches and an
    arrow per movement whose width is its volume; coordinates in the picture's pixels."""
    s, frame = result.study, result.frame
    assert s is not None and frame is not None
    meta = read_orthophoto(out_dir)
    size = _png_size(out_dir / ORTHO_PNG) if meta else None
    arrows = sv.movement_arrows(s)
    pts_m = [np.array([[a.x, a.y] for a in s.approaches])] + [m["xy"] for m in arrows]
    if meta and size:
        (south, west), (north, east) = meta["bounds"]
        w, h = size

        def px(xy: np.ndarray) -> np.ndarray:
            lon = frame.lon0 + xy[:, 0] / frame.kx
            lat = frame.lat0 + xy[:, 1] / frame.ky
            return np.column_stack([(lon - west) / (east - west) * w, (north - lat) / (north - south) * h])

        image = True  # the run's orthophoto route (the template writes its URL)
    else:
        allpts = np.vstack(pts_m + [t.xy for t in list(s.smoothed.values())[:300]])
        lo, hi = allpts.min(axis=0) - 20, allpts.max(axis=0) + 20
        scale = 1000.0 / max(1.0, float((hi - lo).max()))
        w, h = int((hi[0] - lo[0]) * scale) + 1, int((hi[1] - lo[1]) * scale) + 1

        def px(xy: np.ndarray) -> np.ndarray:
            return np.column_stack([(xy[:, 0] - lo[0]) * scale, (hi[1] - xy[:, 1]) * scale])

        image = False
    unit = max(w, h) / 900.0  # stroke widths in picture pixels for a ~900 px wide print
    paths = [
        {
            "d": "M " + " L ".join(f"{x:.1f},{y:.1f}" for x, y in px(m["xy"])),
            "head": " ".join(f"{x:.1f},{y:.1f}" for x, y in px(sv.arrow_head(m["xy"], 2.0 + 6.0 * m["width"]))),
            "width": round((2 + 14 * m["width"]) * unit, 1),
            "label": f"{m['origin']}→{m['destination']} {m['movement']}: {m['vehicles']}",
            "movement": m["movement"],
            "vehicles": m["vehicles"],
            "mid": [round(float(v), 1) for v in px(m["xy"][len(m["xy"]) // 2 : len(m["xy"]) // 2 + 1])[0]],
        }
        for m in sorted(arrows, key=lambda m: -m["vehicles"])
    ]
    tracks = [
        " ".join(f"{x:.0f},{y:.0f}" for x, y in px(t.xy[:: max(1, len(t.xy) // 30)]))
        for t in list(s.smoothed.values())[:300]
    ]
    approaches = [
        {"key": a.id, "name": a.name, "x": round(float(p[0]), 1), "y": round(float(p[1]), 1)}
        for a, p in zip(s.approaches, px(np.array([[a.x, a.y] for a in s.approaches]).reshape(-1, 2)))
    ]
    return {
        "width": w,
        "height": h,
        "image": image,
        "paths": paths,
        "tracks": tracks,
        "approaches": approaches,
        "unit": round(unit, 2),
    }


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
