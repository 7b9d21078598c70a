"""Speed error of matched vehicles: the tracker's speed against the true speed, frame by frame."""

from __future__ import annotations

import numpy as np

from tracking.evaluation.mot import Match

MIN_TRUE_KMH_FOR_PERCENT = 10.0  # relative errors of nearly standing vehicles mean nothing


def _stats(err: np.ndarray, true: np.ndarray) -> dict:
    if not len(err):
        return {"n": 0}
    a = np.abs(err)
    out = {
        "n": int(len(err)),
        "mae_kmh": float(a.mean()),
        "rmse_kmh": float(np.sqrt((err**2).mean())),
        "p95_abs_kmh": float(np.percentile(a, 95)),
        "bias_kmh": float(err.mean()),
    }
    rel = true >= MIN_TRUE_KMH_FOR_PERCENT
    if rel.any():
        pct = a[rel] / true[rel] * 100.0
        out.update(
            {"mape_pct": float(pct.mean()), "p95_abs_pct": float(np.percentile(pct, 95)), "n_pct": int(rel.sum())}
        )
    return out


def speed_errors(
    matches: list[Match],
    pred_speed: dict[tuple[int, int], float],
    true_speed: dict[tuple[int, int], float],
    true_moving: dict[tuple[int, int], bool] | None,
    track_first_frame: dict[int, int],
    fps: float,
    min_track_s: float = 1.0,
) -> dict:
    """Errors over matched (frame, gt, track) pairs whose track is at least ``min_track_s`` old and has a speed.

    Returns overall statistics plus the same for moving and for standing vehicles (true speed), and coverage:
    the share of eligible matches for which the tracker gave any speed.
    """
    err, true, moving = [], [], []
    eligible = 0
    for m in matches:
        if (m.frame, m.gt_id) not in true_speed:
            continue
        age_s = (m.frame - track_first_frame.get(m.track_id, m.frame)) / fps
        if age_s < min_track_s:
            continue
        eligible += 1
        p = pred_speed.get((m.frame, m.track_id))
        if p is None:
            continue
        t = true_speed[(m.frame, m.gt_id)]
        err.append(p - t)
        true.append(t)
        mv = true_moving.get((m.frame, m.gt_id)) if true_moving else None
        moving.append(t >= 4.0 if mv is None else mv)
    err_a, true_a, mov_a = np.array(err), np.array(true), np.array(moving, bool)
    out = _stats(err_a, true_a)
    out["eligible_matches"] = eligible
    out["coverage"] = (len(err) / eligible) if eligible else None
    out["min_track_s"] = min_track_s
    out["moving"] = _stats(err_a[mov_a], true_a[mov_a]) if len(err) else {"n": 0}
    out["standing"] = _stats(err_a[~mov_a], true_a[~mov_a]) if len(err) else {"n": 0}
    return out
