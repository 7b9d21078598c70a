"""Draw a FrameResult: road overlay, boxes, ids and speeds. Shared by the video sink and the live preview."""
from __future__ import annotations

import cv2
import numpy as np

from tracking.types import FrameResult

MOVING = (40, 220, 40)  # BGR
STATIONARY = (200, 200, 200)
FLAGGED = (0, 140, 255)
ROAD_TINT = (255, 120, 0)


def annotate(result: FrameResult, road_alpha: float = 0.22) -> np.ndarray:
    img = result.frame.image.copy()
    h, w = img.shape[:2]
    if result.road_mask is not None and road_alpha > 0:
        # img + alpha * colour on road pixels, built with whole-image uint8 ops (boolean indexing of a 1080p frame
        # costs ~10 ms per frame)
        road = (result.road_mask > 0).astype(np.uint8)
        tint = cv2.merge([road * np.uint8(round(c * road_alpha)) for c in ROAD_TINT])
        img = cv2.add(img, tint)
    scale = max(0.35, min(0.8, w / 2400))
    thick = 1 if w < 1400 else 2
    for tr in result.tracks:
        x1, y1, x2, y2 = (int(round(v)) for v in tr.xyxy)
        color = FLAGGED if tr.speed_flag and tr.speed_flag.startswith("implausible") else (MOVING if tr.moving else STATIONARY)
        cv2.rectangle(img, (x1, y1), (x2, y2), color, thick)
        label = f"{tr.track_id}"
        if tr.speed_kmh is not None and tr.moving:
            label += f" {tr.speed_kmh:.0f}" + (f"+-{tr.speed_sigma_kmh:.0f}" if tr.speed_sigma_kmh else "") + " km/h"
        elif not tr.moving:
            label += " parked"
        (tw, th), _ = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        ty = y1 - 3 if y1 - th - 4 > 0 else y2 + th + 3
        cv2.rectangle(img, (x1, ty - th - 2), (x1 + tw + 2, ty + 2), (0, 0, 0), -1)
        cv2.putText(img, label, (x1 + 1, ty), cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)
    info = f"t={result.frame.t:6.2f}s  vehicles={sum(t.moving for t in result.tracks)} moving"
    if result.metres_per_pixel:
        info += f"  {result.metres_per_pixel:.3f} m/px ({result.scale_detail or result.scale_source})"
    cv2.putText(img, info, (8, int(22 * scale + 8)), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 3, cv2.LINE_AA)
    cv2.putText(img, info, (8, int(22 * scale + 8)), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return img
