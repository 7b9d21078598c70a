"""``compute_study``: a traffic study from a flight's trajectories (smoothing, approaches, movements, lanes,
tables, conflicts)."""

from __future__ import annotations

import math

import numpy as np

from tracking.study import tables
from tracking.study.approaches import approaches_from_smoothed
from tracking.study.conflicts import find_conflicts
from tracking.study.lanes import assign_lanes
from tracking.study.model import Approach, Study, StudyConfig, StudyInputError, Trajectory
from tracking.study.movements import assign_movements
from tracking.study.smoothing import smooth_trajectories

SHORT_BINS_S = (900.0, 600.0, 300.0, 120.0, 60.0, 30.0, 10.0)


def fit_georef(trajs: list[Trajectory]) -> np.ndarray | None:
    """Affine ground xy -> lon/lat fitted on every point that has both (None without lon/lat). Over a drone's view
    (a few hundred metres) the map projection is affine to well under a centimetre."""
    xy = [tr.xy for tr in trajs if tr.lonlat is not None]
    ll = [tr.lonlat for tr in trajs if tr.lonlat is not None]
    if not xy:
        return None
    X, L = np.vstack(xy), np.vstack(ll)
    if len(X) < 3 or np.linalg.matrix_rank(X - X.mean(axis=0)) < 2:
        return None
    A = np.column_stack([X, np.ones(len(X))])
    coef, *_ = np.linalg.lstsq(A, L, rcond=None)
    return coef


def effective_bin(duration_s: float, cfg: StudyConfig, warnings: list[str]) -> float:
    """The configured bin, or for a flight shorter than one bin the longest standard bin that fits (at least
    ``min_bin_s``; a flight shorter than that is one bin)."""
    if duration_s >= cfg.bin_s - 1e-6:
        return cfg.bin_s
    fitting = [b for b in SHORT_BINS_S if b <= duration_s + 1e-6 and b >= cfg.min_bin_s]
    chosen = fitting[0] if fitting else max(duration_s, 1e-3)
    warnings.append(
        f"the flight lasts {duration_s:.0f} s, shorter than one {cfg.bin_s:.0f} s bin: tables use {chosen:.0f} s bins"
    )
    return chosen


def place_approaches(
    approaches: list[Approach], georef: np.ndarray | None, area_points: np.ndarray, cfg: StudyConfig
) -> list[Approach]:
    """Give lon/lat-only approaches ground coordinates, and reject approaches outside the observed area."""
    from tracking.study.approaches import ObservedArea

    area = ObservedArea(area_points)
    out = []
    for a in approaches:
        if math.isnan(a.x) or math.isnan(a.y):
            if georef is None or a.lon is None or a.lat is None:
                raise StudyInputError(f"approach {a.id} ({a.name}) has lon/lat but the run has no georeference")
            M = georef[:2].T  # lon/lat = M @ xy + c
            c = georef[2]
            x, y = np.linalg.solve(M, np.array([a.lon, a.lat]) - c)
            a = Approach(a.id, a.name, float(x), float(y), a.heading_deg, a.radius_m, a.lon, a.lat)
        d = float(area.edge_distance(np.array([[a.x, a.y]]))[0])
        if d < -(a.radius_m + 2 * cfg.edge_margin_m):
            raise StudyInputError(f"approach {a.id} ({a.name}) lies {-d:.0f} m outside the area the flight observed")
        out.append(a)
    return out


def compute_study(
    trajs: list[Trajectory], approaches: list[Approach] | None, config: StudyConfig | None = None
) -> Study:
    """The traffic study of one flight. ``approaches`` None: found from the trajectories (:mod:`.approaches`)."""
    cfg = config or StudyConfig()
    warnings: list[str] = []
    usable = [tr for tr in trajs if len(tr.t) >= 2 and float(np.ptp(tr.t)) >= cfg.min_track_s]
    if len(usable) < len(trajs):
        warnings.append(f"{len(trajs) - len(usable)} tracks shorter than {cfg.min_track_s:g} s left out")
    if not usable:
        raise StudyInputError("no trajectories with ground coordinates long enough for a study")
    t0 = min(float(tr.t[0]) for tr in usable)
    t1 = max(float(tr.t[-1]) for tr in usable)
    bin_s = effective_bin(t1 - t0, cfg, warnings)
    georef = fit_georef(usable)
    classes = {tr.track_id: tr.vehicle_class for tr in usable}
    smoothed = smooth_trajectories(usable, cfg.measurement_sigma_m, cfg.jerk_psd)
    found, area = approaches_from_smoothed(smoothed, cfg)
    if approaches is None:
        approaches = found
        if not approaches:
            warnings.append("no approaches found: too few tracks enter or leave the view")
    else:
        approaches = place_approaches(approaches, georef, area.points, cfg)
    if georef is not None:
        for a in approaches:
            if a.lon is None or a.lat is None:
                a.lon, a.lat = (float(v) for v in np.array([a.x, a.y, 1.0]) @ georef)
    vehicles = assign_movements(smoothed, classes, approaches, area, t0, t1, cfg)
    lanes = assign_lanes(vehicles, smoothed, approaches, cfg)
    hits = tables.approach_crossings(vehicles, smoothed, approaches)
    hw_hist, hw_stats = tables.headways(hits)
    sec_rows, sec_summary = tables.section_speeds(vehicles, smoothed, cfg.counting_lines, t0, t1, bin_s)
    table_rows = {
        "turning_movements": tables.turning_movements(vehicles, approaches, t0, t1, bin_s),
        "od_matrix": tables.od_matrix(vehicles, approaches),
        "peak_hour": tables.peak_hour(vehicles, t0, t1, bin_s, warnings),
        "lane_flows": tables.lane_flows(hits, lanes, t0, t1, bin_s),
        "headways": hw_hist,
        "headway_stats": hw_stats,
        "section_speeds": sec_rows,
        "section_speed_summary": sec_summary,
        "density": tables.density(vehicles, smoothed, approaches, lanes, area, t0, t1, bin_s, cfg, warnings),
        "vehicles": [v.as_row() for v in vehicles],
    }
    conflicts = find_conflicts(smoothed, classes, t0, cfg)
    if georef is not None:
        for c in conflicts:
            c.lon, c.lat = (float(v) for v in np.array([c.x, c.y, 1.0]) @ georef)
    table_rows["conflicts"] = [c.as_row() for c in conflicts]
    partial = sum(v.movement in ("entered_mid_view", "left_mid_view", "mid_view_only") for v in vehicles)
    if partial:
        warnings.append(f"{partial} of {len(vehicles)} vehicles entered or left in mid-view (counted as such)")
    return Study(
        approaches=approaches,
        vehicles=vehicles,
        smoothed=smoothed,
        tables=table_rows,
        conflicts=conflicts,
        warnings=warnings,
        lanes=lanes,
        config=cfg,
        bin_s=bin_s,
        t0=t0,
        t1=t1,
        georef=georef,
    )
