"""Road-mask agreement: intersection over union of predicted and true road pixels."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np

from tracking.evaluation.io import EvalInputError

IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


def _frames(folder: Path) -> dict[int, Path]:
    out = {}
    for p in folder.iterdir():
        if p.suffix.lower() in IMAGE_EXT:
            m = re.search(r"(\d+)(?!.*\d)", p.stem)
            if m:
                out[int(m.group(1))] = p
    return out


def road_mask_iou(pred_dir: Path, gt_dir: Path) -> dict:
    """Pooled IoU over the frames both folders have (files matched by the last number in their names; > 127 = road),
    and the mean of per-frame IoUs. Predicted masks of another size are resized to the truth's (nearest)."""
    pred, gt = _frames(pred_dir), _frames(gt_dir)
    common = sorted(set(pred) & set(gt))
    if not common:
        return {"frames": 0, "iou": None, "mean_frame_iou": None}
    inter = union = 0
    per = []
    for f in common:
        g = cv2.imread(str(gt[f]), cv2.IMREAD_GRAYSCALE)
        p = cv2.imread(str(pred[f]), cv2.IMREAD_GRAYSCALE)
        if g is None:
            raise EvalInputError(f"{gt[f]}: not a readable image")
        if p is None:
            raise EvalInputError(f"{pred[f]}: not a readable image")
        if p.shape != g.shape:
            p = cv2.resize(p, (g.shape[1], g.shape[0]), interpolation=cv2.INTER_NEAREST)
        g_road, p_road = g > 127, p > 127
        i, u = int((g_road & p_road).sum()), int((g_road | p_road).sum())
        inter, union = inter + i, union + u
        per.append(i / u if u else 1.0)
    return {"frames": len(common), "iou": inter / union if union else 1.0, "mean_frame_iou": float(np.mean(per))}
