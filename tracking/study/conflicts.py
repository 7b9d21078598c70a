"""Traffic conflicts (near-misses) from smoothed trajectories: time to collision (TTC) and post-encroachment
time (PET).

* **TTC**: at every instant (a common 0.1 s grid), each pair of vehicles closer than ``conflict_max_range_m`` is
  extrapolated at constant velocity, as rectangles of their class's size along their heading; the TTC is the first
  time (sampled every 0.05 s) the rectangles overlap. A pair overlapping already at that instant is skipped (a
  measurement artefact, not a conflict), and so is one whose rectangles are closer than the positions' noise (each
  grown by ``measurement_sigma_m``): a queue's cars stand that close, and their boxes' jitter gave them TTCs of a few
  hundredths of a second (seed 3's oblique intersection: 118 conflicts against the truth's 25, 39 of them such).
  Consecutive instants of one pair below ``ttc_s`` form one conflict, reported at its minimum. The first and last
  ``TRACK_END_S`` of each track are left out: the smoother's velocity there rests on one side of the data only. Two
  tracks that never moved faster than ``HEADING_MIN_SPEED`` (parked cars, whose boxes' jitter gives them speeds of a
  few km/h) are no pair.
* **PET**: where the paths of two vehicles cross at an angle of at least ``CROSSING_DEG``, the time between the
  first vehicle's rear leaving the crossing point and the second's front reaching it (centre passing times corrected
  by half a vehicle length over the speed there). Pairs below ``pet_s`` are conflicts.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from scipy.spatial import cKDTree

from tracking.study.model import Conflict, SmoothedTrack, StudyConfig

GRID_DT = 0.1
TTC_STEP_S = 0.05
CROSSING_DEG = 30.0
CELL_M = 2.0
TRACK_END_S = 0.5  # TTC is not measured this close to either end of a track
HEADING_MIN_SPEED = 1.5  # m/s; slower, the velocity direction is mostly noise: keep the last good heading
SIZE_M = {"car": (4.5, 1.8), "van": (5.4, 2.0), "truck": (9.0, 2.5), "bus": (12.0, 2.55)}


def _size(cls: str, cfg: StudyConfig) -> tuple[float, float]:
    return SIZE_M.get(cls, (cfg.vehicle_length_m, cfg.vehicle_width_m))


def _resample(smoothed: dict[int, SmoothedTrack], t0: float):
    """Every track on the common grid: arrays of (grid index, track index, x, y, vx, vy, heading unit vector)."""
    ks, ti, pos, vel, head = [], [], [], [], []
    ids = list(smoothed)
    for n, tid in enumerate(ids):
        s = smoothed[tid]
        k0 = int(math.ceil((s.t[0] - t0) / GRID_DT - 1e-9))
        k1 = int(math.floor((s.t[-1] - t0) / GRID_DT + 1e-9))
        if k1 < k0:
            continue
        k = np.arange(k0, k1 + 1)
        tq = t0 + k * GRID_DT
        p = np.column_stack([np.interp(tq, s.t, s.xy[:, 0]), np.interp(tq, s.t, s.xy[:, 1])])
        v = np.column_stack([np.interp(tq, s.t, s.velocity[:, 0]), np.interp(tq, s.t, s.velocity[:, 1])])
        sp = np.hypot(v[:, 0], v[:, 1])
        h = v / np.maximum(sp, 1e-9)[:, None]
        moving = sp > HEADING_MIN_SPEED
        if moving.any():  # a standing vehicle keeps the heading it last moved with (or will first move with)
            idx = np.where(moving, np.arange(len(sp)), -1)
            idx = np.maximum.accumulate(idx)
            idx[idx < 0] = np.flatnonzero(moving)[0]
            h = h[idx]
        else:  # never moved: heading unknown, marked by a zero vector (treated as a width x width square)
            h = np.zeros((len(sp), 2))
        ks.append(k)
        ti.append(np.full(len(k), n))
        pos.append(p)
        vel.append(v)
        head.append(h)
    if not ks:
        return ids, np.zeros(0, int), np.zeros(0, int), np.zeros((0, 2)), np.zeros((0, 2)), np.zeros((0, 2))
    return ids, np.concatenate(ks), np.concatenate(ti), np.vstack(pos), np.vstack(vel), np.vstack(head)


def _overlap(ca, ha, la, wa, cb, hb, lb, wb) -> np.ndarray:
    """Separating-axis test of oriented rectangles (centres, unit headings, lengths, widths; arrays of pairs)."""
    axes = [ha, np.column_stack([-ha[:, 1], ha[:, 0]]), hb, np.column_stack([-hb[:, 1], hb[:, 0]])]
    d = cb - ca
    sep = np.zeros(len(ca), bool)
    for ax in axes:
        proj_a = 0.5 * (
            la * np.abs(np.einsum("ij,ij->i", ha, ax)) + wa * np.abs(ha[:, 0] * ax[:, 1] - ha[:, 1] * ax[:, 0])
        )
        proj_b = 0.5 * (
            lb * np.abs(np.einsum("ij,ij->i", hb, ax)) + wb * np.abs(hb[:, 0] * ax[:, 1] - hb[:, 1] * ax[:, 0])
        )
        sep |= np.abs(np.einsum("ij,ij->i", d, ax)) > proj_a + proj_b
    return ~sep


def ttc_conflicts(
    smoothed: dict[int, SmoothedTrack], classes: dict[int, str], t0: float, cfg: StudyConfig
) -> list[Conflict]:
    ids, k, ti, pos, vel, head = _resample(smoothed, t0)
    if len(k) < 2:
        return []
    sizes = np.array([_size(classes.get(tid, ""), cfg) for tid in ids])
    # pairs at the same instant within range: a kd-tree over (x, y, instant * far)
    far = 10.0 * cfg.conflict_max_range_m
    pairs = cKDTree(np.column_stack([pos, k * far])).query_pairs(cfg.conflict_max_range_m, output_type="ndarray")
    if len(pairs) == 0:
        return []
    # the first and last instants of a track carry the smoother's least certain velocity (one-sided data)
    span = np.zeros(len(ids))
    start = np.full(len(ids), np.inf)
    np.minimum.at(start, ti, k)
    np.maximum.at(span, ti, k)
    edge = ((k - start[ti]) * GRID_DT < TRACK_END_S) | ((span[ti] - k) * GRID_DT < TRACK_END_S)
    pairs = pairs[~edge[pairs[:, 0]] & ~edge[pairs[:, 1]]]
    # two tracks that never moved (no heading: never faster than HEADING_MIN_SPEED; parked cars, whose boxes' jitter
    # gives them speeds of a few km/h in any direction) have no conflict with each other; one of them and a moving
    # vehicle may (a queue that creeps has a heading, and its TTCs are kept)
    never = ~head.any(axis=1)
    pairs = pairs[~(never[pairs[:, 0]] & never[pairs[:, 1]])]
    i, j = pairs[:, 0], pairs[:, 1]
    rel_p = pos[j] - pos[i]
    rel_v = vel[j] - vel[i]
    closing = np.einsum("ij,ij->i", rel_p, rel_v) < 0
    # disc prefilter: could the circumscribed circles meet within ttc_s?
    ra = 0.5 * np.hypot(*sizes[ti[i]].T)
    rb = 0.5 * np.hypot(*sizes[ti[j]].T)
    reach = np.linalg.norm(rel_p, axis=1) - np.linalg.norm(rel_v, axis=1) * cfg.ttc_s
    cand = np.flatnonzero(closing & (reach < ra + rb))
    if len(cand) == 0:
        return []
    i, j = i[cand], j[cand]
    la, wa = sizes[ti[i]].T
    lb, wb = sizes[ti[j]].T
    # a vehicle that never moved has no heading: a square of its width, on the axes of the other one
    unknown_a, unknown_b = ~head[i].any(axis=1), ~head[j].any(axis=1)
    la, lb = np.where(unknown_a, wa, la), np.where(unknown_b, wb, lb)
    north = np.array([[0.0, 1.0]])
    ha = np.where(unknown_a[:, None], np.where(unknown_b[:, None], north, head[j]), head[i])
    hb = np.where(unknown_b[:, None], np.where(unknown_a[:, None], north, head[i]), head[j])
    # touching now is not measured either: two rectangles closer than their positions' noise (each grown by
    # measurement_sigma_m) may as well overlap, and their TTC of a few hundredths of a second is that noise
    grow = 2 * cfg.measurement_sigma_m
    now = _overlap(pos[i], ha, la + grow, wa + grow, pos[j], hb, lb + grow, wb + grow)
    ttc = np.full(len(i), np.inf)
    for tau in np.arange(TTC_STEP_S, cfg.ttc_s + 1e-9, TTC_STEP_S):
        todo = np.isinf(ttc) & ~now
        if not todo.any():
            break
        hit = _overlap(pos[i] + vel[i] * tau, ha, la, wa, pos[j] + vel[j] * tau, hb, lb, wb)
        ttc[todo & hit] = tau
    ok = np.isfinite(ttc) & ~now
    events: dict[tuple[int, int], list[int]] = defaultdict(list)
    for n in np.flatnonzero(ok).tolist():
        a, b = int(ti[i[n]]), int(ti[j[n]])
        events[(min(a, b), max(a, b))].append(n)
    out = []
    for (a, b), members in events.items():
        members.sort(key=lambda n: k[i[n]])
        group: list[int] = []
        for n in members + [-1]:  # split a pair's instants into episodes (gaps over 1 s)
            if group and (n < 0 or (k[i[n]] - k[i[group[-1]]]) * GRID_DT > 1.0):
                best = min(group, key=lambda m: ttc[m])
                tau = ttc[best]
                pa = pos[i[best]] + vel[i[best]] * tau
                pb = pos[j[best]] + vel[j[best]] * tau
                c = (pa + pb) / 2
                ta, tb = ids[ti[i[best]]], ids[ti[j[best]]]
                out.append(
                    Conflict(
                        "ttc",
                        float(tau),
                        float(t0 + k[i[best]] * GRID_DT),
                        float(c[0]),
                        float(c[1]),
                        min(ta, tb),
                        max(ta, tb),
                        classes.get(min(ta, tb), ""),
                        classes.get(max(ta, tb), ""),
                        float(np.linalg.norm(vel[i[best]] if ta < tb else vel[j[best]]) * 3.6),
                        float(np.linalg.norm(vel[j[best]] if ta < tb else vel[i[best]]) * 3.6),
                    )
                )
                group = []
            if n >= 0:
                group.append(n)
    return out


def _path_crossing(sa: SmoothedTrack, sb: SmoothedTrack, t_lo: float, t_hi: float):
    """First crossing of the two paths (restricted to [t_lo, t_hi]): point, time and speed of each, or None."""
    ma = (sa.t >= t_lo) & (sa.t <= t_hi)
    mb = (sb.t >= t_lo) & (sb.t <= t_hi)
    ia, ib = np.flatnonzero(ma), np.flatnonzero(mb)
    if len(ia) < 2 or len(ib) < 2:
        return None
    pa, pb = sa.xy[ia], sb.xy[ib]
    p, r = pa[:-1], np.diff(pa, axis=0)
    q, s = pb[:-1], np.diff(pb, axis=0)
    den = r[:, None, 0] * s[None, :, 1] - r[:, None, 1] * s[None, :, 0]
    qp = q[None, :, :] - p[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (qp[..., 0] * s[None, :, 1] - qp[..., 1] * s[None, :, 0]) / den
        w = (qp[..., 0] * r[:, None, 1] - qp[..., 1] * r[:, None, 0]) / den
    hit = np.argwhere((np.abs(den) > 1e-12) & (u >= 0) & (u < 1) & (w >= 0) & (w < 1))
    if len(hit) == 0:
        return None
    x, y = hit[0]
    ua, wb_ = u[x, y], w[x, y]
    point = p[x] + ua * r[x]
    ka, kb = ia[x], ib[y]
    t_a = sa.t[ka] + ua * (sa.t[ka + 1] - sa.t[ka])
    t_b = sb.t[kb] + wb_ * (sb.t[kb + 1] - sb.t[kb])
    va, vb = sa.velocity[ka], sb.velocity[kb]
    return point, float(t_a), float(t_b), va, vb


def pet_conflicts(
    smoothed: dict[int, SmoothedTrack], classes: dict[int, str], t0: float, cfg: StudyConfig
) -> list[Conflict]:
    ids, k, ti, pos, vel, head = _resample(smoothed, t0)
    if len(k) < 2:
        return []
    cells = np.floor(pos / CELL_M).astype(np.int64)
    cell_id = cells[:, 0] * 1_000_003 + cells[:, 1]
    # one entry and one exit sample per (track, cell) visit is enough to find who passed where when
    order = np.lexsort((k, ti, cell_id))
    c_s, t_s = cell_id[order], ti[order]
    first = np.ones(len(order), bool)
    first[1:] = (c_s[1:] != c_s[:-1]) | (t_s[1:] != t_s[:-1])
    last = np.ones(len(order), bool)
    last[:-1] = first[1:]
    keep = order[first | last]
    o2 = keep[np.lexsort((k[keep], cell_id[keep]))]
    window = (cfg.pet_s + 3.0) / GRID_DT
    cos_lim = math.cos(math.radians(CROSSING_DEG))
    cand: dict[tuple[int, int], int] = {}
    for off in range(1, 24):
        a, b = o2[:-off], o2[off:]
        same = (cell_id[a] == cell_id[b]) & (ti[a] != ti[b]) & (np.abs(k[b] - k[a]) <= window)
        known = head[a].any(axis=1) & head[b].any(axis=1)
        crossing = known & (np.abs(np.einsum("ij,ij->i", head[a], head[b])) < cos_lim)
        for x, y in zip(a[same & crossing].tolist(), b[same & crossing].tolist()):
            key = (int(min(ti[x], ti[y])), int(max(ti[x], ti[y])))
            cand.setdefault(key, int(k[x]))
    out = []
    for (na, nb), kk in cand.items():
        ta_id, tb_id = ids[na], ids[nb]
        sa, sb = smoothed[ta_id], smoothed[tb_id]
        tc = t0 + kk * GRID_DT
        hit = _path_crossing(sa, sb, tc - 6.0, tc + 6.0 + cfg.pet_s)
        if hit is None:
            continue
        point, t_a, t_b, va, vb = hit
        la = _size(classes.get(ta_id, ""), cfg)[0]
        lb = _size(classes.get(tb_id, ""), cfg)[0]
        sp_a, sp_b = max(float(np.linalg.norm(va)), 0.5), max(float(np.linalg.norm(vb)), 0.5)
        if t_a <= t_b:
            pet = (t_b - lb / 2 / sp_b) - (t_a + la / 2 / sp_a)
        else:
            pet = (t_a - la / 2 / sp_a) - (t_b + lb / 2 / sp_b)
        pet = max(pet, 0.0)
        if pet >= cfg.pet_s:
            continue
        out.append(
            Conflict(
                "pet",
                float(pet),
                float(max(t_a, t_b)),
                float(point[0]),
                float(point[1]),
                min(ta_id, tb_id),
                max(ta_id, tb_id),
                classes.get(min(ta_id, tb_id), ""),
                classes.get(max(ta_id, tb_id), ""),
                (sp_a if ta_id < tb_id else sp_b) * 3.6,
                (sp_b if ta_id < tb_id else sp_a) * 3.6,
            )
        )
    return out


def find_conflicts(
    smoothed: dict[int, SmoothedTrack], classes: dict[int, str], t0: float, cfg: StudyConfig
) -> list[Conflict]:
    """TTC and PET conflicts, by time."""
    found = ttc_conflicts(smoothed, classes, t0, cfg) + pet_conflicts(smoothed, classes, t0, cfg)
    return sorted(found, key=lambda c: (c.t, c.track_a, c.track_b, c.kind))
