"""Looking again where a lost vehicle should be, turned so that it lies along the image axes.

The detector scores a car well below its usual score when it is diagonal in the image and small (a car turning at a
junction: 0.05-0.17 at the recorded scale where the same car going straight scores 0.3-0.8; docs/study.md). Given
where a lost track should be and which way it was heading, a small crop around that place is cut, turned so that the
heading points right and enlarged so a car is ``car_px`` long, and the detector looks at it. A box it finds near the
crop's centre is mapped back: its four corners through the inverse of the crop's transform, and the frame box is
their bounding box (the vehicle's axis-aligned box in the frame, tight because the detector's box was tight around
the car lying along the axes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import cv2
import numpy as np

from vision.types import Detections

CROP_PX = 160  # side of the turned crop handed to the detector
CAR_PX = 64  # a vehicle's long side in the crop (the detector's confident range)
FILL = 114  # Ultralytics' letterbox grey outside the frame


def crop_transform(center: Sequence[float], heading_rad: float, length_px: float) -> np.ndarray:
    """2x3 affine map from frame pixels into the crop: ``center`` to the crop's centre, the heading to +x, a vehicle
    ``length_px`` long to ``CAR_PX``."""
    k = CAR_PX / max(float(length_px), 1.0)
    m = cv2.getRotationMatrix2D((float(center[0]), float(center[1])), float(np.degrees(heading_rad)), k)
    m[:, 2] += np.array([CROP_PX / 2 - center[0], CROP_PX / 2 - center[1]])
    return m


def look_again(
    predict: Callable[[list[np.ndarray]], list[Detections]],
    image: np.ndarray,
    centers: np.ndarray,
    headings_rad: np.ndarray,
    lengths_px: np.ndarray,
    min_score: float,
) -> tuple[Detections, np.ndarray]:
    """One turned crop per place; ``predict`` runs the detector on the crops. Returns the frame boxes found (at most
    one per place: the best box of ``min_score`` or more whose centre lies within a third of a crop of its centre and
    whose long side is a vehicle's, half to twice ``CAR_PX``) and the index of the place each came from."""
    n = len(centers)
    if n == 0:
        return Detections(), np.zeros(0, int)
    maps = [crop_transform(c, a, s) for c, a, s in zip(centers, headings_rad, lengths_px)]
    crops = [
        cv2.warpAffine(image, m, (CROP_PX, CROP_PX), flags=cv2.INTER_LINEAR, borderValue=(FILL, FILL, FILL))
        for m in maps
    ]
    boxes, scores, classes, places = [], [], [], []
    for i, (m, dets) in enumerate(zip(maps, predict(crops))):
        if not len(dets):
            continue
        xy = dets.xyxy
        centre_off = np.hypot((xy[:, 0] + xy[:, 2]) / 2 - CROP_PX / 2, (xy[:, 1] + xy[:, 3]) / 2 - CROP_PX / 2)
        long_side = np.maximum(xy[:, 2] - xy[:, 0], xy[:, 3] - xy[:, 1])
        ok = (dets.score >= min_score) & (centre_off <= CROP_PX / 3)
        ok &= (long_side >= CAR_PX / 2) & (long_side <= 2 * CAR_PX)
        if not ok.any():
            continue
        j = int(np.argmax(np.where(ok, dets.score, -1.0)))
        x1, y1, x2, y2 = xy[j]
        corners = np.array([[x1, y1, 1.0], [x2, y1, 1.0], [x2, y2, 1.0], [x1, y2, 1.0]])
        back = corners @ cv2.invertAffineTransform(m).T
        boxes.append([back[:, 0].min(), back[:, 1].min(), back[:, 0].max(), back[:, 1].max()])
        scores.append(float(dets.score[j]))
        classes.append(int(dets.class_id[j]))
        places.append(i)
    if not boxes:
        return Detections(), np.zeros(0, int)
    found = Detections(np.array(boxes, np.float32), np.array(scores, np.float32), np.array(classes, int))
    return found, np.array(places, int)
