"""Score predicted tracks of one sequence: motmetrics at IoU 0.5 (MOTA, IDF1, FP, FN, ID switches) and HOTA
(TrackEval); predictions and ground truth centred in UAVDT ignore regions are dropped, as ``airpatrol eval`` does.

The benchmarks that compare trackers on the real sequences (``python -m bench.real``, ``bench/detector_track.py``)
score with :func:`score`, so their figures stay comparable."""

from __future__ import annotations

import numpy as np

from tracking.evaluation.io import Boxes
from tracking.evaluation.mot import drop_ignored, hota, mot_metrics


def boxes_from_rows(rows: list[tuple[int, int, float, float, float, float]] | np.ndarray) -> Boxes:
    """(frame 1-based, id, left, top, width, height) rows, as a list or an (n, 6) array."""
    a = np.array(rows, np.float64).reshape(-1, 6)
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2:6])


BORDER_PX = 2.0  # a box within this of the frame's edge touches the border (a vehicle partly out of view)


def touches_border(xywh: np.ndarray, size: tuple[int, int], margin: float = BORDER_PX) -> np.ndarray:
    w, h = size
    x, y, bw, bh = np.asarray(xywh, np.float64).reshape(-1, 4).T
    return (x <= margin) | (y <= margin) | (x + bw >= w - margin) | (y + bh >= h - margin)


def score(gt: Boxes, ignore: Boxes, pred: Boxes, frames: tuple[int, int], size: tuple[int, int] | None = None) -> dict:
    """MOTA & co.; with the frame ``size`` also how many false positives touch the frame border."""
    pred = pred.subset((pred.frame >= frames[0]) & (pred.frame <= frames[1]))
    gt, _ = drop_ignored(gt, ignore)
    pred, _ = drop_ignored(pred, ignore)
    m, matches = mot_metrics(gt, pred, 0.5)
    h = hota(gt, pred)
    border_fp = None
    if size is not None:
        matched = {(mt.frame, mt.track_id) for mt in matches}
        fp = np.array([(f, i) not in matched for f, i in zip(pred.frame.tolist(), pred.ids.tolist())], bool)
        border_fp = int((fp & touches_border(pred.xywh, size)).sum()) if len(pred) else 0
    return {
        "border_fp": border_fp,
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
