"""Score predicted tracks of one sequence: motmetrics at IoU 0.5 (MOTA, IDF1, FP, FN, ID switches) and HOTA
(TrackEval); predictions and ground truth centred in UAVDT ignore regions are dropped, as ``airpatrol eval`` does."""

from __future__ import annotations

import numpy as np

from tracking.evaluation.io import Boxes
from tracking.evaluation.mot import drop_ignored, hota, mot_metrics


def boxes_from_rows(rows: list[tuple[int, int, float, float, float, float]]) -> Boxes:
    """(frame 1-based, id, left, top, width, height) rows."""
    a = np.array(rows, np.float64).reshape(-1, 6)
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2:6])


def score(gt: Boxes, ignore: Boxes, pred: Boxes, frames: tuple[int, int]) -> dict:
    pred = pred.subset((pred.frame >= frames[0]) & (pred.frame <= frames[1]))
    gt, _ = drop_ignored(gt, ignore)
    pred, _ = drop_ignored(pred, ignore)
    m, _ = mot_metrics(gt, pred, 0.5)
    h = hota(gt, pred)
    return {
        "mota": 100 * m["mota"],
        "idf1": 100 * m["idf1"],
        "hota": None if h is None else 100 * h,
        "fp": m["num_false_positives"],
        "fn": m["num_misses"],
        "idsw": m["num_switches"],
        "gt_boxes": m["num_objects"],
        "precision": m["precision"],
        "recall": m["recall"],
    }
