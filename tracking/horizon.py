"""The horizon of an oblique view from the road's own lines: lane markings, kerbs and road edges are parallel on the
ground, so in the image they meet in a vanishing point on the horizon. With a camera without roll (a drone gimbal
keeps the horizon level) the horizon is the image row of that point.

Why it matters for the vehicle-size scale: on a flat ground plane the lateral magnification is linear in the row
and zero at the horizon, k(y) = a (y - y_horizon). Fitting both a and the horizon from vehicle sizes alone needs
many vehicles spread over the rows; with the horizon from the lines, each vehicle gives a by itself, so a handful
of vehicles suffices (a toll plaza, a quiet road).

Used only where it is a clear, single vanishing point above the image centre (a camera looking down sees the
horizon above its principal point); a nadir view has parallel lines (no such point) and gets None.

A search costs ~50-100 ms of CPU on a 1080p frame, too much for a live stream's frame path:
:func:`search_in_background` makes the search's grey copy on the caller (a couple of milliseconds) and runs the
rest on a worker thread (OpenCV's line detector and NumPy release the GIL).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import cv2
import numpy as np

MIN_LINE_FRAC = 0.04  # segments at least this fraction of the image's long side
MIN_TILT_DEG = 20.0  # near-horizontal segments are lateral lines (booth roofs, stop lines): their vanishing point is at infinity along the rows
INLIER_DEG = 1.5  # a segment supports a point when it points at it within this angle
MIN_SUPPORT = 10  # segments
MIN_SPREAD_DEG = 10.0  # between the supporting segments' directions (10th to 90th percentile)
DIRECTION_BIN_DEG = 2.0
MIN_DIRECTIONS = 4  # distinct directions (2-degree bins) among the supporting segments
MAX_ONE_DIRECTION = 0.6  # of the supporting length in one direction at most
MIN_SUPPORT_FRAC = 0.25  # of the tilted segments' total length
MAX_DEPRESSION_DEG = (
    75.0  # a horizon further above (a camera looking down more steeply) changes the scale by too little to matter
)
TRIALS = 400
DETECT_PX = 960
SEARCH_THREADS = 2  # background searches of all streams of a process share these


@dataclass
class Horizon:
    row: float  # image row of the horizon
    vanishing_point: tuple[float, float]
    support: int  # segments pointing at it
    support_frac: float  # their share of the tilted segments' length


@dataclass(frozen=True)
class SearchImage:
    """What a search looks at: a grey copy at most DETECT_PX on its long side (long lines are found as well on it,
    at a fraction of the cost), its scale to the frame, and the frame's (height, width)."""

    grey: np.ndarray
    scale: float
    shape: tuple[int, int]


def prepare(image: np.ndarray) -> SearchImage:
    """The search's own copy of ``image`` (BGR or grey): the frame itself is not kept."""
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
    f = min(1.0, DETECT_PX / max(grey.shape))
    small = cv2.resize(grey, None, fx=f, fy=f, interpolation=cv2.INTER_AREA) if f < 1 else grey.copy()
    return SearchImage(small, f, (grey.shape[0], grey.shape[1]))


def _segments(img: SearchImage) -> np.ndarray:
    found = cv2.createLineSegmentDetector().detect(img.grey)[0]
    if found is None:
        return np.zeros((0, 4))
    seg = found.reshape(-1, 4).astype(np.float64) / img.scale
    length = np.hypot(seg[:, 2] - seg[:, 0], seg[:, 3] - seg[:, 1])
    tilt = np.degrees(np.arctan2(np.abs(seg[:, 3] - seg[:, 1]), np.abs(seg[:, 2] - seg[:, 0])))
    return seg[(length >= MIN_LINE_FRAC * max(img.shape)) & (tilt >= MIN_TILT_DEG)]


def _support(seg: np.ndarray, length: np.ndarray, vp: np.ndarray) -> np.ndarray:
    """Per segment: whether it points at ``vp`` (x, y) within INLIER_DEG."""
    return _support_many(seg, length, vp[None, :])[0]


def _support_many(seg: np.ndarray, length: np.ndarray, vps: np.ndarray) -> np.ndarray:
    """(points, segments): whether each segment points at each of ``vps`` (k x 2) within INLIER_DEG."""
    mid = (seg[:, :2] + seg[:, 2:]) / 2
    d = seg[:, 2:] - seg[:, :2]
    to = vps[:, None, :] - mid[None, :, :]
    cross = np.abs(d[:, 0] * to[..., 1] - d[:, 1] * to[..., 0])
    dist = np.maximum(np.hypot(to[..., 0], to[..., 1]), 1e-9)
    ang = np.degrees(np.arcsin(np.clip(cross / (length * dist), 0, 1)))
    return ang <= INLIER_DEG


def _converging(seg: np.ndarray, length: np.ndarray, inl: np.ndarray) -> bool:
    """The supporting segments are several lines meeting in the point, not one line (drawn in pieces, which points
    at every point along itself) or one bundle of parallel lines with a few strays."""
    if inl.sum() < MIN_SUPPORT:
        return False
    ang = np.degrees(np.arctan2(seg[inl, 3] - seg[inl, 1], seg[inl, 2] - seg[inl, 0])) % 180.0
    if np.percentile(ang, 90) - np.percentile(ang, 10) < MIN_SPREAD_DEG:
        return False
    bins = np.floor(ang / DIRECTION_BIN_DEG).astype(int)
    per_bin = np.bincount(bins - bins.min(), weights=length[inl])
    return (per_bin > 0).sum() >= MIN_DIRECTIONS and per_bin.max() <= MAX_ONE_DIRECTION * per_bin.sum()


def estimate_horizon(image: np.ndarray, focal_px: float, seed: int = 0) -> Horizon | None:
    """The horizon row of ``image`` (BGR or grey) from the vanishing point of its ground lines, or None."""
    return search(prepare(image), focal_px, seed)


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The process's search threads, made on first use (and anew in a forked child, which has none of them)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(SEARCH_THREADS, thread_name_prefix="airpatrol-horizon"))
        return _pool[1]


def search_in_background(image: np.ndarray, focal_px: float, seed: int = 0) -> Future[Horizon | None]:
    """:func:`estimate_horizon` on a worker thread: only the grey copy is made here."""
    return _executor().submit(search, prepare(image), focal_px, seed)


def search(img: SearchImage, focal_px: float, seed: int = 0) -> Horizon | None:
    """The horizon of a prepared image (see :func:`estimate_horizon`)."""
    h, w = img.shape
    seg = _segments(img)
    if len(seg) < MIN_SUPPORT:
        return None
    length = np.hypot(seg[:, 2] - seg[:, 0], seg[:, 3] - seg[:, 1])
    lines = np.cross(np.column_stack([seg[:, :2], np.ones(len(seg))]), np.column_stack([seg[:, 2:], np.ones(len(seg))]))
    rng = np.random.default_rng(seed)
    p = length / length.sum()
    cy = h / 2
    lowest = cy - focal_px * math.tan(math.radians(MAX_DEPRESSION_DEG))
    # RANSAC over pairs of segments: the pairs drawn one by one (the same draws as a plain loop), every candidate
    # point scored at once (half the search's time was the loop's per-candidate NumPy calls)
    pairs = np.array([rng.choice(len(seg), 2, replace=False, p=p) for _ in range(TRIALS)])
    v = np.cross(lines[pairs[:, 0]], lines[pairs[:, 1]])
    v = v[np.abs(v[:, 2]) >= 1e-12]
    vps = v[:, :2] / v[:, 2:3]
    # above the centre (vertical structures meet at the nadir) and a plausible horizon
    vps = vps[(lowest <= vps[:, 1]) & (vps[:, 1] < cy) & (np.abs(vps[:, 0] - w / 2) <= 2 * w)]
    best = None
    if len(vps):
        inliers = _support_many(seg, length, vps)
        score = np.where(inliers, length, 0.0).sum(axis=1)
        converging: dict[bytes, bool] = {}  # many candidates share one set of supporting segments
        for k in np.lexsort((np.arange(len(score)), -score)):  # the best score first; among equals the first drawn
            if score[k] <= 0:
                break
            key = inliers[k].tobytes()
            if key not in converging:
                converging[key] = _converging(seg, length, inliers[k])
            if converging[key]:
                best = vps[k]
                break
    if best is None:
        return None
    inl = _support(seg, length, best)
    # refine: least-squares point of the supporting lines (normalised line equations)
    L = lines[inl] / np.hypot(lines[inl, 0], lines[inl, 1])[:, None]
    sol, *_ = np.linalg.lstsq(L[:, :2], -L[:, 2], rcond=None)
    if lowest <= sol[1] < cy:
        best = sol
        inl = _support(seg, length, best)
    frac = float(length[inl].sum() / length.sum())
    if frac < MIN_SUPPORT_FRAC or not _converging(seg, length, inl):
        return None
    return Horizon(float(best[1]), (float(best[0]), float(best[1])), int(inl.sum()), frac)
