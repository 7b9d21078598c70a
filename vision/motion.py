"""Motion layer: what moves relative to the road once the drone's own motion is removed.

A background image is kept in the coordinates of an anchor frame (``BackgroundAnchor``): every frame is warped into
them by the ego-motion homography (measured against the anchor directly) and blended in, and the background is
warped into the frame to compare. Pixels far from the background are foreground; a vehicle standing still
melts into the background (so parked cars are not moving traffic), a moving one does not. Whole vehicles come out as
blobs, even tiny ones, which two-frame differencing would reduce to thin edges. A blob counts as a mover only if it
also changed since the previous frame, which rejects the "ghost" a vehicle leaves where it stood when the background
was initialised.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from vision.config import MotionConfig

ALPHA = 0.06  # background learning rate per frame (~ 16-frame memory)
ALPHA_FOREGROUND = 0.006  # much slower under foreground, so slow vehicles are not absorbed while they pass
# the border value of the background's and the learned frame's warps: a pixel whose interpolation reaches past the
# other frame's edge (by more than 255 / 1e4 of its weight) comes out negative, i.e. without history. The anchor's
# edge stays in place for hundreds of frames: a value half made of border, learned or compared, would be foreground
# along it all that time.
OUTSIDE = -1e4


def _fast_median(a: np.ndarray) -> float:
    """Median of a strided sample: the noise level, at a fraction of the cost of a full median."""
    return float(np.median(a[::4, ::4]))


# iterate each feature to a thousandth of a pixel: where the anchor lies then hardly depends on the starting guess, and
# streams whose chained homographies differ in the last digits (batched on a GPU, or not) differ in a pixel or two at
# the threshold at most
LK_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 50, 0.001)


class BackgroundAnchor:
    """The frame whose coordinates a motion layer's background is kept in, and where that frame lies now.

    Warping the background into every new frame resampled it every frame: after a few hundred frames of a hovering
    flight it was a blur, in which lane markings, kerbs and the outlines of a waiting queue stayed foreground and
    joined every vehicle passing along them into one region the length of the arm. Kept in an anchor frame's
    coordinates, only the new frame is resampled (once) to learn from it. Where the anchor lies now is measured
    between the anchor frame and this one directly, starting from the chain of frame-to-frame homographies: the
    chain's small errors add up over hundreds of frames, and a background learned through a drifting chain is
    smeared as well."""

    MIN_FEATURES = 20

    def __init__(self) -> None:
        self.reset(None)

    def reset(self, cur: np.ndarray | None) -> None:
        """The anchor moves to this frame (blurred grey; its values are whole, float or uint8)."""
        self.to_prev = np.eye(3)  # the anchor's pixels -> the previous frame's
        self.is_prev = True
        self.grey = None if cur is None else cur.astype(np.uint8, copy=False)
        self._points: np.ndarray | None = None

    @property
    def points(self) -> np.ndarray | None:
        """The anchor's corners, found when first followed (an anchor that moves on at once needs none)."""
        if self._points is None and self.grey is not None:
            h, w = self.grey.shape
            self._points = cv2.goodFeaturesToTrack(self.grey, 400, 0.01, max(6, min(h, w) // 40), blockSize=7)
        return self._points

    def moved(self, anchor_to_cur: np.ndarray) -> None:
        self.to_prev, self.is_prev = anchor_to_cur, False

    def to_current(self, H_prev_to_cur: np.ndarray, cur: np.ndarray, measure: bool = True) -> tuple[np.ndarray, bool]:
        """(anchor -> this frame, lost). Lost: too few of the anchor's features agree with one homography to this
        frame; the chain's estimate is returned and the caller moves the anchor here."""
        chained = np.asarray(H_prev_to_cur, np.float64) @ self.to_prev
        if not measure or self.is_prev:
            return chained, False  # the anchor is the previous frame: the chain is one step, nothing to add up
        pts = self.points
        if self.grey is None or pts is None or len(pts) < self.MIN_FEATURES:
            return chained, True
        guess = cv2.perspectiveTransform(pts, chained).astype(np.float32)
        found, status, _ = cv2.calcOpticalFlowPyrLK(
            self.grey,
            cur.astype(np.uint8, copy=False),
            pts,
            guess,
            winSize=(21, 21),
            maxLevel=2,
            criteria=LK_CRITERIA,
            flags=cv2.OPTFLOW_USE_INITIAL_FLOW,
        )
        good = status.reshape(-1) == 1
        if good.sum() < self.MIN_FEATURES:
            return chained, True
        H, inliers = cv2.findHomography(pts.reshape(-1, 2)[good], found.reshape(-1, 2)[good], cv2.RANSAC, 1.0)
        if H is None or inliers is None or inliers.sum() < max(self.MIN_FEATURES, 0.5 * good.sum()):
            return chained, True
        return H, False


@dataclass
class MotionField:
    """Foreground mask (downscaled frame, restricted to the road when one was given), the two-frame change mask, the
    factor to full resolution, and the foreground before the road restriction."""

    mask: np.ndarray
    scale: float  # small = full * scale
    changed: np.ndarray | None = None
    unrestricted: np.ndarray | None = None

    def moving_fraction(self, xyxy: np.ndarray, on_road_only: bool = True) -> np.ndarray:
        """Share of foreground pixels inside each full-resolution box (``on_road_only=False``: ignore the road)."""
        out = np.zeros(len(xyxy), np.float32)
        mask = self.mask if on_road_only or self.unrestricted is None else self.unrestricted
        if mask is None or not len(xyxy):
            return out
        h, w = mask.shape
        integral = cv2.integral((mask > 0).astype(np.uint8))
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
    def __init__(self, config: MotionConfig | None = None):
        self.config = config or MotionConfig()
        self.reset()

    def reset(self) -> None:
        self._bg: np.ndarray | None = None  # in the anchor frame's coordinates
        self._prev: np.ndarray | None = None
        self.anchor = BackgroundAnchor()

    def update(
        self,
        grey_small: np.ndarray,
        H_prev_to_cur_small: np.ndarray | None,
        scale: float,
        road_mask_small: np.ndarray | None = None,
        frames_elapsed: int = 1,
    ) -> MotionField:
        """``frames_elapsed``: video frames since the previous call; the background learns at the same rate per
        second whether it is called on every frame or every few."""
        blurred = cv2.GaussianBlur(grey_small, (3, 3), 0)
        cur = blurred.astype(np.float32)
        h, w = cur.shape
        if self._bg is None or self._prev is None or self._bg.shape != cur.shape or H_prev_to_cur_small is None:
            # no usable ego-motion: start the background afresh rather than compare misaligned frames
            self._bg, self._prev = cur.copy(), cur
            self.anchor.reset(blurred)
            return MotionField(np.zeros((h, w), np.uint8), scale, np.zeros((h, w), np.uint8))
        H = H_prev_to_cur_small
        keep = self.config.anchored_background_coverage
        anchor_to_cur, lost = self.anchor.to_current(H, blurred, keep is not None)
        bg = cv2.warpPerspective(
            self._bg, anchor_to_cur, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=OUTSIDE
        )
        prev = cv2.warpPerspective(
            self._prev, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=-1
        )
        fresh = (bg < 0) | (prev < 0)  # uncovered by the drone's motion: no history yet
        covered = 1.0 - float(np.count_nonzero(bg < 0)) / bg.size
        bg[fresh] = cur[fresh]
        prev[fresh] = cur[fresh]
        diff_bg = cv2.absdiff(cur, bg)
        diff_prev = cv2.absdiff(cur, prev)
        # thresholds relative to the footage's own noise (compression, texture, warp interpolation)
        thr = max(self.config.min_contrast, 4.0 * _fast_median(diff_bg))
        fg: np.ndarray = (diff_bg > thr).astype(np.uint8) * 255
        changed = (diff_prev > max(self.config.min_contrast * 0.75, 4.0 * _fast_median(diff_prev))).astype(
            np.uint8
        ) * 255
        k = max(1, frames_elapsed)
        alpha = np.full(fg.shape, 1 - (1 - ALPHA) ** k, np.float32)
        alpha[fg > 0] = 1 - (1 - ALPHA_FOREGROUND) ** k
        self._prev = cur
        if keep is None or lost or covered < keep:
            self._bg = bg + alpha * (cur - bg)
            self.anchor.reset(blurred)  # the anchor moves to this frame
        else:
            # learn in the anchor's coordinates: only this frame is resampled, never the background itself
            back = np.linalg.inv(anchor_to_cur)
            cur_a = cv2.warpPerspective(
                cur, back, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=OUTSIDE
            )
            alpha_a = cv2.warpPerspective(alpha, back, (w, h), flags=cv2.INTER_LINEAR, borderValue=0)
            alpha_a[cur_a < 0] = 0
            self._bg += alpha_a * (cur_a - self._bg)
            self.anchor.moved(anchor_to_cur)
        fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, np.ones((2, 2), np.uint8))
        on_road = cv2.bitwise_and(fg, road_mask_small) if road_mask_small is not None else fg
        return MotionField(on_road, scale, changed, unrestricted=fg)

    def blobs(self, field: MotionField, min_area_px: int | None = None) -> np.ndarray:
        """Bounding boxes (full resolution xyxy) of foreground blobs that are moving now."""
        if field.mask is None or not field.mask.any():
            return np.zeros((0, 4), np.float32)
        closed = cv2.morphologyEx(field.mask, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8))
        n, labels, stats, _ = cv2.connectedComponentsWithStats(closed, connectivity=8)
        min_area = max(2.0, (min_area_px or self.config.min_area_px) * field.scale**2)
        changed_count = None
        if field.changed is not None:
            changed_count = np.bincount(labels[field.changed > 0], minlength=n)
        boxes = []
        for i in range(1, n):
            x, y, w, h, area = stats[i]
            if area < min_area:
                continue
            if changed_count is not None and changed_count[i] < max(2, 0.03 * area):
                continue  # differs from the background but did not move since the last frame: a ghost
            boxes.append([x, y, x + w, y + h])
        if not boxes:
            return np.zeros((0, 4), np.float32)
        return (np.array(boxes, np.float32) / field.scale).astype(np.float32)
