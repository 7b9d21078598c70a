"""The site's study approaches, edited on a run's study map: replace (after a drag or a rename), merge, reset. Kept
in the database per site (:mod:`db.approaches`); every change is a CSRF-checked JSON POST by an operator."""

from __future__ import annotations

import math

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Request
from sqlalchemy.orm import Session

from dashboard import study_view as sv
from dashboard.auth import operator, verify_csrf
from dashboard.context import get_db
from dashboard.counting_lines import LocalFrame
from dashboard.routes.common import not_found
from db import approaches as store
from db.models import ProcessingRun

router = APIRouter()


def _run(db: Session, run_id: int) -> ProcessingRun:
    run = db.get(ProcessingRun, run_id)
    if run is None:
        raise not_found(f"run {run_id}")
    return run


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
