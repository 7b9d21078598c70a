"""Traffic counts of a run: counted vehicles per direction and class, per time bin, with mean speed and violations.

Direction is the compass heading from where a vehicle was first placed on the map to where it was last (its
``path_geojson``, one point per 0.5 s): northbound, eastbound, southbound, westbound; *parked* for vehicles the
pipeline found standing; *unknown* when a moving vehicle's path is shorter than ``MIN_TRAVEL_M``; *no position*
for runs without georeference. A vehicle is counted in the time bin of its first
sighting (video time). Counting lines and zones drawn on the map are not done yet.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import ProcessingRun, TrackRow, Violation
from db.vehicles import counted

MIN_TRAVEL_M = 2.0
DIRECTIONS = ("northbound", "eastbound", "southbound", "westbound")
COLUMNS = ["direction", "class", "vehicles", "mean_speed_kmh", "violations"]


def direction(path_geojson: str | None, moving: bool = True) -> str:
    if not moving:
        return "parked"
    if not path_geojson:
        return "no position"
    geom = json.loads(path_geojson)
    if geom.get("type") != "LineString" or len(geom["coordinates"]) < 2:
        return "unknown"
    (lon0, lat0), (lon1, lat1) = geom["coordinates"][0][:2], geom["coordinates"][-1][:2]
    north = math.radians(lat1 - lat0) * 6_371_000
    east = math.radians(lon1 - lon0) * 6_371_000 * math.cos(math.radians((lat0 + lat1) / 2))
    if math.hypot(east, north) < MIN_TRAVEL_M:
        return "unknown"
    bearing = math.degrees(math.atan2(east, north)) % 360
    return DIRECTIONS[int(((bearing + 45) % 360) // 90)]


def bin_seconds(duration_s: float) -> float:
    """About 20 bins over the run, in round steps (5 s ... 1 h)."""
    for step in (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if duration_s / step <= 20:
            return float(step)
    return 3600.0


def run_counts(db: Session, run: ProcessingRun) -> dict:
    tracks = list(db.scalars(select(TrackRow).where(TrackRow.run_id == run.id, counted())))
    violators = set(db.scalars(select(Violation.track_id).where(Violation.run_id == run.id)))
    duration = max((t.last_t for t in tracks), default=0.0)
    step = bin_seconds(duration)
    table: dict[tuple[str, str], dict] = defaultdict(lambda: {"vehicles": 0, "speeds": [], "violations": 0})
    bins: dict[str, Counter] = defaultdict(Counter)
    for t in tracks:
        d = direction(t.path_geojson, t.moving)
        row = table[(d, t.class_name)]
        row["vehicles"] += 1
        if t.moving and t.median_speed_kmh is not None:
            row["speeds"].append(t.median_speed_kmh)
        row["violations"] += t.id in violators
        bins[d][int(t.first_t // step)] += 1
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
    n_bins = int(duration // step) + 1 if tracks else 0
    return {
        "rows": rows,
        "bin_s": step,
        "bins": n_bins,
        "series": {d: [bins[d].get(i, 0) for i in range(n_bins)] for d in sorted(bins)},
    }


def counts_figure(counts: dict) -> str | None:
    if not counts["bins"]:
        return None
    import plotly.graph_objects as go

    step = counts["bin_s"]
    x = [i * step for i in range(counts["bins"])]
    fig = go.Figure([go.Bar(x=x, y=ys, name=d, offset=0, width=step * 0.9) for d, ys in counts["series"].items()])
    fig.update_layout(
        barmode="stack",
        title=f"vehicles per {step:g} s by direction (first seen)",
        xaxis_title="video time (s)",
        yaxis_title="vehicles",
        template="plotly_white",
        height=300,
        margin=dict(l=50, r=15, t=35, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig.to_json()


def counts_csv_lines(counts: dict):
    from dashboard.exports import _csv_line

    yield _csv_line(COLUMNS)
    for r in counts["rows"]:
        yield _csv_line([r[c] for c in COLUMNS])
    yield _csv_line([])
    yield _csv_line(["bin_start_s", *counts["series"]])
    for i in range(counts["bins"]):
        yield _csv_line([i * counts["bin_s"], *(ys[i] for ys in counts["series"].values())])
