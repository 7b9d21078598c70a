"""CLEAR-MOT and identity metrics through ``motmetrics`` (and HOTA through TrackEval when it is installed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracking.evaluation.io import Boxes


def motmetrics():
    """Import motmetrics; it still calls ``np.asfarray``, which NumPy 2 removed."""
    if not hasattr(np, "asfarray"):
        setattr(np, "asfarray", lambda a, dtype=np.float64: np.asarray(a, dtype=dtype))
    import motmetrics as mm

    return mm


def centre_inside(xywh: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """Which boxes have their centre inside any of the regions (both left, top, width, height)."""
    if not len(xywh) or not len(regions):
        return np.zeros(len(xywh), bool)
    cx = xywh[:, 0] + xywh[:, 2] / 2
    cy = xywh[:, 1] + xywh[:, 3] / 2
    r = regions
    inside = (
        (cx[:, None] >= r[None, :, 0])
        & (cx[:, None] <= r[None, :, 0] + r[None, :, 2])
        & (cy[:, None] >= r[None, :, 1])
        & (cy[:, None] <= r[None, :, 1] + r[None, :, 3])
    )
    return inside.any(axis=1)


def drop_ignored(boxes: Boxes, ignore: Boxes) -> tuple[Boxes, int]:
    """Boxes whose centre lies in an ignore region of their frame removed; also returns how many."""
    if not len(ignore) or not len(boxes):
        return boxes, 0
    regions = ignore.by_frame()
    drop = np.zeros(len(boxes), bool)
    for f, rows in boxes.by_frame().items():
        if f in regions:
            drop[rows] = centre_inside(boxes.xywh[rows], ignore.xywh[regions[f]])
    return boxes.subset(~drop), int(drop.sum())


@dataclass
class Match:
    frame: int
    gt_id: int
    track_id: int
    iou: float


def iou_xywh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of two sets of (left, top, width, height) boxes."""
    ax1, ay1, ax2, ay2 = a[:, 0], a[:, 1], a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax2[:, None], bx2[None]) - np.maximum(ax1[:, None], bx1[None]), 0, None)
    ih = np.clip(np.minimum(ay2[:, None], by2[None]) - np.maximum(ay1[:, None], by1[None]), 0, None)
    inter = iw * ih
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


METRICS = [
    "num_frames",
    "num_objects",
    "num_predictions",
    "num_unique_objects",
    "num_matches",
    "num_false_positives",
    "num_misses",
    "num_switches",
    "num_fragmentations",
    "mostly_tracked",
    "partially_tracked",
    "mostly_lost",
    "precision",
    "recall",
    "mota",
    "motp",
    "idf1",
    "idp",
    "idr",
]


def mot_metrics(gt: Boxes, pred: Boxes, iou_threshold: float = 0.5) -> tuple[dict, list[Match]]:
    """CLEAR-MOT / identity metrics over every frame that has ground truth or predictions, and the per-frame
    matches (a prediction matches a ground-truth box when IoU >= ``iou_threshold``)."""
    mm = motmetrics()
    acc = mm.MOTAccumulator(auto_id=False)
    g_rows, p_rows = gt.by_frame(), pred.by_frame()
    frames = sorted(set(g_rows) | set(p_rows))
    empty = np.zeros(0, np.int64)
    for f in frames:
        gi, pi = g_rows.get(f, empty), p_rows.get(f, empty)
        d = (
            mm.distances.iou_matrix(gt.xywh[gi], pred.xywh[pi], max_iou=1.0 - iou_threshold)
            if len(gi) and len(pi)
            else np.empty((len(gi), len(pi)))
        )
        acc.update(gt.ids[gi].tolist(), pred.ids[pi].tolist(), d, frameid=f)
    mh = mm.metrics.create()
    summary = mh.compute(acc, metrics=METRICS, name="run")
    out = {k: _plain(summary[k].iloc[0]) for k in METRICS}
    out["motp_iou"] = None if out["motp"] is None else 1.0 - out["motp"]  # motmetrics' MOTP is a mean distance
    nf = max(out["num_frames"] or 0, 1)
    out["fp_per_frame"] = out["num_false_positives"] / nf
    out["fn_per_frame"] = out["num_misses"] / nf
    ev = acc.mot_events
    ev = ev[ev.Type.isin(["MATCH", "SWITCH"])]
    matches = [
        Match(int(fid), int(o), int(h), float(1.0 - dist))
        for (fid, _), o, h, dist in zip(ev.index, ev.OId, ev.HId, ev.D)
    ]
    return out, matches


def hota(gt: Boxes, pred: Boxes) -> float | None:
    """HOTA (alpha-averaged, as the MOTChallenge reports it) via TrackEval, or None when it is not installed."""
    try:
        from trackeval.metrics import HOTA
    except Exception:  # noqa: BLE001 - optional dependency, any import failure means "not available"
        return None
    g_rows, p_rows = gt.by_frame(), pred.by_frame()
    frames = sorted(set(g_rows) | set(p_rows))
    gid = {v: k for k, v in enumerate(np.unique(gt.ids).tolist())}
    pid = {v: k for k, v in enumerate(np.unique(pred.ids).tolist())}
    empty = np.zeros(0, np.int64)
    data: dict[str, Any] = {
        "num_timesteps": len(frames),
        "num_gt_ids": len(gid),
        "num_tracker_ids": len(pid),
        "num_gt_dets": len(gt),
        "num_tracker_dets": len(pred),
        "gt_ids": [],
        "tracker_ids": [],
        "similarity_scores": [],
    }
    for f in frames:
        gi, pi = g_rows.get(f, empty), p_rows.get(f, empty)
        data["gt_ids"].append(np.array([gid[v] for v in gt.ids[gi].tolist()], int))
        data["tracker_ids"].append(np.array([pid[v] for v in pred.ids[pi].tolist()], int))
        data["similarity_scores"].append(iou_xywh(gt.xywh[gi], pred.xywh[pi]))
    res = HOTA().eval_sequence(data)
    return float(np.mean(res["HOTA"]))


def _plain(v):
    if v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    return v
