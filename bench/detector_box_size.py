"""How tight each shipped detector's boxes are on real footage, by the vehicle's angle off the image axes. Prints the numbers.

DRIFT's labelled 4K nadir frames (``../shared/data/detection/drift_obb``) carry an oriented box per vehicle: its four
corners' bounding box is the vehicle's tight axis-aligned box. Each detector (the shipped one and the any-heading one
beside it) runs on 640 px tiles at native resolution; each truth box takes the detector box it overlaps most (IoU >=
0.3), and the ratio is the square root of the two areas (1.0: as tight as the truth). Frames 0000 and 0001 are near
copies: one of them is used. docs/study.md ("Weak boxes on held vehicles") quotes it.

  YOLO_OFFLINE=1 python bench/detector_box_size.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
DRIFT = REPO.parent / "shared" / "data" / "detection" / "drift_obb"
WEIGHTS = ("airpatrol_yolov8n.pt", "airpatrol_yolov8n_any_heading.pt")
TILE, STEP, CONF = 640, 560, 0.2
BANDS = ((0, 10), (10, 30), (30, 46))  # degrees off the nearest image axis


def truth(image_path: Path, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Tight axis-aligned boxes (xyxy) and each vehicle's angle off the image axes, degrees (0-45)."""
    label = np.loadtxt(image_path.parent.parent / "labels" / f"{image_path.stem}.txt", ndmin=2)
    corners = label[:, 1:].reshape(-1, 4, 2) * [width, height]
    boxes = np.c_[corners.min(1), corners.max(1)]
    e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 1]
    long_edge = np.where((np.hypot(*e1.T) >= np.hypot(*e2.T))[:, None], e1, e2)
    angle = np.degrees(np.arctan2(long_edge[:, 1], long_edge[:, 0])) % 90
    return boxes, np.minimum(angle, 90 - angle)


def detect(model, image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    found = []
    for y in range(0, h, STEP):
        for x in range(0, w, STEP):
            r = model.predict(image[y : y + TILE, x : x + TILE], imgsz=TILE, conf=CONF, verbose=False)[0]
            found.append(r.boxes.xyxy.cpu().numpy() + [x, y, x, y])
    return np.concatenate(found) if found else np.zeros((0, 4))


def size_ratios(model, frames: list[Path]) -> np.ndarray:
    """Rows (angle, size ratio, IoU) of the truth boxes a detector box overlaps at IoU >= 0.3."""
    from supervision import box_iou_batch

    rows = []
    for path in frames:
        image = cv2.imread(str(path))
        if image is None:
            print(f"{path}: not a readable image; left out")
            continue
        boxes, angle = truth(path, image.shape[1], image.shape[0])
        found = detect(model, image)
        if not len(found):
            continue
        iou = box_iou_batch(boxes, found)
        best = iou.argmax(1)
        area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
        ok = iou[np.arange(len(boxes)), best] >= 0.3
        ratio = np.sqrt(area(found[best]) / area(boxes))
        rows.append(np.c_[angle, ratio, iou[np.arange(len(boxes)), best]][ok])
    return np.concatenate(rows) if rows else np.zeros((0, 3))


def main() -> int:
    if not DRIFT.is_dir():
        print(f"{DRIFT}: not found (the shared data is not beside the project); nothing measured")
        return 1
    from ultralytics import YOLO

    frames = sorted((DRIFT / "images").glob("*.jpg"))[1:]
    for name in WEIGHTS:
        rows = size_ratios(YOLO(str(REPO / "vision" / "weights" / name)), frames)
        for lo, hi in BANDS:
            band = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi)]
            if len(band):
                print(
                    f"{name}: {lo}-{hi} degrees off the axes: {len(band)} vehicles, size against the truth's "
                    f"{np.median(band[:, 1]):.2f} (median), IoU {np.median(band[:, 2]):.2f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
