"""Top views of vehicles and clutter: what a drone sees of their roofs.

A sprite is a premultiplied BGRA float32 image at :data:`PX_PER_M`, the vehicle's length along x with the front at the
right edge and its left side at the top row. Cars come from real drone crops when available (recoloured for the
colours the data lacks); so do vans, trucks and buses when a crop of their class with about their length-to-width
ratio exists (kept in their own colours; a semi-trailer longer than any truck crop is a truck crop's cab with its load
stretched), else they are drawn, as clutter always is.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from vision.synth.vehicles import VehicleSpec

PX_PER_M = 24.0
# a real crop is stretched to the vehicle's length x width at most this much (either way) in its length/width ratio;
# a 16 m semi-trailer with no crop that long is made of a truck crop's cab and its stretched load instead
MAX_ASPECT_STRETCH = 1.4


def _rounded_alpha(h: int, w: int, radius: float, inset: float = 0.0) -> np.ndarray:
    a = np.zeros((h, w), np.uint8)
    r = int(max(1, radius))
    i = int(inset)
    cv2.rectangle(a, (i + r, i), (w - 1 - i - r, h - 1 - i), 255, -1)
    cv2.rectangle(a, (i, i + r), (w - 1 - i, h - 1 - i - r), 255, -1)
    for cx, cy in ((i + r, i + r), (w - 1 - i - r, i + r), (i + r, h - 1 - i - r), (w - 1 - i - r, h - 1 - i - r)):
        cv2.circle(a, (cx, cy), r, 255, -1, cv2.LINE_AA)
    return cv2.GaussianBlur(a, (3, 3), 0).astype(np.float32) / 255.0


def _shade(c, k: float) -> tuple[int, int, int]:
    b, g, r = (int(np.clip(v * k, 0, 255)) for v in c)
    return b, g, r


def _finish(img: np.ndarray, alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    img = img.astype(np.float32) + rng.normal(0, 3.0, img.shape).astype(np.float32)
    img = np.clip(img, 0, 255)
    return np.dstack([img * alpha[..., None], alpha]).astype(np.float32)


def _across_profile(h: int, w: int, edge: float = 0.78) -> np.ndarray:
    """Brightness across the width: rounded body panels are darker towards the sides."""
    y = np.linspace(-1, 1, h)
    return (edge + (1 - edge) * (1 - y**2) ** 0.5)[:, None, None] * np.ones((1, w, 1), np.float32)


def draw_car(spec: VehicleSpec, rng: np.random.Generator, van: bool = False) -> np.ndarray:
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    c = spec.colour
    img = np.empty((h, w, 3), np.float32)
    img[:] = c
    img *= _across_profile(h, w)
    glass = (28 + int(rng.integers(0, 25)),) * 3
    if van:
        ws0, ws1, rear0 = 0.78, 0.86, 0.02
    else:
        ws0, ws1, rear0 = 0.58 + rng.uniform(-0.03, 0.03), 0.73, 0.13
    roof0, roof1 = rear0 + (0.02 if van else 0.09), ws0
    inset = int(0.12 * h)
    # windscreen (trapezoid: narrower at the roof), rear window, roof, side windows
    pts = np.array(
        [[ws0 * w, inset * 1.3], [ws1 * w, inset * 0.6], [ws1 * w, h - inset * 0.6], [ws0 * w, h - inset * 1.3]]
    )
    cv2.fillConvexPoly(img, pts.astype(np.int32), glass, cv2.LINE_AA)
    if not van:
        pts = np.array(
            [
                [rear0 * w, inset * 0.8],
                [roof0 * w, inset * 1.3],
                [roof0 * w, h - inset * 1.3],
                [rear0 * w, h - inset * 0.8],
            ]
        )
        cv2.fillConvexPoly(img, pts.astype(np.int32), glass, cv2.LINE_AA)
    roof_colour = _shade(c, 1.08) if rng.random() < 0.85 else glass  # some cars have a dark panoramic roof
    cv2.rectangle(img, (int(roof0 * w), int(inset * 1.3)), (int(roof1 * w), int(h - inset * 1.3)), roof_colour, -1)
    for y0, y1 in ((inset * 0.6, inset * 1.3), (h - inset * 1.3, h - inset * 0.6)):
        cv2.rectangle(img, (int(roof0 * w), int(y0)), (int(roof1 * w), int(y1)), _shade(glass, 1.3), -1)
    # lights and mirrors
    lw, lh = max(2, int(0.04 * w)), max(2, int(0.18 * h))
    for y in (1, h - 1 - lh):
        cv2.rectangle(img, (w - lw - 1, y), (w - 2, y + lh), (200, 225, 235), -1)
        cv2.rectangle(img, (1, y), (lw, y + lh), (40, 40, 190), -1)
    mx = int((ws0 + 0.01) * w)
    for y in (0, h - 3):
        cv2.rectangle(img, (mx, y), (mx + max(2, int(0.03 * w)), y + 2), _shade(c, 0.6), -1)
    alpha = _rounded_alpha(h, w, 0.3 * h)
    return _finish(img, alpha, rng)


def draw_truck(spec: VehicleSpec, rng: np.random.Generator) -> np.ndarray:
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    cab = int(2.3 * PX_PER_M)
    gap = int(0.35 * PX_PER_M)
    box_colour = [(225, 225, 225), (190, 190, 195), spec.colour, (60, 70, 80)][int(rng.integers(4))]
    img = np.empty((h, w, 3), np.float32)
    img[:] = box_colour
    img[:, w - cab - gap : w - cab] = 45
    img[:, w - cab :] = spec.colour
    img[:, w - cab :] *= _across_profile(h, cab, 0.8)
    cv2.rectangle(img, (w - int(0.5 * PX_PER_M), int(0.1 * h)), (w - 2, int(0.9 * h)), (35, 35, 35), -1)  # windscreen
    for x in range(0, w - cab - gap, max(3, int(0.45 * PX_PER_M))):  # roof ribs of the box/trailer
        cv2.line(img, (x, 1), (x, h - 2), _shade(box_colour, 0.88), 1)
    cv2.rectangle(img, (0, 0), (w - cab - gap - 1, h - 1), _shade(box_colour, 0.75), 1)
    alpha = _rounded_alpha(h, w, 0.06 * h)
    return _finish(img, alpha, rng)


def draw_bus(spec: VehicleSpec, rng: np.random.Generator) -> np.ndarray:
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    roof = [(235, 235, 235), spec.colour, (30, 190, 230), (200, 200, 200)][int(rng.integers(4))]
    img = np.empty((h, w, 3), np.float32)
    img[:] = roof
    img *= _across_profile(h, w, 0.88)
    cv2.rectangle(img, (w - int(0.35 * PX_PER_M), 2), (w - 1, h - 3), (30, 30, 30), -1)  # windscreen edge
    for k in range(int(rng.integers(1, 3))):  # air-conditioning units
        x0 = int((0.25 + 0.3 * k) * w)
        cv2.rectangle(img, (x0, int(0.18 * h)), (x0 + int(2.4 * PX_PER_M), int(0.82 * h)), (150, 150, 155), -1)
        cv2.rectangle(img, (x0, int(0.18 * h)), (x0 + int(2.4 * PX_PER_M), int(0.82 * h)), (90, 90, 95), 1)
    for x in np.linspace(0.1, 0.9, 3) * w:  # roof hatches
        cv2.rectangle(img, (int(x), int(0.35 * h)), (int(x + 0.8 * PX_PER_M), int(0.65 * h)), (80, 90, 95), -1)
    alpha = _rounded_alpha(h, w, 0.12 * h)
    return _finish(img, alpha, rng)


def draw_clutter(spec: VehicleSpec, rng: np.random.Generator) -> np.ndarray:
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    img = np.empty((h, w, 3), np.float32)
    img[:] = spec.colour
    if spec.colour_name == "container":
        for x in range(0, w, max(2, int(0.3 * PX_PER_M))):
            cv2.line(img, (x, 0), (x, h - 1), _shade(spec.colour, 0.8), 1)
        cv2.rectangle(img, (0, 0), (w - 1, h - 1), _shade(spec.colour, 0.6), 2)
        alpha = np.ones((h, w), np.float32)
    elif spec.colour_name == "box":
        cv2.rectangle(img, (1, 1), (w - 2, h - 2), _shade(spec.colour, 0.8), 1)
        r = int(0.3 * min(w, h))
        cv2.circle(img, (w // 3, h // 2), r, _shade(spec.colour, 0.55), -1, cv2.LINE_AA)  # a fan
        alpha = np.ones((h, w), np.float32)
    else:  # flatbed trailer: planks
        for y in range(0, h, max(2, int(0.25 * PX_PER_M))):
            cv2.line(img, (0, y), (w - 1, y), _shade(spec.colour, 0.75), 1)
        alpha = _rounded_alpha(h, w, 2)
    return _finish(img, alpha, rng)


def recolour(crop: np.ndarray, target: tuple[int, int, int]) -> np.ndarray:
    """Repaint the body of a real car crop, keeping its shading; glass and shadows (the dark parts) stay."""
    gray = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY).astype(np.float32)
    body: np.ndarray = (gray >= np.percentile(gray, 40)).astype(np.float32)
    body = cv2.GaussianBlur(body, (5, 5), 0)
    ref = max(float(np.median(gray[gray >= np.percentile(gray, 40)])), 1.0)
    painted = np.asarray(target, np.float32)[None, None, :] * np.clip(gray / ref, 0.3, 1.6)[..., None]
    out = crop.astype(np.float32) * (1 - body[..., None]) + painted * body[..., None]
    return np.clip(out, 0, 255).astype(np.uint8)


def real_car(spec: VehicleSpec, crops: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    crop = crops[int(rng.integers(len(crops)))]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]  # we do not know which end is the front; either is a plausible car
    if rng.random() < 0.5:
        crop = crop[::-1]
    gray = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2GRAY)
    if spec.colour_name != "original" and float(np.median(gray)) > 70 and rng.random() < 0.6:
        crop = recolour(np.ascontiguousarray(crop), spec.colour)
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    # the crop is a tight axis-aligned box around the car: trim a little of it, round the corners
    ch, cw = crop.shape[:2]
    crop = crop[int(0.06 * ch) : ch - int(0.06 * ch), int(0.02 * cw) : cw - int(0.02 * cw)]
    img = cv2.resize(np.ascontiguousarray(crop), (w, h), interpolation=cv2.INTER_AREA).astype(np.float32)
    alpha = _rounded_alpha(h, w, 0.3 * h)
    return _finish(img, alpha, rng)


def real_vehicle(spec: VehicleSpec, crops: list[np.ndarray], rng: np.random.Generator) -> np.ndarray | None:
    """A truck, bus or van from a real crop of its class, scaled to its length x width; None when no crop's
    length/width ratio is within :data:`MAX_ASPECT_STRETCH` of the vehicle's."""
    target = spec.length / spec.width
    fits = [c for c in crops if abs(math.log(c.shape[1] / c.shape[0] / target)) <= math.log(MAX_ASPECT_STRETCH)]
    if not fits:
        return None
    crop = fits[int(rng.integers(len(fits)))]
    flip = rng.random() < 0.5  # either end of a bus or van may be its front (the crops are not told which)
    if spec.cls == "truck":
        flip = not cab_at_right(crop)  # a truck drives cab first
    if flip:
        crop = crop[:, ::-1]
    if rng.random() < 0.5:
        crop = crop[::-1]
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    ch, cw = crop.shape[:2]
    crop = crop[int(0.04 * ch) : ch - int(0.04 * ch), int(0.01 * cw) : cw - int(0.01 * cw)]
    img = cv2.resize(np.ascontiguousarray(crop), (w, h), interpolation=cv2.INTER_AREA).astype(np.float32)
    alpha = _rounded_alpha(h, w, (0.3 if spec.cls == "van" else 0.1) * h)
    return _finish(img, alpha, rng)


def cab_at_right(crop: np.ndarray) -> bool:
    """Which end of a truck crop is its cab: the end with the darkest band across it (windscreen, the gap between
    cab and load) within its outer 40 % (the outermost 4 % is the outline's dark edge)."""
    gray = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2GRAY).astype(np.float32)
    h, w = gray.shape
    profile = gray[int(0.2 * h) : max(int(0.8 * h), int(0.2 * h) + 1)].mean(axis=0)
    a, b = max(1, int(0.04 * w)), max(2, int(0.4 * w))
    return float(profile[w - b : w - a].min()) < float(profile[a:b].min())


def real_semi(spec: VehicleSpec, crops: list[np.ndarray], rng: np.random.Generator) -> np.ndarray | None:
    """A truck longer than any crop's length/width allows (a semi-trailer): a truck crop's cab end kept at the
    crop's own scale (its width is the truck's width), the rest of it, the load, stretched to the truck's length;
    None when the cab would take more than half of it."""
    crop = crops[int(rng.integers(len(crops)))]
    if not cab_at_right(crop):
        crop = crop[:, ::-1]  # front at the right edge, as every sprite has it
    if rng.random() < 0.5:
        crop = crop[::-1]
    ch, cw = crop.shape[:2]
    crop = crop[int(0.04 * ch) : ch - int(0.04 * ch), int(0.01 * cw) : cw - int(0.01 * cw)]
    ch, cw = crop.shape[:2]
    w, h = int(round(spec.length * PX_PER_M)), int(round(spec.width * PX_PER_M))
    cut = int(round(0.65 * cw))
    cab_px = int(round((cw - cut) * spec.width / ch * PX_PER_M))
    if cab_px < 1 or cab_px > w // 2:
        return None
    load = cv2.resize(np.ascontiguousarray(crop[:, :cut]), (w - cab_px, h), interpolation=cv2.INTER_LINEAR)
    cab = cv2.resize(np.ascontiguousarray(crop[:, cut:]), (cab_px, h), interpolation=cv2.INTER_AREA)
    img = np.hstack([load, cab]).astype(np.float32)
    return _finish(img, _rounded_alpha(h, w, 0.1 * h), rng)


def sprite_for(
    spec: VehicleSpec, crops: list[np.ndarray], vehicle_crops: dict[str, list[np.ndarray]] | None = None
) -> np.ndarray:
    """The sprite of ``spec``: ``crops`` are real car crops, ``vehicle_crops`` real truck/bus/van crops by class."""
    rng = np.random.default_rng(spec.look)
    if spec.kind == "clutter":
        return draw_clutter(spec, rng)
    if spec.cls == "car":
        if crops and rng.random() < 0.75:
            return real_car(spec, crops, rng)
        return draw_car(spec, rng)
    own = vehicle_crops.get(spec.cls) if vehicle_crops else None
    if own:
        real = real_vehicle(spec, own, rng)
        if real is None and spec.cls == "truck":
            real = real_semi(spec, own, rng)
        if real is not None:
            return real
    if spec.cls == "van":
        return draw_car(spec, rng, van=True)
    if spec.cls == "truck":
        return draw_truck(spec, rng)
    return draw_bus(spec, rng)
