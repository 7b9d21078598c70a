"""Where static things go: a parking lot beside the road, parked vehicles, and vehicle-like clutter off the road."""

from __future__ import annotations

import math

import cv2
import numpy as np

from vision.synth.ground import Grid, occupancy
from vision.synth.roads import Polygon, RoadNetwork, Slot, Stroke, line
from vision.synth.vehicles import StaticObject, clutter_spec

PLACEMENT_PX_PER_M = 2.0


def inside(poly: np.ndarray, pts: np.ndarray) -> np.ndarray:
    contour = np.asarray(poly, np.float32).reshape(-1, 1, 2)
    return np.array([cv2.pointPolygonTest(contour, (float(x), float(y)), False) >= 0 for x, y in pts], bool)


def shrink(poly: np.ndarray, k: float) -> np.ndarray:
    c = poly.mean(axis=0)
    return c + (poly - c) * k


class FreeSpace:
    """Coarse map of where nothing is yet (roads, verges, lots and placed objects are taken)."""

    def __init__(self, net: RoadNetwork, extent, margin_m: float = 2.0):
        self.grid = Grid.cover(extent, PLACEMENT_PX_PER_M)
        occ = occupancy(net, self.grid)
        k = max(1, int(2 * margin_m * PLACEMENT_PX_PER_M) | 1)
        self.taken = cv2.dilate((occ > 0).astype(np.uint8), np.ones((k, k), np.uint8))

    def free(self, pts: np.ndarray) -> bool:
        uv = self.grid.to_px(pts).astype(int)
        h, w = self.taken.shape
        if ((uv[:, 0] < 0) | (uv[:, 0] >= w) | (uv[:, 1] < 0) | (uv[:, 1] >= h)).any():
            return False
        return not self.taken[uv[:, 1], uv[:, 0]].any()

    def take(self, poly: np.ndarray, margin_m: float = 1.5) -> None:
        c = poly.mean(axis=0)
        d = poly - c
        grown = c + d * (1 + margin_m / max(np.linalg.norm(d, axis=1).min(), 0.5))
        cv2.fillConvexPoly(self.taken, self.grid.to_px(grown).astype(np.int32), 1)


def _rect(cx, cy, length, width, ang) -> np.ndarray:
    f = np.array([math.cos(ang), math.sin(ang)])
    l_ = np.array([-math.sin(ang), math.cos(ang)])
    return np.array([[cx, cy]]) + np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]]) @ np.vstack(
        [f * length, l_ * width]
    )


def _interior(poly: np.ndarray, step: float = 1.5) -> np.ndarray:
    lo, hi = poly.min(axis=0), poly.max(axis=0)
    xs, ys = np.meshgrid(np.arange(lo[0], hi[0], step), np.arange(lo[1], hi[1], step))
    pts = np.column_stack([xs.ravel(), ys.ravel()])
    return np.vstack([poly, pts[inside(poly, pts)]])


def add_parking_lot(net: RoadNetwork, space: FreeSpace, visible: np.ndarray, rng: np.random.Generator) -> list[Slot]:
    """A small car park (not road) inside the view, if there is room; adds its paint to ``net``."""
    for _ in range(60):
        c = visible.mean(axis=0) + rng.uniform(-0.45, 0.45, 2) * (visible.max(axis=0) - visible.min(axis=0))
        rows = int(rng.integers(1, 3))
        n_slots = int(rng.integers(5, 12))
        length, depth = n_slots * 2.6 + 2, rows * 5.2 + 6.5
        ang = float(rng.uniform(0, math.pi))
        poly = _rect(c[0], c[1], length, depth, ang)
        if not space.free(_interior(poly)) or not inside(visible, poly).all():
            continue
        space.take(poly)
        net.polygons.append(Polygon(poly, "lot", "lot"))
        f = np.array([math.cos(ang), math.sin(ang)])
        l_ = np.array([-math.sin(ang), math.cos(ang)])
        slots = []
        for r in range(rows):
            side = -1 if r == 0 else 1
            row_c = c + l_ * side * (depth / 2 - 2.6 - 0.3)
            for k in range(n_slots + 1):
                x = (k - n_slots / 2) * 2.6
                a, b = row_c + f * x - l_ * 2.6, row_c + f * x + l_ * 2.6
                net.strokes.append(Stroke(line(a, b, 0.5), 0.12, "marking", "white"))
                if k < n_slots:
                    p = row_c + f * (x + 1.3)
                    slots.append(Slot(float(p[0]), float(p[1]), ang + math.pi / 2 * (1 if side < 0 else -1), False))
        return slots
    return []


def pick_visible_slots(slots: list[Slot], visible: np.ndarray) -> list[Slot]:
    if not slots:
        return []
    ok = inside(visible, np.array([[s.x, s.y] for s in slots]))
    return [s for s, k in zip(slots, ok) if k]


def place_clutter(
    n: int, space: FreeSpace, visible: np.ndarray, rng: np.random.Generator, first_vid: int
) -> list[StaticObject]:
    out: list[StaticObject] = []
    lo, hi = visible.min(axis=0), visible.max(axis=0)
    tries = 0
    while len(out) < n and tries < 40 * max(n, 1):
        tries += 1
        p = rng.uniform(lo, hi)
        if not inside(visible, p[None])[0]:
            continue
        spec = clutter_spec(rng, first_vid + len(out))
        ang = float(rng.uniform(0, 2 * math.pi))
        poly = _rect(p[0], p[1], spec.length, spec.width, ang)
        if not space.free(_interior(poly, 1.0)):
            continue
        space.take(poly, 1.0)
        out.append(StaticObject(spec, float(p[0]), float(p[1]), ang))
    return out
