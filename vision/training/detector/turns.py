"""Turned copies of training images: vehicles at headings the day data rarely shows.

The day data is mostly one Madison street and a few Minsk and Aarhus roads, so most vehicles lie along the image axes;
the shipped detector scored a car turned 45 degrees clearly lower than the same car along an axis (held-out val AP50
0.888 -> 0.800, docs/detector.md "Any heading"), and cars in a roundabout or turning at a junction are at any
heading. Each copy is the whole image turned about its centre onto a canvas that keeps all of it (grey corners), each
box the bounding box of the turned vehicle, taken as a rounded rectangle filling its box: exact at multiples of 90
degrees; in between, right for a vehicle along the image axes, loose for one that is already diagonal.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from vision.training.detector.scales import FILL, _labels, _read, _write


def turn(image: np.ndarray, rows: np.ndarray, degrees: float) -> tuple[np.ndarray, np.ndarray]:
    """``image`` turned ``degrees`` counter-clockwise about its centre onto the canvas that holds all of it, and its
    YOLO rows (``cls cx cy w h``, normalised) as the bounding boxes of the turned vehicles."""
    h, w = image.shape[:2]
    c, s = abs(np.cos(np.radians(degrees))), abs(np.sin(np.radians(degrees)))
    out_w, out_h = int(np.ceil(w * c + h * s)), int(np.ceil(w * s + h * c))
    m = cv2.getRotationMatrix2D((w / 2, h / 2), degrees, 1.0)
    m[:, 2] += ((out_w - w) / 2, (out_h - h) / 2)
    turned = cv2.warpAffine(image, m, (out_w, out_h), flags=cv2.INTER_LINEAR, borderValue=(FILL, FILL, FILL))
    # a vehicle seen from above is a rectangle with rounded corners, not its box: bound that shape turned (corner
    # radius a quarter of the box's short side), or a box along the axes turned 45 degrees comes out ~10 % too large
    cx, cy, bw, bh = rows[:, 1] * w, rows[:, 2] * h, rows[:, 3] * w, rows[:, 4] * h
    r = np.minimum(bw, bh) / 4
    ucx, ucy = m[0, 0] * cx + m[0, 1] * cy + m[0, 2], m[1, 0] * cx + m[1, 1] * cy + m[1, 2]
    half_u = (bw / 2 - r) * c + (bh / 2 - r) * s + r
    half_v = (bw / 2 - r) * s + (bh / 2 - r) * c + r
    lo_u, hi_u = (ucx - half_u).clip(0, out_w), (ucx + half_u).clip(0, out_w)
    lo_v, hi_v = (ucy - half_v).clip(0, out_h), (ucy + half_v).clip(0, out_h)
    out = np.column_stack(
        [rows[:, 0], (lo_u + hi_u) / 2 / out_w, (lo_v + hi_v) / 2 / out_h, (hi_u - lo_u) / out_w, (hi_v - lo_v) / out_h]
    )
    return turned, out.reshape(-1, 5)


def turned_copies(
    images: list[Path], labels_dir: Path, out_dir: Path, degrees: float | None = None, seed: int = 0
) -> list[Path]:
    """A turned copy of each of ``images`` (YOLO labels from ``labels_dir``, same stem) in ``out_dir``: by ``degrees``,
    or by an angle drawn uniformly from 0-360 per image (``seed``) when ``degrees`` is None. Returns the copies."""
    rng = np.random.default_rng(seed)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    written = []
    for path in images:
        angle = float(rng.uniform(0.0, 360.0)) if degrees is None else degrees
        image, rows = turn(_read(path), _labels(labels_dir / f"{path.stem}.txt"), angle)
        name = f"turned{angle:.0f}__{path.stem}"
        _write(image, rows, out_dir, name)
        written.append(out_dir / "images" / f"{name}.jpg")
    return written
