"""Counting lines and zones of a run's site (drawn on the run page's map): list with their counts, add, delete,
CSV export. Stored per task, or per run when the run has no task (:mod:`dashboard.counting_store`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from dashboard import counting_lines, counting_store
from dashboard.auth import ROLE_RANK, operator, verify_csrf, viewer
from dashboard.context import get_db
from dashboard.routes.common import not_found
from db.approaches import site_of_run
from db.models import ProcessingRun

router = APIRouter()


def site_of(db: Session, run: ProcessingRun) -> str:
    """The run's site key: its task, else the run itself (the same site the study's approaches are kept per)."""
    return site_of_run(db, run).key


def _run_and_site(db: Session, run_id: int) -> tuple[ProcessingRun, str]:
    run = db.get(ProcessingRun, run_id)
    if run is None:
        raise not_found(f"run {run_id}")
    return run, site_of(db, run)


def site_line_features(db: Session, run_ids: list[int]) -> dict:
    """The counting lines and zones of the shown runs' sites as GeoJSON (each once, with a run to count them on)."""
    features, seen = [], set()
    for run_id in run_ids:
        run = db.get(ProcessingRun, run_id)
        if run is None:  # deleted since the page listed it
            continue
        key = site_of(db, run)
        if key in seen:
            continue
        seen.add(key)
        for line in counting_store.site_lines(db, key):
            coords = line["coordinates"]
            geom = (
                {"type": "LineString", "coordinates": coords}
                if line["kind"] == "line"
                else {"type": "Polygon", "coordinates": [coords + [coords[0]]]}
            )
            features.append(
                {
                    "type": "Feature",
                    "geometry": geom,
                    "properties": {
                        "id": line["id"],
                        "name": line["name"],
                        "kind": line["kind"],
                        "site": key,
                        "run_id": run_id,
                    },
                }
            )
    return {"type": "FeatureCollection", "features": features}


def _result(request: Request, db: Session, run_id: int) -> tuple[ProcessingRun, str, dict]:
    run, key = _run_and_site(db, run_id)
    return run, key, counting_lines.count_at_lines(db, run, counting_store.site_lines(db, key))


@router.get("/api/runs/{run_id}/counting")
def run_counting(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """The site's counting lines and zones with this run's counts at each (table rows, time series, chart)."""
    _run, key, result = _result(request, db, run_id)
    for line in result["lines"]:
        line["figure"] = counting_lines.lines_figure(result, line)
        line.pop("events")
    return {"site": key, "can_edit": ROLE_RANK.get(user.role, -1) >= ROLE_RANK["operator"], **result}


@router.post("/api/runs/{run_id}/counting-lines", dependencies=[Depends(verify_csrf)], status_code=201)
async def add_counting_line(request: Request, run_id: int, user=Depends(operator), db: Session = Depends(get_db)):
    """Add a line (``{"kind": "line", "name": ..., "coordinates": [[lon, lat], [lon, lat]]}``) or a zone (3+ points)
    to the run's site."""
    _run, key = _run_and_site(db, run_id)
    try:
        body = await request.json()
    except ValueError:
        raise HTTPException(422, "expected a JSON body") from None
    try:
        line = counting_store.add_line(db, key, body, user.username)
    except counting_store.BadCountingLine as exc:
        raise HTTPException(422, str(exc)) from None
    db.commit()
    return line


@router.post("/api/runs/{run_id}/counting-lines/{line_id}/delete", dependencies=[Depends(verify_csrf)])
def delete_counting_line(
    request: Request, run_id: int, line_id: str, user=Depends(operator), db: Session = Depends(get_db)
):
    _run, key = _run_and_site(db, run_id)
    if not counting_store.delete_line(db, key, line_id):
        raise not_found(f"counting line {line_id} of {key}")
    db.commit()
    return {"deleted": line_id}


@router.get("/runs/{run_id}/export.lines")
def export_counting_lines(request: Request, run_id: int, user=Depends(viewer), db: Session = Depends(get_db)):
    """CSV: per line and zone the counts by direction and class, the time series and every crossing."""
    _run, _key, result = _result(request, db, run_id)
    return StreamingResponse(
        counting_lines.lines_csv_lines(result),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="run_{run_id}_lines.csv"'},
    )
