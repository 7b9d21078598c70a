"""Motion layer: what moves relative to the road once the drone's own motion is removed.

The two previous frames are warped onto the current one with the ego-motion homographies; pixels that differ from
both are where a moving object is *now* (the double difference removes the ghost at its old position). Connected
blobs of such pixels on the road are moving vehicles; the fraction of moving pixels inside a detector box says
whether that vehicle moves.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import cv2
import numpy as np

from tracking.config import MotionConfig


@dataclass
class MotionField:
    """Binary mask of moving pixels (in the downscaled frame) and the factor to full resolution."""

    mask: np.ndarray
    scale: float  # small = full * scale

    def moving_fraction(self, xyxy: np.ndarray) -> np.ndarray:
        """Share of moving pixels inside each full-resolution box."""
        out = np.zeros(len(xyxy), np.float32)
        if self.mask is None or not len(xyxy):
            return out
        h, w = self.mask.shape
        integral = cv2.integral((self.mask > 0).astype(np.uint8))
        b = np.round(np.asarray(xyxy, np.float64) * self.scale).astype(int)
        b[:, [0, 2]] = b[:, [0, 2]].clip(0, w)
        b[:, [1, 3]] = b[:, [1, 3]].clip(0, h)
        for i, (x1, y1, x2, y2) in enumerate(b):
            area = (x2 - x1) * (y2 - y1)
            if area > 0:
                s = integral[y2, x2] - integral[y1, x2] - integral[y2, x1] + integral[y1, x1]
                out[i] = s / area
        return out


class MotionDetector:
    """Keeps the last two downscaled grey frames and the homographies between them."""

    def __init__(self, config: MotionConfig | None = None):
        self.config = config or MotionConfig()
        self._history: deque[np.ndarray] = deque(maxlen=2)  # previous grey frames (small), oldest first
        self._H_hist: deque[np.ndarray] = deque(maxlen=2)  # H (small coords) from frame k-1 to k

    def reset(self) -> None:
        self._history.clear()
        self._H_hist.clear()

    def update(self, grey_small: np.ndarray, H_prev_to_cur_small: np.ndarray | None, scale: float,
               road_mask_small: np.ndarray | None = None) -> MotionField:
        if H_prev_to_cur_small is None or (self._history and self._history[-1].shape != grey_small.shape):
            self.reset()
        if H_prev_to_cur_small is not None and self._history:
            self._H_hist.append(H_prev_to_cur_small)
        frames = list(self._history)
        self._history.append(grey_small)
        if not frames:
            return MotionField(np.zeros_like(grey_small), scale)
        h, w = grey_small.shape
        cur = cv2.GaussianBlur(grey_small, (3, 3), 0)
        # Homographies from each stored frame to the current one.
        Hs = list(self._H_hist)
        H_to_cur = []
        acc = np.eye(3)
        for H in reversed(Hs[-len(frames):]):
            acc = acc @ H
            H_to_cur.append(acc.copy())
        H_to_cur = list(reversed(H_to_cur))
        moving = None
        for f, H in zip(frames, H_to_cur):
            warped = cv2.warpPerspective(cv2.GaussianBlur(f, (3, 3), 0), H, (w, h), flags=cv2.INTER_LINEAR,
                                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            valid = cv2.warpPerspective(np.full_like(f, 255), H, (w, h), flags=cv2.INTER_NEAREST)
            diff = cv2.absdiff(cur, warped)
            # Threshold relative to the frame's own noise (compression, illumination) so it works on any footage.
            noise = float(np.median(diff[valid > 0])) if np.any(valid) else 0.0
            thr = max(12.0, 4.0 * noise)
            m = (diff > thr) & (valid > 0)
            moving = m if moving is None else (moving & m)
        mask = moving.astype(np.uint8) * 255
        if road_mask_small is not None:
            mask = cv2.bitwise_and(mask, road_mask_small)
        k = np.ones((3, 3), np.uint8)
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, k)
        mask = cv2.dilate(mask, k, iterations=1)
        return MotionField(mask, scale)

    def blobs(self, field: MotionField, min_area_px: int | None = None) -> np.ndarray:
        """Bounding boxes (full resolution xyxy) of connected moving regions."""
        if field.mask is None or not field.mask.any():
            return np.zeros((0, 4), np.float32)
        closed = cv2.morphologyEx(field.mask, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
        n, _, stats, _ = cv2.connectedComponentsWithStats(closed, connectivity=8)
        min_area = (min_area_px or self.config.min_area_px) * field.scale**2
        boxes = []
        for i in range(1, n):
            x, y, w, h, area = stats[i]
            if area < max(2, min_area):
                continue
            boxes.append([x, y, x + w, y + h])
        if not boxes:
            return np.zeros((0, 4), np.float32)
        return (np.array(boxes, np.float32) / field.scale).astype(np.float32)
