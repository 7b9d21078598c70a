"""What an oblique camera sees of a vehicle below its roof: its four sides as textures, in the sprites' scale.

A side is not a flat patch of paint: a car shows a band of dark glass along its cabin, wheels at its foot, lights
at its ends; a bus a row of windows; a truck its cab's windows at the front and a plain load behind. A detector
trained on real oblique footage boxes a vehicle's sides with its roof when they look like that, and only its roof
when they are a flat dark patch: the renders' truth boxes hold the sides, so flat sides made every oblique track box
a poor fit (a "fragment" a user would not see).

Each texture is a premultiplied BGRA float32 image at :data:`~vision.synth.sprites.PX_PER_M`: x along the face from
its left end to its right end as seen from outside, row 0 at the roof line.
"""

from __future__ import annotations

import cv2
import numpy as np

from vision.synth.sprites import PX_PER_M
from vision.synth.vehicles import VehicleSpec

GLASS_BGR = (48.0, 42.0, 38.0)  # tinted glass reflecting a pale sky, darker than any body colour but black
TYRE_BGR = (28.0, 28.0, 30.0)
SIDE_SHADE = 0.8  # a side gets less skylight than the roof


def body_colour(sprite: np.ndarray) -> np.ndarray:
    """The roof's median colour (BGR), the side's paint."""
    a = sprite[..., 3]
    m = a > 0.5
    if not m.any():
        return np.array([60.0, 60.0, 60.0])
    return np.median(sprite[..., :3][m] / a[m][:, None], axis=0)


def _canvas(length_m: float, height_m: float, bgr: np.ndarray) -> np.ndarray:
    w, h = max(2, int(round(length_m * PX_PER_M))), max(2, int(round(height_m * PX_PER_M)))
    img = np.empty((h, w, 3), np.float32)
    img[:] = bgr * SIDE_SHADE
    # the lower body curves under: darker towards the sill
    img *= np.linspace(1.0, 0.7, h, dtype=np.float32)[:, None, None]
    return img


def _band(img: np.ndarray, x0: float, x1: float, y0: float, y1: float, bgr) -> None:
    h, w = img.shape[:2]
    cv2.rectangle(
        img,
        (int(round(x0 * w)), int(round(y0 * h))),
        (int(round(x1 * w)) - 1, int(round(y1 * h)) - 1),
        tuple(float(c) for c in bgr),
        -1,
    )


def long_side(spec: VehicleSpec, bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The left side, rear at x = 0 (the right side is its mirror)."""
    img = _canvas(spec.length, spec.height, bgr)
    h, w = img.shape[:2]
    if spec.cls == "bus":
        _band(img, 0.04, 0.97, 0.08, 0.45, GLASS_BGR)
        for x in np.arange(0.04, 0.97, float(rng.uniform(0.09, 0.13)))[1:]:  # window pillars
            _band(img, x, x + 0.012, 0.08, 0.45, bgr * SIDE_SHADE)
    elif spec.cls == "truck":
        cab = min(0.3, 2.3 / spec.length)  # the cab's share of the length, at the front
        _band(img, 1.0 - cab + 0.03, 0.98, 0.06, 0.3, GLASS_BGR)
        _band(img, 1.0 - cab - 0.01, 1.0 - cab, 0.0, 1.0, bgr * SIDE_SHADE * 0.5)  # gap between cab and load
    else:  # car, van: the glasshouse over the cabin
        start, end = (
            (0.08, 0.8) if spec.cls == "van" else (float(rng.uniform(0.2, 0.28)), float(rng.uniform(0.68, 0.75)))
        )
        _band(img, start, end, 0.0, 0.42, GLASS_BGR)
        pillar = (start + end) / 2 + float(rng.uniform(-0.05, 0.05))
        _band(img, pillar, pillar + 0.025, 0.0, 0.42, bgr * SIDE_SHADE)
    radius = max(1, int(round(0.33 * PX_PER_M)))
    axles: tuple[float, ...] = (0.14, 0.86) if spec.cls != "bus" else (0.2, 0.8)
    if spec.cls == "truck" and spec.length > 9:
        axles = (0.1, 0.16, 0.85)
    for ax in axles:
        cv2.circle(img, (int(round(ax * w)), h - 1), radius, TYRE_BGR, -1, cv2.LINE_AA)
    return img


def end_face(spec: VehicleSpec, bgr: np.ndarray, front: bool) -> np.ndarray:
    """The front or the rear, from its left end to its right end as seen from outside."""
    img = _canvas(spec.width, spec.height, bgr)
    glass_to = 0.42 if spec.cls in ("car", "van") else 0.4
    if front or spec.cls in ("car", "van", "bus"):
        _band(img, 0.08, 0.92, 0.0 if spec.cls == "car" else 0.06, glass_to, GLASS_BGR)
    lamp = (200.0, 205.0, 210.0) if front else (40.0, 40.0, 170.0)
    for x in (0.04, 0.8):
        _band(img, x, x + 0.16, 0.55, 0.68, lamp)
    _band(img, 0.0, 1.0, 0.86, 1.0, TYRE_BGR)  # bumper and the shadow under it
    return img


def side_textures(spec: VehicleSpec, sprite: np.ndarray) -> tuple[np.ndarray, ...]:
    """Premultiplied BGRA textures of the faces in :data:`vision.synth.render.SIDES` order: left (rear to front),
    front (left to right), right (front to rear), rear (right to left)."""
    rng = np.random.default_rng(spec.look + 1)
    bgr = body_colour(sprite)
    left = long_side(spec, bgr, rng)
    faces = (left, end_face(spec, bgr, True), left[:, ::-1], end_face(spec, bgr, False))
    out = []
    for f in faces:
        f = np.clip(f + rng.normal(0, 3.0, f.shape).astype(np.float32), 0, 255)
        out.append(np.dstack([f, np.ones(f.shape[:2], np.float32)]))
    return tuple(out)
