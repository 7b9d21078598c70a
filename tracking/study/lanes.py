"""Lanes of each approach by clustering the lateral offsets of its vehicles.

Each vehicle with an origin gets its lateral offset from the approach's axis (median over its samples on the
approach, before it starts to turn). The offsets of an approach are clustered in one dimension: peaks of a Gaussian
kernel density (scipy) at least ``2 * lane_gap_m`` apart, each vehicle to the nearest peak. Lane 1 is the leftmost
lane in the direction of travel (nearest the road centre in right-hand traffic).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import gaussian_kde

from tracking.study.model import Approach, Lane, SmoothedTrack, StudyConfig, VehicleMovement

ON_APPROACH_DEG = 20.0  # samples heading within this of the approach count as "still on the approach"
KDE_BANDWIDTH_M = 0.5


def lateral_offset(s: SmoothedTrack, a: Approach) -> float | None:
    """Median offset (m, positive = right of the inbound direction) of the track's samples while on approach ``a``."""
    axis = a.inbound
    right = np.array([axis[1], -axis[0]])
    rel = s.xy - np.array([a.x, a.y])
    v = s.velocity
    sp = np.maximum(np.hypot(v[:, 0], v[:, 1]), 1e-6)
    cos = (v @ axis) / sp
    on = (cos >= np.cos(np.radians(ON_APPROACH_DEG))) & (sp > 0.5)
    idx = np.flatnonzero(on)
    if len(idx) == 0:
        return None
    # from the first sample on the approach until it first turns away
    stop = np.flatnonzero(~on[idx[0] :])
    last = idx[0] + (stop[0] if len(stop) else len(on) - idx[0])
    seg = rel[idx[0] : last]
    return float(np.median(seg @ right))


def lane_centres(offsets: np.ndarray, cfg: StudyConfig) -> np.ndarray:
    """Lane centre offsets (ascending) from the vehicles' lateral offsets."""
    if len(offsets) == 0:
        return np.zeros(0)
    if len(offsets) < 3 or np.ptp(offsets) < cfg.lane_gap_m:
        return np.array([float(np.median(offsets))])
    grid = np.arange(offsets.min() - 2.0, offsets.max() + 2.0, 0.1)
    bw = KDE_BANDWIDTH_M / max(float(np.std(offsets)), 1e-3)
    dens = gaussian_kde(offsets, bw_method=bw)(grid)
    peaks = [i for i in range(1, len(grid) - 1) if dens[i] >= dens[i - 1] and dens[i] > dens[i + 1]]
    peaks = [i for i in peaks if dens[i] >= 0.15 * dens.max()]
    peaks.sort(key=lambda i: -dens[i])
    kept: list[float] = []
    for i in peaks:  # strongest first; a weaker peak closer than two lane gaps is the same lane
        if all(abs(grid[i] - k) >= 2 * cfg.lane_gap_m for k in kept):
            kept.append(float(grid[i]))
    return np.sort(np.array(kept))


def assign_lanes(
    vehicles: list[VehicleMovement], smoothed: dict[int, SmoothedTrack], approaches: list[Approach], cfg: StudyConfig
) -> list[Lane]:
    """Set ``lane`` on every vehicle with an origin; return the lanes found per approach."""
    by_id = {a.id: a for a in approaches}
    lanes: list[Lane] = []
    for a in approaches:
        members = [v for v in vehicles if v.origin == a.id and v.track_id in smoothed]
        offs, who = [], []
        for v in members:
            o = lateral_offset(smoothed[v.track_id], by_id[a.id])
            if o is not None:
                offs.append(o)
                who.append(v)
        centres = lane_centres(np.array(offs), cfg)
        if len(centres) == 0:
            continue
        counts = np.zeros(len(centres), int)
        for o, v in zip(offs, who):
            k = int(np.argmin(np.abs(centres - o)))
            v.lane = k + 1
            counts[k] += 1
        axis = a.inbound
        right = np.array([axis[1], -axis[0]])
        for k, c in enumerate(centres):
            p0 = np.array([a.x, a.y]) + right * c
            lanes.append(Lane(a.id, k + 1, float(c), int(counts[k]), np.vstack([p0, p0 + axis * cfg.segment_length_m])))
    return lanes
