"""The ground as one big image in world coordinates (a "raster"), with its road mask.

Each frame is a perspective warp of this raster by the true camera, so what the camera sees and where the road is
are exact. The raster's resolution is about one raster pixel per image pixel at the image centre.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from vision.synth.assets import EPFL_M_PER_PX, Assets
from vision.synth.roads import Polygon, RoadNetwork, Stroke, offset

SHIFT = 3  # sub-pixel bits for cv2 drawing
COLOURS = {
    "white": (228, 230, 230),
    "yellow": (40, 190, 225),
    "gravel": (120, 135, 142),
    "grass": (60, 115, 85),
    "concrete": (165, 168, 168),
    "sidewalk": (175, 178, 180),
    "kerb": (190, 192, 192),
    "lot": (105, 108, 110),
}


@dataclass
class Grid:
    """World (x east, y north) <-> raster pixel (u right, v down) at ``r`` pixels per metre."""

    x0: float
    y1: float
    r: float
    width: int
    height: int

    @staticmethod
    def cover(extent: tuple[float, float, float, float], r: float) -> "Grid":
        x0, y0, x1, y1 = extent
        return Grid(x0, y1, r, max(2, int(math.ceil((x1 - x0) * r))), max(2, int(math.ceil((y1 - y0) * r))))

    def to_px(self, pts) -> np.ndarray:
        pts = np.asarray(pts, np.float64).reshape(-1, 2)
        return np.column_stack([(pts[:, 0] - self.x0) * self.r, (self.y1 - pts[:, 1]) * self.r])

    def to_world(self, uv) -> np.ndarray:
        uv = np.asarray(uv, np.float64).reshape(-1, 2)
        return np.column_stack([self.x0 + uv[:, 0] / self.r, self.y1 - uv[:, 1] / self.r])

    @property
    def world_from_px(self) -> np.ndarray:
        return np.array([[1 / self.r, 0, self.x0], [0, -1 / self.r, self.y1], [0, 0, 1.0]])

    def fixed(self, pts) -> np.ndarray:
        return np.round(self.to_px(pts) * (1 << SHIFT)).astype(np.int32)


@dataclass
class Ground:
    image: np.ndarray  # BGR uint8
    road: np.ndarray  # uint8, 255 = road surface
    grid: Grid
    asphalt_bgr: tuple[int, int, int]


def _dashes(pts: np.ndarray, on: float, off: float, phase: float = 0.0) -> list[np.ndarray]:
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    out = []
    start = phase
    while start < s[-1]:
        a, b = start, min(start + on, s[-1])
        q = np.concatenate([[a], s[(s > a) & (s < b)], [b]])
        out.append(np.column_stack([np.interp(q, s, pts[:, 0]), np.interp(q, s, pts[:, 1])]))
        start += on + off
    return out


def paint_stroke(canvas: np.ndarray, grid: Grid, stroke: Stroke, value) -> None:
    """Draw a stroke; lines thinner than a pixel are drawn one pixel wide with proportionally less intensity."""
    w_px = stroke.width_m * grid.r
    thickness = max(1, int(round(w_px)))
    if w_px < 1.0 and not isinstance(value, (int, float)):
        value = None  # caller blends thin markings itself (see _blend_thin)
    parts = _dashes(stroke.pts, *stroke.dash) if stroke.dash else [stroke.pts]
    polys = [grid.fixed(p) for p in parts if len(p) >= 2]
    if value is not None and polys:
        cv2.polylines(canvas, polys, False, value, thickness, cv2.LINE_AA, SHIFT)


def paint_polygon(canvas: np.ndarray, grid: Grid, poly: Polygon, value) -> None:
    cv2.fillPoly(canvas, [grid.fixed(poly.pts)], value, cv2.LINE_AA, SHIFT)


def _route_strokes(net: RoadNetwork) -> list[Stroke]:
    """Every lane is asphalt even where the painted roads do not cover it (flared roundabout entries)."""
    return [Stroke(r.pts[::4], 3.7, "asphalt") for r in net.routes]


def layer_mask(net: RoadNetwork, grid: Grid, layers: tuple[str, ...], with_routes: bool = False) -> np.ndarray:
    mask = np.zeros((grid.height, grid.width), np.uint8)
    strokes = net.strokes + (_route_strokes(net) if with_routes else [])
    for s in strokes:
        if s.layer in layers:
            paint_stroke(mask, grid, s, 255)
    for p in net.polygons:
        if p.layer in layers:
            paint_polygon(mask, grid, p, 255)
    return mask


def road_mask(net: RoadNetwork, grid: Grid) -> np.ndarray:
    """Drivable surface: asphalt of roads and lanes, minus islands. Parking lots and pavements are not road."""
    road = layer_mask(net, grid, ("asphalt",), with_routes=True)
    island = layer_mask(net, grid, ("island",))
    road[island > 127] = 0
    return np.where(road > 127, 255, 0).astype(np.uint8)


def occupancy(net: RoadNetwork, grid: Grid) -> np.ndarray:
    """Where nothing else may be placed (roads, verges, pavements, islands, lots)."""
    return layer_mask(net, grid, ("asphalt", "verge", "sidewalk", "island", "barrier", "lot"), with_routes=True)


# ----------------------------------------------------------------------------------------------- textures
def _noise(rng: np.random.Generator, shape: tuple[int, int], cell: float) -> np.ndarray:
    """Smooth value noise in [-1, 1] with features about ``cell`` pixels large."""
    h, w = shape
    gh, gw = max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)
    g = rng.uniform(-1, 1, (gh, gw)).astype(np.float32)
    return cv2.resize(g, (w, h), interpolation=cv2.INTER_CUBIC)


def _fine_tile(rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Grain to tile over the raster: fixed in the world, so ego-motion estimators have corners to track."""
    t = rng.normal(0, sigma, (509, 491)).astype(np.float32)
    t = cv2.GaussianBlur(t, (0, 0), 0.8) * 1.8
    return t


def _add_grain(img: np.ndarray, tile: np.ndarray, rows: int = 509) -> np.ndarray:
    h, w = img.shape[:2]
    row = np.tile(tile, (1, w // tile.shape[1] + 1))[:, :w]
    for y0 in range(0, h, rows):
        y1 = min(h, y0 + rows)
        g = row[: y1 - y0, :, None]
        img[y0:y1] = np.clip(img[y0:y1].astype(np.float32) + g, 0, 255).astype(np.uint8)
    return img


def _base_texture(grid: Grid, rng: np.random.Generator, assets: Assets, style: str) -> np.ndarray:
    """Off-road ground: a mosaic of real aerial patches, or procedural fields, at a coarse design resolution."""
    design_r = min(grid.r, 2.5)  # 0.4 m per pixel is all the detail a base texture needs
    dh, dw = max(2, int(grid.height * design_r / grid.r)), max(2, int(grid.width * design_r / grid.r))
    if assets.ground_patches:
        cell_m = assets.ground_patches[0].shape[0] * EPFL_M_PER_PX
        cell = max(2, int(round(cell_m * design_r)))
        base: np.ndarray = np.zeros((dh + cell, dw + cell, 3), np.uint8)
        for y in range(0, dh + 1, cell):
            for x in range(0, dw + 1, cell):
                p = assets.ground_patches[int(rng.integers(len(assets.ground_patches)))]
                p = np.rot90(p, int(rng.integers(4)))
                base[y : y + cell, x : x + cell] = cv2.resize(
                    np.ascontiguousarray(p), (cell, cell), interpolation=cv2.INTER_AREA
                )
        base = base[:dh, :dw]
    else:
        palette = {
            "rural": [(70, 120, 95), (80, 135, 120), (95, 140, 150), (60, 100, 80)],
            "suburban": [(70, 118, 95), (100, 130, 130), (85, 110, 100)],
            "urban": [(120, 125, 130), (100, 110, 115), (85, 110, 95)],
        }[style]
        a, b = (np.asarray(palette[int(rng.integers(len(palette)))], np.float32) for _ in range(2))
        m = (_noise(rng, (dh, dw), 60 * design_r) * 0.5 + 0.5)[..., None]
        base = a * m + b * (1 - m)
        base += (_noise(rng, (dh, dw), 8 * design_r) * 14)[..., None]
        base = np.clip(base, 0, 255).astype(np.uint8)
    return cv2.resize(base, (grid.width, grid.height), interpolation=cv2.INTER_LINEAR)


def _draw_buildings_and_trees(
    img: np.ndarray, grid: Grid, occ: np.ndarray, rng: np.random.Generator, style: str, sun_shadow: np.ndarray
) -> None:
    """Flat-roofed and pitched buildings and tree crowns where nothing else is (drawn on the raster)."""
    area_m2 = grid.width * grid.height / grid.r**2
    n_build = int(area_m2 / {"urban": 500, "suburban": 1500, "rural": 6000}[style])
    n_tree = int(area_m2 / {"urban": 400, "suburban": 150, "rural": 200}[style])
    free = cv2.erode((occ < 128).astype(np.uint8), np.ones((3, 3), np.uint8))
    H, W = occ.shape

    def is_free(pts_world) -> bool:
        uv = grid.to_px(pts_world).astype(int)
        ok = (uv[:, 0] >= 0) & (uv[:, 0] < W) & (uv[:, 1] >= 0) & (uv[:, 1] < H)
        if not ok.all():
            return True  # off the raster edge: harmless
        return bool(free[uv[:, 1], uv[:, 0]].all())

    x0, y1 = grid.x0, grid.y1
    x1, y0 = x0 + grid.width / grid.r, y1 - grid.height / grid.r
    roofs = [(70, 80, 150), (95, 95, 100), (150, 150, 152), (60, 75, 105), (200, 200, 198)]
    for _ in range(n_build):
        cx, cy = rng.uniform(x0, x1), rng.uniform(y0, y1)
        L, Wd = rng.uniform(8, 30), rng.uniform(7, 16)
        ang = rng.uniform(0, math.pi)
        f, l_ = np.array([math.cos(ang), math.sin(ang)]), np.array([-math.sin(ang), math.cos(ang)])
        corners = (
            np.array([[cx, cy]])
            + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]])[:, :1] * f * L / 2
            + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]])[:, 1:] * l_ * Wd / 2
        )
        if not is_free(np.vstack([corners, corners + sun_shadow * 6])):
            continue
        height = rng.uniform(4, 15)
        shadow = np.vstack([corners, corners + sun_shadow * height])
        hull = cv2.convexHull(grid.fixed(shadow).reshape(-1, 1, 2))
        cv2.fillConvexPoly(img, hull, (45, 50, 50), cv2.LINE_AA, SHIFT)
        colour = roofs[int(rng.integers(len(roofs)))]
        cv2.fillConvexPoly(img, grid.fixed(corners), colour, cv2.LINE_AA, SHIFT)
        if rng.random() < 0.5:  # pitched roof: ridge and one darker half
            mid_a, mid_b = (corners[0] + corners[3]) / 2, (corners[1] + corners[2]) / 2
            half = np.array([corners[0], corners[1], mid_b, mid_a])
            cv2.fillConvexPoly(img, grid.fixed(half), tuple(int(c * 0.8) for c in colour), cv2.LINE_AA, SHIFT)
    for _ in range(n_tree):
        cx, cy = rng.uniform(x0, x1), rng.uniform(y0, y1)
        rad = rng.uniform(1.5, 4.5)
        if not is_free(np.array([[cx, cy], [cx + rad, cy], [cx - rad, cy], [cx, cy + rad], [cx, cy - rad]])):
            continue
        c = grid.to_px([[cx, cy]])[0]
        s = grid.to_px([[cx + sun_shadow[0] * rad, cy + sun_shadow[1] * rad]])[0]
        rp = max(1, int(rad * grid.r))
        cv2.circle(img, tuple(int(v) for v in s), rp, (35, 50, 40), -1, cv2.LINE_AA)
        g = rng.integers(60, 110)
        cv2.circle(img, tuple(int(v) for v in c), rp, (int(g * 0.5), int(g), int(g * 0.7)), -1, cv2.LINE_AA)
        cv2.circle(
            img,
            tuple(int(v - rp * 0.25) for v in c),
            max(1, int(rp * 0.55)),
            (int(g * 0.65), int(g * 1.3), int(g * 0.9)),
            -1,
            cv2.LINE_AA,
        )


def asphalt_colour(rng: np.random.Generator) -> tuple[int, int, int]:
    g = int(rng.integers(70, 125))
    tint = int(rng.integers(-4, 5))
    return (g + tint, g, g - tint)


def build_ground(
    net: RoadNetwork,
    grid: Grid,
    rng: np.random.Generator,
    assets: Assets,
    sun_shadow: np.ndarray,
    asphalt: tuple[int, int, int],
) -> Ground:
    img = _base_texture(grid, rng, assets, net.style)
    occ = occupancy(net, grid)
    if not assets.ground_patches:  # real aerial patches already have houses and trees
        _draw_buildings_and_trees(img, grid, occ, rng, net.style, sun_shadow)
    for layer in ("verge", "sidewalk", "lot"):
        for s in net.strokes:
            if s.layer == layer:
                paint_stroke(img, grid, s, COLOURS.get(s.colour, COLOURS["gravel"]))
        for p in net.polygons:
            if p.layer == layer:
                paint_polygon(img, grid, p, COLOURS.get(p.colour, COLOURS["lot"]))
    # asphalt: a mask, then a textured grey blended through it
    road_any = layer_mask(net, grid, ("asphalt",), with_routes=True)
    patches = _noise(rng, img.shape[:2], 6 * grid.r) * 6  # repairs, wear
    _blend_strips(img, road_any, lambda y0, y1: np.asarray(asphalt, np.float32) + patches[y0:y1, :, None])  # noqa: F821  (runs before the del)
    del patches
    # wheel paths: slightly darker bands along every lane
    wheel = np.zeros(img.shape[:2], np.uint8)
    for r in net.routes:
        for d in (-0.85, 0.85):
            paint_stroke(wheel, grid, Stroke(offset(r.pts[::4], d), 0.6, "marking"), 26)
    _blend_strips(img, wheel, lambda y0, y1: np.zeros((1, 1, 3), np.float32))
    for layer in ("island", "barrier", "marking"):
        for s in net.strokes:
            if s.layer == layer:
                _paint_blended(img, grid, s, COLOURS.get(s.colour, COLOURS["white"]))
        for p in net.polygons:
            if p.layer == layer:
                paint_polygon(img, grid, p, COLOURS.get(p.colour, COLOURS["white"]))
    img = _add_grain(img, _fine_tile(rng, 5.0))
    return Ground(img, road_mask(net, grid), grid, asphalt)


def _blend_strips(img: np.ndarray, alpha: np.ndarray, colour_fn, rows: int = 512) -> None:
    """img = img * (1 - a) + colour * a, strip by strip (keeps memory low on 4K rasters)."""
    for y0 in range(0, img.shape[0], rows):
        y1 = min(img.shape[0], y0 + rows)
        a = alpha[y0:y1].astype(np.float32)[..., None] / 255.0
        if not a.any():
            continue
        out = img[y0:y1].astype(np.float32) * (1 - a) + colour_fn(y0, y1) * a
        img[y0:y1] = np.clip(out, 0, 255).astype(np.uint8)


def _paint_blended(img: np.ndarray, grid: Grid, stroke: Stroke, colour) -> None:
    """Paint a stroke with coverage-weighted colour, so sub-pixel markings stay faint instead of fat."""
    w_px = stroke.width_m * grid.r
    if w_px >= 1.5:
        paint_stroke(img, grid, stroke, colour)
        return
    cover = np.zeros(img.shape[:2], np.uint8)
    paint_stroke(cover, grid, stroke, int(255 * min(1.0, w_px / 1.5) * 0.9))
    ys, xs = np.nonzero(cover)
    if not len(ys):
        return
    a = cover[ys, xs].astype(np.float32)[:, None] / 255.0
    img[ys, xs] = (img[ys, xs] * (1 - a) + np.asarray(colour, np.float32) * a).astype(np.uint8)
