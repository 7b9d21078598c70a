"""Ego-motion: the drone's own motion between two frames, as a homography.

Sparse features on the background (vehicles masked out) are tracked with pyramidal Lucas-Kanade and a homography is
fitted with RANSAC, so drift, rotation and jitter of the drone are not read as vehicle motion. The road is a plane, so
a homography is the right model for it; buildings add parallax that RANSAC treats as outliers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from vision.config import EgoMotionConfig

# calcOpticalFlowPyrLK's output argument: None lets OpenCV allocate it. Older opencv-python stubs want an array there,
# newer ones accept None; typed as Any it checks under both (a `type: ignore` is an unused-ignore error under one).
_ALLOCATE: Any = None


@dataclass
class EgoMotion:
    """Homography mapping pixels of the previous frame onto the current one (full resolution)."""

    H: np.ndarray
    inliers: int
    tracked: int
    ok: bool
    # Registration noise (full-resolution px): 90th percentile of the inlier features' distance from where H puts
    # them. What a static point can appear to move per frame after compensation; the motion layer gates on it.
    residual_px: float = 0.0

    @staticmethod
    def identity() -> "EgoMotion":
        return EgoMotion(np.eye(3), 0, 0, False)


class EgoMotionEstimator:
    def __init__(self, config: EgoMotionConfig | None = None):
        self.config = config or EgoMotionConfig()
        self._prev: np.ndarray | None = None
        self._scale = 1.0

    def reset(self) -> None:
        self._prev = None

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """Grey, downscaled copy used for flow (cheap and robust to noise)."""
        h, w = image.shape[:2]
        self._scale = min(1.0, self.config.downscale_to / max(h, w))
        grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
        if self._scale < 1.0:
            grey = cv2.resize(
                grey, (int(round(w * self._scale)), int(round(h * self._scale))), interpolation=cv2.INTER_AREA
            )
        return grey

    @property
    def scale(self) -> float:
        return self._scale

    def update(self, grey_small: np.ndarray, exclude_xyxy: np.ndarray | None = None) -> EgoMotion:
        """Estimate motion from the previous call's frame to this one. ``exclude_xyxy``: vehicle boxes (full res)."""
        prev, self._prev = self._prev, grey_small
        if prev is None or prev.shape != grey_small.shape:
            return EgoMotion.identity()
        mask = np.full(prev.shape, 255, np.uint8)
        if exclude_xyxy is not None and len(exclude_xyxy):
            pad = 4
            for x1, y1, x2, y2 in np.asarray(exclude_xyxy, np.float64) * self._scale:
                cv2.rectangle(mask, (int(x1) - pad, int(y1) - pad), (int(x2) + pad, int(y2) + pad), 0, -1)
        min_dist = max(6, int(min(prev.shape) / 40))
        pts = cv2.goodFeaturesToTrack(prev, self.config.max_features, 0.01, min_dist, mask=mask, blockSize=7)
        if pts is None or len(pts) < 8:
            return EgoMotion.identity()
        nxt, status, _ = cv2.calcOpticalFlowPyrLK(prev, grey_small, pts, _ALLOCATE, winSize=(21, 21), maxLevel=3)
        good = status.reshape(-1) == 1
        p0, p1 = pts.reshape(-1, 2)[good], nxt.reshape(-1, 2)[good]
        if len(p0) < 8:
            return EgoMotion.identity()
        H_small, inl = cv2.findHomography(
            p0, p1, cv2.RANSAC, self.config.ransac_px * self._scale + 0.5, maxIters=2000, confidence=0.995
        )
        n_inl = int(inl.sum()) if inl is not None else 0
        if H_small is None or n_inl < max(8, 0.25 * len(p0)):
            return EgoMotion(np.eye(3), n_inl, len(p0), False)
        S = np.diag([self._scale, self._scale, 1.0])
        H = np.linalg.inv(S) @ H_small @ S
        inl = inl.reshape(-1).astype(bool)
        proj = cv2.perspectiveTransform(p0[inl].reshape(-1, 1, 2).astype(np.float64), H_small).reshape(-1, 2)
        residual = float(np.percentile(np.linalg.norm(proj - p1[inl], axis=1), 90)) / self._scale
        return EgoMotion(H / H[2, 2], n_inl, len(p0), True, residual)

    def ground_velocities(
        self, prev_small: np.ndarray, cur_small: np.ndarray, xyxy: np.ndarray, H_prev_to_cur: np.ndarray | None
    ) -> np.ndarray:
        """Image velocity (full-resolution px/frame) of what is inside each box, the drone's own motion removed.

        Points on a small grid in each box are followed from this frame back to the previous one (pyramidal
        Lucas-Kanade); the median displacement, less where the ego-motion alone would have carried the point, is the
        vehicle's own motion. NaN where fewer than 3 points were followed (a featureless box).
        """
        boxes = np.asarray(xyxy, np.float64).reshape(-1, 4) * self._scale
        out = np.full((len(boxes), 2), np.nan)
        if not len(boxes) or prev_small is None or prev_small.shape != cur_small.shape:
            return out
        g = np.linspace(0.25, 0.75, 3)
        fx, fy = np.meshgrid(g, g)
        grid = np.column_stack([fx.ravel(), fy.ravel()])  # 9 points in the inner half of the box
        pts = np.concatenate([b[:2] + grid * (b[2:] - b[:2]) for b in boxes]).astype(np.float32)
        back, status, _ = cv2.calcOpticalFlowPyrLK(
            cur_small,
            prev_small,
            pts.reshape(-1, 1, 2),
            _ALLOCATE,
            winSize=(15, 15),
            maxLevel=3,
        )
        back = back.reshape(-1, 2).astype(np.float64)
        carried = (
            back
            if H_prev_to_cur is None
            else cv2.perspectiveTransform(
                back.reshape(-1, 1, 2),
                np.diag([self._scale, self._scale, 1.0])
                @ H_prev_to_cur
                @ np.diag([1 / self._scale, 1 / self._scale, 1.0]),
            ).reshape(-1, 2)
        )
        own = (pts - carried) / self._scale  # where the point is, less where the drone's motion put it
        ok = status.reshape(-1) == 1
        for i in range(len(boxes)):
            sel = slice(9 * i, 9 * i + 9)
            if ok[sel].sum() >= 3:
                out[i] = np.median(own[sel][ok[sel]], axis=0)
        return out


def warp_boxes(H: np.ndarray, xyxy: np.ndarray) -> np.ndarray:
    """Axis-aligned boxes through a homography (bounding box of the four mapped corners)."""
    xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
    if not len(xyxy):
        return xyxy.astype(np.float32)
    x1, y1, x2, y2 = xyxy.T
    corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1), np.stack([x2, y2], 1), np.stack([x1, y2], 1)], 1)
    flat = corners.reshape(-1, 2)
    h = np.column_stack([flat, np.ones(len(flat))]) @ H.T
    m = (h[:, :2] / h[:, 2:3]).reshape(-1, 4, 2)
    return np.column_stack([m[..., 0].min(1), m[..., 1].min(1), m[..., 0].max(1), m[..., 1].max(1)]).astype(np.float32)
