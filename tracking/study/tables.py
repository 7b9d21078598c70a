"""The study's tables: every one a list of flat rows (dicts), written as CSV by :mod:`tracking.study.io`.

Layout of each table: docs/study.md. Times are seconds of the flight (``t`` of tracks.csv); speeds km/h.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from tracking.study.approaches import ObservedArea
from tracking.study.model import (
    MOVEMENTS,
    Approach,
    CountingLine,
    Lane,
    SmoothedTrack,
    StudyConfig,
    VehicleMovement,
)

HEADWAY_EDGES_S = (0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, math.inf)
# Level of service by density, veh/km/lane (HCM basic freeway segment thresholds 11/18/26/35/45 pc/mi/ln)
LOS_DENSITY = ((7.0, "A"), (11.0, "B"), (16.0, "C"), (22.0, "D"), (28.0, "E"), (math.inf, "F"))
VEHICLE_LENGTH_M = {"car": 4.5, "van": 5.5, "truck": 10.0, "bus": 12.0}
REFERENCE_IN_M = 12.0  # lane flows and headways are measured where vehicles cross a line this far into an approach


def bins(t0: float, t1: float, bin_s: float) -> list[tuple[float, float]]:
    n = max(1, int(math.ceil((t1 - t0) / bin_s - 1e-9)))
    return [(t0 + k * bin_s, min(t0 + (k + 1) * bin_s, t1)) for k in range(n)]


def bin_index(t: float, t0: float, bin_s: float, n: int) -> int:
    return min(max(int((t - t0) // bin_s), 0), n - 1)


def los(density: float) -> str:
    return next(letter for limit, letter in LOS_DENSITY if density <= limit)


def turning_movements(
    vehicles: list[VehicleMovement], approaches: list[Approach], t0: float, t1: float, bin_s: float
) -> list[dict[str, Any]]:
    """One row per bin x (origin, destination, movement) x class; every combination seen in the flight appears in
    every bin (zeros included), vehicles counted in the bin of their entry time."""
    names = {a.id: a.name for a in approaches}
    spans = bins(t0, t1, bin_s)
    counts: Counter = Counter()
    inferred: Counter = Counter()
    combos = set()
    for v in vehicles:
        key = (v.origin or "", v.destination or "", v.movement, v.vehicle_class)
        combos.add(key)
        counts[(bin_index(v.entry_t, t0, bin_s, len(spans)), *key)] += 1
        inferred[(bin_index(v.entry_t, t0, bin_s, len(spans)), *key)] += v.origin_inferred or v.destination_inferred
    order = {m: k for k, m in enumerate(MOVEMENTS)}
    rows = []
    for b, (lo, hi) in enumerate(spans):
        for o, d, m, c in sorted(combos, key=lambda k: (order.get(k[2], 99), k)):
            rows.append(
                {
                    "bin_start_s": round(lo, 2),
                    "bin_end_s": round(hi, 2),
                    "origin": o,
                    "origin_name": names.get(o, ""),
                    "destination": d,
                    "destination_name": names.get(d, ""),
                    "movement": m,
                    "vehicle_class": c,
                    "count": counts[(b, o, d, m, c)],
                    # of those, vehicles whose origin or destination was inferred (heading and lane at the flight's
                    # start or end)
                    "inferred": inferred[(b, o, d, m, c)],
                }
            )
    return rows


def od_matrix(vehicles: list[VehicleMovement], approaches: list[Approach]) -> list[dict[str, Any]]:
    """Origin x destination x class over the whole flight (class 'all' too); '' = not on an approach."""
    names = {a.id: a.name for a in approaches}
    counts: Counter = Counter()
    inferred: Counter = Counter()
    for v in vehicles:
        if v.movement == "stationary":
            continue
        for c in (v.vehicle_class, "all"):
            counts[(v.origin or "", v.destination or "", c)] += 1
            inferred[(v.origin or "", v.destination or "", c)] += v.origin_inferred or v.destination_inferred
    return [
        {
            "origin": o,
            "origin_name": names.get(o, ""),
            "destination": d,
            "destination_name": names.get(d, ""),
            "vehicle_class": c,
            "count": n,
            "inferred": inferred[(o, d, c)],
        }
        for (o, d, c), n in sorted(counts.items())
    ]


def peak_hour(
    vehicles: list[VehicleMovement], t0: float, t1: float, bin_s: float, warnings: list[str]
) -> list[dict[str, Any]]:
    """Peak-hour volume and peak-hour factor per movement and in total (flights of at least one hour)."""
    if t1 - t0 < 3600.0 - 1e-6:
        warnings.append(f"no peak-hour factor: the flight lasts {(t1 - t0) / 60:.1f} min, less than one hour")
        return []
    per_hour = max(1, int(round(3600.0 / bin_s)))
    spans = bins(t0, t1, bin_s)
    series: dict[tuple[str, str, str], np.ndarray] = defaultdict(lambda: np.zeros(len(spans)))
    for v in vehicles:
        if v.movement in MOVEMENTS:
            b = bin_index(v.entry_t, t0, bin_s, len(spans))
            series[(v.origin or "", v.destination or "", v.movement)][b] += 1
            series[("", "", "all")][b] += 1
    total = series[("", "", "all")]
    windows = [total[k : k + per_hour].sum() for k in range(len(spans) - per_hour + 1)]
    k0 = int(np.argmax(windows))
    rows = []
    for (o, d, m), s in sorted(series.items()):
        hour = s[k0 : k0 + per_hour]
        vol, peak = float(hour.sum()), float(hour.max())
        rows.append(
            {
                "origin": o,
                "destination": d,
                "movement": m,
                "peak_hour_start_s": round(spans[k0][0], 2),
                "peak_hour_volume": int(vol),
                "peak_bin_volume": int(peak),
                "peak_hour_factor": round(vol / (per_hour * peak), 3) if peak > 0 else "",
            }
        )
    return rows


def crossings(s: SmoothedTrack, a: np.ndarray, b: np.ndarray) -> list[tuple[float, float, int]]:
    """Times (interpolated), speeds (m/s) and sample index where the track crosses segment a-b."""
    p, q = s.xy[:-1], s.xy[1:]
    d = q - p
    e = b - a
    den = d[:, 0] * e[1] - d[:, 1] * e[0]
    ok = np.abs(den) > 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        u = ((a[0] - p[:, 0]) * e[1] - (a[1] - p[:, 1]) * e[0]) / den  # along the track step
        w = ((a[0] - p[:, 0]) * d[:, 1] - (a[1] - p[:, 1]) * d[:, 0]) / den  # along the segment
    hit = np.flatnonzero(ok & (u >= 0) & (u < 1) & (w >= 0) & (w <= 1))
    sp = s.speed
    return [
        (float(s.t[i] + u[i] * (s.t[i + 1] - s.t[i])), float(sp[i] + u[i] * (sp[i + 1] - sp[i])), int(i)) for i in hit
    ]


def reference_line(a: Approach) -> tuple[np.ndarray, np.ndarray]:
    axis = a.inbound
    right = np.array([axis[1], -axis[0]])
    c = np.array([a.x, a.y]) + axis * REFERENCE_IN_M
    return c - right * a.radius_m, c + right * a.radius_m


def approach_crossings(
    vehicles: list[VehicleMovement], smoothed: dict[int, SmoothedTrack], approaches: list[Approach]
) -> dict[str, list[tuple[float, float, VehicleMovement]]]:
    """Per approach: (time, speed m/s, vehicle) of each inbound vehicle crossing its reference line, by time."""
    out: dict[str, list[tuple[float, float, VehicleMovement]]] = {}
    for a in approaches:
        la, lb = reference_line(a)
        hits = []
        for v in vehicles:
            if v.origin != a.id or v.track_id not in smoothed:
                continue
            s = smoothed[v.track_id]
            for t, sp, i in crossings(s, la, lb):
                if float(s.velocity[i] @ a.inbound) > 0:  # inbound direction only
                    hits.append((t, sp, v))
                    break
        out[a.id] = sorted(hits, key=lambda h: h[0])
    return out


def lane_flows(
    hits: dict[str, list[tuple[float, float, VehicleMovement]]], lanes: list[Lane], t0: float, t1: float, bin_s: float
) -> list[dict[str, Any]]:
    """Per bin x approach x lane: vehicles crossing the reference line, flow, time-mean and space-mean speed."""
    spans = bins(t0, t1, bin_s)
    rows = []
    for ln in lanes:
        per_bin: dict[int, list[float]] = defaultdict(list)
        for t, sp, v in hits.get(ln.approach, []):
            if v.lane == ln.lane:
                per_bin[bin_index(t, t0, bin_s, len(spans))].append(sp * 3.6)
        for b, (lo, hi) in enumerate(spans):
            spot = np.array(per_bin.get(b, []))
            moving = spot[spot > 1.0]
            rows.append(
                {
                    "bin_start_s": round(lo, 2),
                    "bin_end_s": round(hi, 2),
                    "approach": ln.approach,
                    "lane": ln.lane,
                    "vehicles": len(spot),
                    "flow_veh_h": round(len(spot) * 3600.0 / max(hi - lo, 1e-9), 1),
                    "time_mean_speed_kmh": round(float(moving.mean()), 1) if len(moving) else "",
                    "space_mean_speed_kmh": round(float(len(moving) / np.sum(1.0 / moving)), 1) if len(moving) else "",
                }
            )
    return rows


def headways(
    hits: dict[str, list[tuple[float, float, VehicleMovement]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Headway (front to front) and gap (rear to front) distributions per approach and lane at its reference line:
    histogram rows and summary rows."""
    hist_rows, stat_rows = [], []
    for approach, h in hits.items():
        by_lane: dict[int | None, list[tuple[float, float, VehicleMovement]]] = defaultdict(list)
        for item in h:
            by_lane[item[2].lane].append(item)
        for lane, items in sorted(by_lane.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
            hw, gp = [], []
            for (ta, sa, va), (tb, sb, _vb) in zip(items, items[1:]):
                hw.append(tb - ta)
                clear = VEHICLE_LENGTH_M.get(va.vehicle_class, 4.5) / max(sa, 0.5)
                gp.append(max(tb - ta - clear, 0.0))
            lane_label = "" if lane is None else lane
            for lo, hi in zip(HEADWAY_EDGES_S, HEADWAY_EDGES_S[1:]):
                hist_rows.append(
                    {
                        "approach": approach,
                        "lane": lane_label,
                        "from_s": lo,
                        "to_s": "" if math.isinf(hi) else hi,
                        "headways": int(sum(lo <= x < hi for x in hw)),
                        "gaps": int(sum(lo <= x < hi for x in gp)),
                    }
                )
            for name, xs in (("headway", hw), ("gap", gp)):
                arr = np.array(xs)
                stat_rows.append(
                    {
                        "approach": approach,
                        "lane": lane_label,
                        "measure": name,
                        "n": len(arr),
                        "mean_s": round(float(arr.mean()), 2) if len(arr) else "",
                        "p15_s": round(float(np.percentile(arr, 15)), 2) if len(arr) else "",
                        "median_s": round(float(np.median(arr)), 2) if len(arr) else "",
                        "p85_s": round(float(np.percentile(arr, 85)), 2) if len(arr) else "",
                    }
                )
    return hist_rows, stat_rows


def section_speeds(
    vehicles: list[VehicleMovement],
    smoothed: dict[int, SmoothedTrack],
    lines: list[CountingLine],
    t0: float,
    t1: float,
    bin_s: float,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per vehicle crossing two consecutive counting lines (1->2, 3->4, ...): travel time, path length, speed; and
    per bin the mean (time-mean) and harmonic-mean (space-mean) section speed."""
    rows: list[dict[str, Any]] = []
    cls = {v.track_id: v.vehicle_class for v in vehicles}
    for k in range(0, len(lines) - 1, 2):
        la, lb = lines[k], lines[k + 1]
        name = f"{la.name}->{lb.name}"
        for tid, s in smoothed.items():
            ca = crossings(s, np.array(la.a, float), np.array(la.b, float))
            cb = crossings(s, np.array(lb.a, float), np.array(lb.b, float))
            if not ca or not cb:
                continue
            (ta, _, ia), (tb, _, ib) = ca[0], cb[0]
            if tb < ta:  # crossed in the other direction: b then a
                (ta, _, ia), (tb, _, ib) = (tb, 0.0, ib), (ta, 0.0, ia)
            if tb - ta <= 0:
                continue
            cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(s.xy, axis=0), axis=1))])
            dist = float(np.interp(tb, s.t, cum) - np.interp(ta, s.t, cum))  # along the path, crossing to crossing
            rows.append(
                {
                    "section": name,
                    "track_id": tid,
                    "vehicle_class": cls.get(tid, ""),
                    "t_enter": round(ta, 2),
                    "t_exit": round(tb, 2),
                    "travel_time_s": round(tb - ta, 2),
                    "distance_m": round(dist, 1),
                    "speed_kmh": round(dist / (tb - ta) * 3.6, 1),
                }
            )
    spans = bins(t0, t1, bin_s)
    summary = []
    for name in sorted({r["section"] for r in rows}):
        for b, (lo, hi) in enumerate(spans):
            sp = np.array(
                [
                    r["speed_kmh"]
                    for r in rows
                    if r["section"] == name and bin_index(r["t_enter"], t0, bin_s, len(spans)) == b
                ]
            )
            sp = sp[sp > 0]
            summary.append(
                {
                    "section": name,
                    "bin_start_s": round(lo, 2),
                    "bin_end_s": round(hi, 2),
                    "vehicles": len(sp),
                    "time_mean_speed_kmh": round(float(sp.mean()), 1) if len(sp) else "",
                    "space_mean_speed_kmh": round(float(len(sp) / np.sum(1 / sp)), 1) if len(sp) else "",
                }
            )
    return rows, summary


def density(
    vehicles: list[VehicleMovement],
    smoothed: dict[int, SmoothedTrack],
    approaches: list[Approach],
    lanes: list[Lane],
    area: ObservedArea,
    t0: float,
    t1: float,
    bin_s: float,
    cfg: StudyConfig,
    warnings: list[str],
) -> list[dict[str, Any]]:
    """Per bin x approach: mean number of inbound vehicles on the first ``segment_length_m`` of the approach,
    density per lane and a level-of-service letter from it; only where the whole segment was in view."""
    spans = bins(t0, t1, bin_s)
    rows = []
    for a in approaches:
        n_lanes = max(1, sum(1 for ln in lanes if ln.approach == a.id))
        axis = a.inbound
        right = np.array([axis[1], -axis[0]])
        start = np.array([a.x, a.y])
        length = cfg.segment_length_m
        corners = np.array([start - right * a.radius_m, start + right * a.radius_m]) + axis * length
        if (area.edge_distance(corners + 0 * axis) < -cfg.edge_margin_m).any():
            warnings.append(f"density: approach {a.id} ({a.name}) is not {length:.0f} m long in view; no density")
            continue
        occupancy = np.zeros(len(spans))
        for v in vehicles:
            if v.origin != a.id or v.track_id not in smoothed:
                continue
            s = smoothed[v.track_id]
            rel = s.xy - start
            along, across = rel @ axis, rel @ right
            inside = (along >= 0) & (along <= length) & (np.abs(across) <= a.radius_m)
            if not inside.any():
                continue
            dt = np.gradient(s.t) if len(s.t) > 1 else np.zeros(1)
            idx = np.clip(((s.t - t0) // bin_s).astype(int), 0, len(spans) - 1)
            np.add.at(occupancy, idx[inside], dt[inside])
        for b, (lo, hi) in enumerate(spans):
            mean_veh = float(occupancy[b]) / max(hi - lo, 1e-9)
            dens = mean_veh / (length / 1000.0) / n_lanes
            rows.append(
                {
                    "bin_start_s": round(lo, 2),
                    "bin_end_s": round(hi, 2),
                    "approach": a.id,
                    "segment_m": length,
                    "lanes": n_lanes,
                    "mean_vehicles": round(mean_veh, 2),
                    "density_veh_km_lane": round(dens, 1),
                    "los": los(dens),
                }
            )
    return rows
