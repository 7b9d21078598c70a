"""A run's traffic study for the pages: the stored trajectories in, :func:`tracking.study.compute_study` run with
the site's approaches (or those found from the trajectories while the site has none saved), and what the study page,
its map, its report and its CSV exports need out.

Trajectories come from the database: every counted vehicle's (:mod:`db.vehicles`) per-frame map position
(``track_speeds`` lon/lat, the pipeline's image-to-ground projection) in local metres (east, north) around the
run's positions. A run without map positions has no study; the page says why instead of failing.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dashboard.counting_lines import LocalFrame
from db.approaches import Site, site_approaches, site_of_run
from db.models import ProcessingRun, StudyApproach, TrackRow, TrackSpeed
from db.vehicles import counted

BIN_CHOICES = {"15m": 900.0, "5m": 300.0, "1m": 60.0, "30s": 30.0}
_BIN_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|min|h)?$")
MID_VIEW = "mid-view"  # the O-D matrix's row / column of vehicles that entered or left inside the view
_CACHE_SIZE = 8
_cache: OrderedDict[tuple, StudyResult] = OrderedDict()
_cache_lock = threading.Lock()


class BadBin(ValueError):
    pass


def parse_bin(text: str | None) -> float:
    """``15m``, ``5m``, ``90s``, ``1h`` or seconds -> seconds (default 15 min)."""
    if not text:
        return BIN_CHOICES["15m"]
    m = _BIN_RE.match(text.strip().lower())
    if not m:
        raise BadBin(f"bin {text!r}: expected a duration such as 15m, 5m, 90s or 1h")
    value = float(m.group(1)) * {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if not 1.0 <= value <= 4 * 3600:
        raise BadBin(f"bin {text!r}: between 1 s and 4 h expected")
    return value


def bin_label(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


@dataclass
class StudyResult:
    """A run's study, or the one-line reason there is none (``message``)."""

    run_id: int
    site: Site
    saved: bool  # approaches from the database (else found from this run's trajectories)
    study: Any = None  # tracking.study.Study
    message: str | None = None
    frame: LocalFrame | None = None
    track_ids: dict[int, int] = field(default_factory=dict)  # track_no -> tracks.id (profile links)
    notes: list[str] = field(default_factory=list)  # the page's own warnings (approaches left out, ...)


def _rows(db: Session, run: ProcessingRun) -> tuple[list[dict], dict[int, int]]:
    tracks = {
        t.id: (t.track_no, t.class_name)
        for t in db.execute(
            select(TrackRow.id, TrackRow.track_no, TrackRow.class_name).where(TrackRow.run_id == run.id, counted())
        )
    }
    rows = []
    for tid, t, lon, lat in db.execute(
        select(TrackSpeed.track_id, TrackSpeed.t_s, TrackSpeed.lon, TrackSpeed.lat)
        .join(TrackRow, TrackRow.id == TrackSpeed.track_id)
        .where(TrackRow.run_id == run.id, TrackSpeed.lat.is_not(None), TrackSpeed.lon.is_not(None))
        .order_by(TrackSpeed.track_id, TrackSpeed.frame)
    ):
        if tid in tracks:
            no, cls = tracks[tid]
            rows.append({"track_id": no, "vehicle_class": cls, "t_s": t, "lon": lon, "lat": lat})
    return rows, {no: tid for tid, (no, _cls) in tracks.items()}


def _approach(a: StudyApproach, frame: LocalFrame):
    from tracking.study import Approach

    x, y = frame.to_local(a.lon, a.lat)
    return Approach(a.key, a.name, x, y, a.heading_deg, a.radius_m, lon=a.lon, lat=a.lat)


def _fingerprint(stored: list[StudyApproach]) -> tuple:
    return tuple((a.key, a.name, a.lon, a.lat, a.heading_deg, a.radius_m) for a in stored)


def outside_view(approaches: list, points: np.ndarray, margin_m: float = 30.0) -> list[tuple[Any, float]]:
    """Approaches farther than their radius + ``margin_m`` from every tracked position: drawn outside the view."""
    out = []
    for a in approaches:
        d = float(np.min(np.hypot(points[:, 0] - a.x, points[:, 1] - a.y))) if len(points) else math.inf
        if d > a.radius_m + margin_m:
            out.append((a, d))
    return out


def run_study(db: Session, run: ProcessingRun, bin_s: float = 900.0) -> StudyResult:
    """The study of ``run`` with its site's approaches (cached per run, approaches and bin)."""
    from tracking.study import StudyConfig, StudyInputError, compute_study, trajectories_from_rows

    site = site_of_run(db, run)
    stored = site_approaches(db, site)
    n_rows = db.scalar(select(func.count()).select_from(TrackSpeed).join(TrackRow).where(TrackRow.run_id == run.id))
    key = (str(db.get_bind().engine.url), run.id, run.status, run.finished_at, n_rows, _fingerprint(stored), bin_s)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    result = StudyResult(run.id, site, saved=bool(stored))
    if run.status not in ("complete", "superseded"):
        result.message = f"run {run.id} is {run.status}: a study needs the finished run"
        return result
    rows, result.track_ids = _rows(db, run)
    if not rows:
        result.message = (
            f"run {run.id} has no map positions (no telemetry and no georeferenced calibration): a study needs "
            "every vehicle's ground position; process the flight with its flight log or a georeferenced "
            "--calibration"
            if result.track_ids
            else f"run {run.id} has no counted vehicles: nothing to study"
        )
        return result
    lon = np.array([r["lon"] for r in rows])
    lat = np.array([r["lat"] for r in rows])
    frame = LocalFrame(float(np.median(lon)), float(np.median(lat)))
    for r in rows:
        r["x_m"], r["y_m"] = frame.to_local(r["lon"], r["lat"])
    result.frame = frame
    try:
        trajectories = trajectories_from_rows(rows)
        config = StudyConfig(bin_s=bin_s)
        approaches = [_approach(a, frame) for a in stored] or None
        if approaches:
            points = np.array([(r["x_m"], r["y_m"]) for r in rows])
            far = outside_view(approaches, points)
            for a, d in far:
                result.notes.append(
                    f"approach {a.id} ({a.name}) lies {d:.0f} m from the nearest vehicle this flight tracked: "
                    "outside its view, so it is left out of this run's study; drag it onto a road the vehicles use"
                )
            approaches = [a for a in approaches if all(a is not b for b, _d in far)]
            if not approaches:
                raise StudyInputError(
                    f"every approach of this site lies outside the view of run {run.id}: drag them onto the roads "
                    "its vehicles use, or reset them to the ones found from its trajectories"
                )
        result.study = compute_study(trajectories, approaches=approaches, config=config)
    except StudyInputError as exc:
        result.message = str(exc).splitlines()[0]
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


# -- what the pages show, from a study ---------------------------------------------------------------------------


def approach_rows(result: StudyResult) -> list[dict]:
    s, frame = result.study, result.frame
    out = []
    for a in s.approaches if s is not None else []:
        lon, lat = (a.lon, a.lat) if a.lon is not None and a.lat is not None else _lonlat(frame, a.x, a.y)
        out.append(
            {
                "key": a.id,
                "name": a.name,
                "lon": lon,
                "lat": lat,
                "heading_deg": round(float(a.heading_deg), 1),
                "radius_m": round(float(a.radius_m), 1),
            }
        )
    return out


def _lonlat(frame: LocalFrame | None, x: float, y: float) -> tuple[float | None, float | None]:
    if frame is None:
        return None, None
    return frame.lon0 + x / frame.kx, frame.lat0 + y / frame.ky


def od_matrix(study) -> tuple[list[str], list[list[int]]]:
    """Origins x destinations (approach ids, then ``mid-view`` for vehicles that entered or left inside the view;
    every moving vehicle is in it, those seen only mid-view in the mid-view corner; parked ones are not)."""
    keys = [a.id for a in study.approaches]
    labels = keys + [MID_VIEW]
    index = {k: i for i, k in enumerate(keys)}
    m = [[0] * len(labels) for _ in labels]
    for v in study.vehicles:
        if v.movement == "stationary":
            continue
        m[index.get(v.origin, len(keys))][index.get(v.destination, len(keys))] += 1
    return labels, m


def movement_counts(study) -> list[dict]:
    """Vehicles per (origin, destination, movement), the arrows of the movement diagram."""
    n: dict[tuple, int] = defaultdict(int)
    for v in study.vehicles:
        if v.origin is not None and v.destination is not None:
            n[(v.origin, v.destination, v.movement)] += 1
    return [{"origin": o, "destination": d, "movement": mv, "vehicles": k} for (o, d, mv), k in sorted(n.items())]


def movement_series(study) -> tuple[list[float], dict[str, list[int]]]:
    """Vehicles per movement (``A→B right``) per time bin of their entry."""
    bin_s, t0, t1 = float(study.bin_s), float(study.t0), float(study.t1)
    n_bins = max(1, int(math.ceil((t1 - t0) / bin_s - 1e-9)))
    series: dict[str, list[int]] = {}
    for v in study.vehicles:
        if v.origin is None or v.destination is None:
            continue
        name = f"{v.origin}→{v.destination} {v.movement}"
        k = min(n_bins - 1, max(0, int((v.entry_t - t0) // bin_s)))
        series.setdefault(name, [0] * n_bins)[k] += 1
    return [t0 + i * bin_s for i in range(n_bins)], dict(sorted(series.items()))


def _bezier(p0: np.ndarray, c: np.ndarray, p1: np.ndarray, n: int = 16) -> np.ndarray:
    t = np.linspace(0, 1, n)[:, None]
    return (1 - t) ** 2 * p0 + 2 * (1 - t) * t * c + t**2 * p1


def movement_arrows(study) -> list[dict]:
    """Each movement as a curve (ground metres) from its origin approach through the junction to its destination,
    kept to the right of the road's centre (right-hand traffic) so opposite flows do not overlap; ``width`` 0..1 is
    its share of the busiest movement (the drawing scales it)."""
    by_id = {a.id: a for a in study.approaches}
    moves = movement_counts(study)
    if not moves or not by_id:
        return []
    centre = np.mean([[a.x, a.y] for a in study.approaches], axis=0)
    top = max(m["vehicles"] for m in moves)
    out = []
    for m in moves:
        a, b = by_id.get(m["origin"]), by_id.get(m["destination"])
        if a is None or b is None:
            continue
        ua, ub = a.inbound, b.inbound  # into the junction along each leg
        right_a, left_b = np.array([ua[1], -ua[0]]), np.array([-ub[1], ub[0]])
        off_a, off_b = 0.3 * a.radius_m, 0.3 * b.radius_m
        p0 = np.array([a.x, a.y]) + right_a * off_a
        p1 = np.array([b.x, b.y]) + left_b * off_b  # leaving: travel is -ub, its right side is ub's left
        if a.id == b.id:  # U-turn: out towards the centre and back
            c = np.array([a.x, a.y]) + ua * 2.5 * a.radius_m
        else:
            c = centre + (right_a * off_a + left_b * off_b) / 2
        pts = _bezier(p0, c, p1)
        out.append({**m, "width": m["vehicles"] / top, "xy": pts})
    return out


def arrow_head(pts: np.ndarray, size_m: float) -> np.ndarray:
    """A triangle at the end of a curve, pointing along its last segment."""
    tip, prev = pts[-1], pts[-3] if len(pts) > 2 else pts[0]
    d = tip - prev
    d = d / (np.linalg.norm(d) or 1.0)
    n = np.array([-d[1], d[0]])
    base = tip - d * size_m
    return np.array([tip + d * size_m * 0.3, base + n * size_m * 0.6, base - n * size_m * 0.6])


def map_data(result: StudyResult) -> dict:
    """The study for the page's map (lon/lat): approaches, movement arrows, conflicts."""
    s, frame = result.study, result.frame
    if s is None or frame is None:
        return {"approaches": [], "movements": [], "conflicts": []}

    def ll(xy: np.ndarray) -> list[list[float]]:
        return [[round(frame.lon0 + x / frame.kx, 8), round(frame.lat0 + y / frame.ky, 8)] for x, y in xy]

    moves = []
    for m in movement_arrows(s):
        size = 2.0 + 6.0 * m["width"]
        moves.append(
            {k: m[k] for k in ("origin", "destination", "movement", "vehicles", "width")}
            | {"coordinates": ll(m["xy"]), "head": ll(arrow_head(m["xy"], size))}
        )
    conflicts = []
    for i, c in enumerate(s.conflicts):
        lon, lat = (c.lon, c.lat) if c.lon is not None else _lonlat(frame, c.x, c.y)
        conflicts.append({"no": i + 1, **conflict_row(c), "lon": lon, "lat": lat})
    return {"approaches": approach_rows(result), "movements": moves, "conflicts": conflicts}


def conflict_row(c) -> dict:
    return {
        "kind": c.kind,
        "value_s": round(float(c.value_s), 2),
        "t": round(float(c.t), 2),
        "track_a": c.track_a,
        "track_b": c.track_b,
        "class_a": c.class_a,
        "class_b": c.class_b,
        "speed_a_kmh": round(float(c.speed_a_kmh), 1),
        "speed_b_kmh": round(float(c.speed_b_kmh), 1),
    }


TABLE_TITLES = {
    "turning_movements": "Turning-movement counts (per bin, movement and class)",
    "od_matrix": "Origin-destination pairs",
    "peak_hour": "Peak hour",
    "lane_flows": "Flow and speeds per lane",
    "headways": "Headways and gaps per approach",
    "section_speeds": "Section speeds between counting lines",
    "density": "Density and level of service per segment",
    "vehicles": "Vehicles: origin, destination, movement, lane",
    "conflicts": "Conflicts",
}


def table_title(name: str) -> str:
    return TABLE_TITLES.get(name, name.replace("_", " ").capitalize())


def tables(result: StudyResult) -> dict[str, list[dict]]:
    """Every table of the study, as exported: the study's own, then its vehicles, conflicts and approaches."""
    s = result.study
    if s is None:
        return {}
    out = {k: v for k, v in s.tables.items() if isinstance(v, list)}
    out.setdefault("vehicles", [v.as_row() for v in s.vehicles])
    out.setdefault("conflicts", [c.as_row() for c in s.conflicts])
    labels, m = od_matrix(s)
    out["od_matrix_grid"] = [{"origin": o, **{d: m[i][j] for j, d in enumerate(labels)}} for i, o in enumerate(labels)]
    out["approaches"] = approach_rows(result)
    return out
