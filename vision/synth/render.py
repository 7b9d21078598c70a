"""Per-frame rendering: warp the ground raster with the true camera, then draw every vehicle as a 3-D box whose roof
is its sprite, with shadows, motion blur, lighting changes, sensor noise and JPEG compression.

The boxes written as ground truth are the image bounding boxes of the same projected 3-D boxes, so truth and
pixels agree exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from vision.synth.camera import CameraTrack
from vision.synth.ground import Ground
from vision.synth.scene import SceneConfig, rng_for
from vision.synth.sides import side_textures
from vision.synth.sprites import sprite_for
from vision.synth.vehicles import VehicleSpec


@dataclass
class Placed:
    """One object in one frame."""

    spec: VehicleSpec
    x: float
    y: float
    heading: float  # rad, 0 = east, counter-clockwise
    speed: float  # m/s


@dataclass
class TruthBox:
    vid: int
    class_id: int
    left: float
    top: float
    width: float
    height: float
    visibility: float  # share of the projected box outline inside the image


def cuboids(objs: list[Placed]) -> np.ndarray:
    """(N, 8, 3) world corners: bottom rear-left, front-left, front-right, rear-right, then the same on the roof."""
    hd = np.array([p.heading for p in objs])
    f = np.stack([np.cos(hd), np.sin(hd)], axis=1)[:, None, :]
    l_ = np.stack([-np.sin(hd), np.cos(hd)], axis=1)[:, None, :]
    L = np.array([p.spec.length for p in objs])[:, None]
    W = np.array([p.spec.width for p in objs])[:, None]
    a = np.array([-0.5, 0.5, 0.5, -0.5])[None, :] * L
    b = np.array([0.5, 0.5, -0.5, -0.5])[None, :] * W
    base = np.array([[p.x, p.y] for p in objs])[:, None, :] + a[..., None] * f + b[..., None] * l_
    z = np.array([p.spec.height for p in objs])[:, None, None]
    bottom = np.concatenate([base, np.zeros_like(base[..., :1])], axis=2)
    top = np.concatenate([base, np.broadcast_to(z, base[..., :1].shape)], axis=2)
    return np.concatenate([bottom, top], axis=1)


def cuboid(p: Placed) -> np.ndarray:
    return cuboids([p])[0]


# faces as corner indices (outward normals), roof excluded
SIDES = ((0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7))


def truth_box(uv: np.ndarray, width: int, height: int) -> tuple[tuple[float, float, float, float], float] | None:
    """Clipped box (left, top, w, h) in pixel-edge coordinates, and the visible share, or None when out of view.

    OpenCV puts pixel i's centre at i; boxes use edges (pixel i spans [i, i+1)), as detectors output them.
    """
    e = uv + 0.5
    hull = cv2.convexHull(e.astype(np.float32))
    area = cv2.contourArea(hull)
    if area <= 1e-6:
        return None
    frame = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    inter, _ = cv2.intersectConvexConvex(hull, frame)
    if inter <= 0:
        return None
    x0, y0 = np.clip(e.min(axis=0), 0, [width, height])
    x1, y1 = np.clip(e.max(axis=0), 0, [width, height])
    if x1 - x0 < 0.5 or y1 - y0 < 0.5:
        return None
    return (float(x0), float(y0), float(x1 - x0), float(y1 - y0)), float(min(1.0, inter / area))


def sun(cfg: SceneConfig) -> tuple[float, float, np.ndarray]:
    """Sun azimuth (rad from north, clockwise), elevation (rad), and the ground shadow of a 1 m tall pole (x, y)."""
    rng = rng_for(cfg.seed, "sun")
    az = float(rng.uniform(0, 2 * math.pi))
    el = float(rng.uniform(math.radians(35), math.radians(65)))
    return az, el, -np.array([math.sin(az), math.cos(az)]) / math.tan(el)


class Renderer:
    def __init__(
        self,
        cfg: SceneConfig,
        cam: CameraTrack,
        ground: Ground,
        crops: list[np.ndarray],
        vehicle_crops: dict[str, list[np.ndarray]] | None = None,
    ):
        """``crops``: real car crops; ``vehicle_crops``: real truck/bus/van crops by class (both may be empty)."""
        self.cfg, self.cam, self.ground, self.crops = cfg, cam, ground, crops
        self.vehicle_crops = vehicle_crops or {}
        rng = rng_for(cfg.seed, "render")
        self.sun_az, self.sun_el, self.shadow_vec = sun(cfg)
        self.shadow_strength = float(rng.uniform(0.3, 0.5)) if cfg.shadows else 0.0
        self.gain_phase = rng.uniform(0, 2 * math.pi, 2)
        self.gain_amp = float(rng.uniform(0.03, 0.08)) if cfg.lighting_changes else 0.0
        # cloud shadows: smooth field in world metres drifting with the wind
        self.cloud = cv2.resize(rng.uniform(0, 1, (6, 6)).astype(np.float32), (64, 64), interpolation=cv2.INTER_CUBIC)
        self.cloud_cell_m = float(rng.uniform(15, 30))  # metres per cloud-grid cell
        self.wind = rng.uniform(-3, 3, 2)
        self.cloud_depth = float(rng.uniform(0.1, 0.25)) if cfg.lighting_changes and rng.random() < 0.6 else 0.0
        nrng = rng_for(cfg.seed, "noise")
        self.noise = (
            [nrng.normal(0, cfg.noise_sigma, (cfg.height, cfg.width, 3)).astype(np.float32) for _ in range(3)]
            if cfg.noise_sigma > 0
            else []
        )
        self.sprites: dict[int, tuple[np.ndarray, tuple[np.ndarray, ...]]] = {}

    def sprite(self, spec: VehicleSpec):
        if spec.vid not in self.sprites:
            sp = sprite_for(spec, self.crops, self.vehicle_crops)
            self.sprites[spec.vid] = (sp, side_textures(spec, sp))
        return self.sprites[spec.vid]

    # ------------------------------------------------------------------------------------------------- frame
    def render(self, i: int, objects: list[Placed]) -> tuple[np.ndarray, np.ndarray, list[TruthBox]]:
        """Image (BGR uint8), road mask (uint8 0/255) and the truth boxes of vehicles in view."""
        cfg, cam = self.cfg, self.cam
        W, H = cfg.width, cfg.height
        Hw = cam.ground_homography(i) @ self.ground.grid.world_from_px
        img = cv2.warpPerspective(self.ground.image, Hw, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        road = cv2.warpPerspective(self.ground.road, Hw, (W, H), flags=cv2.INTER_NEAREST, borderValue=0)

        C = cam.centre(i)
        P = cam.projection(i)
        self._P, self._C, self._Hg = P, C, cam.ground_homography(i)  # per-frame cache for the helpers
        placed = []
        if objects:
            corners_all = cuboids(objects)
            h_all = corners_all @ P[:, :3].T + P[:, 3]
            for p, corners, h in zip(objects, corners_all, h_all):
                if (h[:, 2] <= 0.5).any():
                    continue
                uv = h[:, :2] / h[:, 2:3]
                lo, hi = uv.min(axis=0), uv.max(axis=0)
                if hi[0] < -2 or hi[1] < -2 or lo[0] > W + 2 or lo[1] > H + 2:
                    continue
                placed.append((float(np.hypot(p.x - C[0], p.y - C[1])), p, corners, uv))
        placed.sort(key=lambda t: -t[0])  # far first: near objects are drawn over them

        if self.shadow_strength > 0 and placed:
            self._shadows(img, [(t[1], t[2]) for t in placed])
        boxes = []
        for _, p, corners, uv in placed:
            self._draw_object(img, i, p, corners, uv)
            if p.spec.kind != "clutter":
                tb = truth_box(uv, W, H)
                if tb is not None:
                    (x, y, w, h), vis = tb
                    boxes.append(TruthBox(p.spec.vid, p.spec.class_id, x, y, w, h, vis))
        img = self._photometric(img, i)
        return img, road, boxes

    def _shadows(self, img: np.ndarray, objs: list[tuple[Placed, np.ndarray]]) -> None:
        mask: np.ndarray = np.zeros(img.shape[:2], np.uint8)
        Hg = self._Hg
        lo: np.ndarray = np.array([np.inf, np.inf])
        hi: np.ndarray = np.array([-np.inf, -np.inf])
        for p, corners in objs:
            base = corners[:4, :2]
            pts = np.vstack([base, base + self.shadow_vec * p.spec.height * 0.9])
            h = np.column_stack([pts, np.ones(len(pts))]) @ Hg.T
            if (h[:, 2] <= 0).any():
                continue
            uv = h[:, :2] / h[:, 2:3]
            lo, hi = np.minimum(lo, uv.min(axis=0)), np.maximum(hi, uv.max(axis=0))
            hull = cv2.convexHull(np.round(uv * 8).astype(np.int32))
            cv2.fillConvexPoly(mask, hull, 255, cv2.LINE_AA, 3)
        H, W = mask.shape
        x0, y0 = max(0, int(lo[0]) - 1), max(0, int(lo[1]) - 1)
        x1, y1 = min(W, int(hi[0]) + 2), min(H, int(hi[1]) + 2)
        if x1 > x0 and y1 > y0:
            keep = 255 - (mask[y0:y1, x0:x1].astype(np.float32) * self.shadow_strength).astype(np.uint8)
            img[y0:y1, x0:x1] = cv2.multiply(img[y0:y1, x0:x1], cv2.cvtColor(keep, cv2.COLOR_GRAY2BGR), scale=1 / 255)

    def _draw_object(self, img: np.ndarray, i: int, p: Placed, corners: np.ndarray, uv: np.ndarray) -> None:
        cfg = self.cfg
        H, W = img.shape[:2]
        sprite, side_tex = self.sprite(p.spec)
        # motion blur: how far the object moves in the image during the exposure
        blur = np.zeros(2)
        if cfg.motion_blur and p.speed > 0.1:
            d = np.array([math.cos(p.heading), math.sin(p.heading)]) * p.speed * cfg.exposure
            ends = np.array([[p.x, p.y, p.spec.height, 1.0], [p.x + d[0], p.y + d[1], p.spec.height, 1.0]]) @ self._P.T
            blur = ends[1, :2] / ends[1, 2] - ends[0, :2] / ends[0, 2]
        pad = int(math.ceil(np.abs(blur).max())) + 2
        x0, y0 = np.floor(uv.min(axis=0)).astype(int) - pad
        x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + pad
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, W), min(y1, H)
        if cx1 <= cx0 or cy1 <= cy0:
            return
        w, h = x1 - x0, y1 - y0
        off = np.array([x0, y0], np.float64)
        # sides visible from the camera, each its texture mapped onto the projected face
        layer = np.zeros((h, w, 4), np.float32)
        C = self._C
        centre = corners.mean(axis=0)
        sun_dir = np.array([math.sin(self.sun_az), math.cos(self.sun_az)])
        for face, tex in zip(SIDES, side_tex):
            q = corners[list(face)]
            fc = q.mean(axis=0)
            outward = fc - centre
            outward[2] = 0.0
            if np.dot(outward, C - fc) <= 0:
                continue
            shade = 0.75 + 0.25 * max(
                0.0, float(np.dot(outward[:2], sun_dir)) / max(float(np.linalg.norm(outward[:2])), 1e-9)
            )
            face_uv = (uv[list(face)] - off).astype(np.float32)
            if cv2.contourArea(face_uv) < 0.5:  # seen edge-on: nothing to draw, and no transform to fit
                continue
            th, tw = tex.shape[:2]
            # texture corners for the face's corners: bottom at its first end, bottom at its second, then the top
            src = np.array([[-0.5, th - 0.5], [tw - 0.5, th - 0.5], [tw - 0.5, -0.5], [-0.5, -0.5]], np.float32)
            M = cv2.getPerspectiveTransform(src, face_uv)
            warped = np.asarray(
                cv2.warpPerspective(
                    tex, M, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0, 0)
                ),
                np.float32,
            )
            warped[..., :3] *= np.float32(shade)
            layer = warped + layer * (1.0 - warped[..., 3:4])
        # roof: the sprite mapped onto the projected top face
        sh, sw = sprite.shape[:2]
        src = np.array([[-0.5, -0.5], [sw - 0.5, -0.5], [sw - 0.5, sh - 0.5], [-0.5, sh - 0.5]], np.float32)
        dst = (uv[4:8] - off).astype(np.float32)
        M = cv2.getPerspectiveTransform(src, dst)
        top = cv2.warpPerspective(
            sprite, M, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0, 0)
        )
        ta = top[..., 3:4]
        layer = top + layer * (1.0 - ta)
        n = float(np.hypot(*blur))
        if n >= 1.0:
            k = int(math.ceil(n)) | 1
            kernel = np.zeros((k, k), np.float32)
            c = k // 2
            e = blur / n * (n / 2)
            cv2.line(
                kernel,
                (int(round(c - e[0])), int(round(c - e[1]))),
                (int(round(c + e[0])), int(round(c + e[1]))),
                1.0,
                1,
                cv2.LINE_AA,
            )
            kernel /= kernel.sum()
            layer = cv2.filter2D(layer, -1, kernel, borderType=cv2.BORDER_CONSTANT)
        sub = layer[cy0 - y0 : cy1 - y0, cx0 - x0 : cx1 - x0]
        roi = img[cy0:cy1, cx0:cx1].astype(np.float32)
        out = sub[..., :3] + roi * (1.0 - sub[..., 3:4])
        img[cy0:cy1, cx0:cx1] = np.clip(out, 0, 255).astype(np.uint8)

    def _photometric(self, img: np.ndarray, i: int) -> np.ndarray:
        cfg = self.cfg
        t = i / cfg.fps
        gain = 1.0 + self.gain_amp * (
            math.sin(2 * math.pi * 0.05 * t + self.gain_phase[0]) * 0.7
            + math.sin(2 * math.pi * 0.13 * t + self.gain_phase[1]) * 0.3
        )
        shade: np.ndarray | float = gain
        if self.cloud_depth > 0:
            gw, gh = max(2, cfg.width // 16), max(2, cfg.height // 16)
            us, vs = np.meshgrid(np.linspace(0, cfg.width - 1, gw), np.linspace(0, cfg.height - 1, gh))
            g = self.cam.image_to_ground(i, np.column_stack([us.ravel(), vs.ravel()]))
            g = (g - self.wind * t) / self.cloud_cell_m
            mx = cv2.remap(
                self.cloud,
                (g[:, 0] % 64).reshape(gh, gw).astype(np.float32),
                (g[:, 1] % 64).reshape(gh, gw).astype(np.float32),
                cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_WRAP,
            )
            small = gain * (1.0 - self.cloud_depth * np.clip((mx - 0.45) * 4, 0, 1))
            grey_shade = cv2.resize(small.astype(np.float32), (cfg.width, cfg.height), interpolation=cv2.INTER_LINEAR)
            shade = cv2.cvtColor(grey_shade, cv2.COLOR_GRAY2BGR)
        out = (
            cv2.multiply(img, shade, dtype=cv2.CV_32F)
            if isinstance(shade, np.ndarray)
            else img.astype(np.float32) * np.float32(shade)
        )
        if self.noise:
            noise = self.noise[i % len(self.noise)]
            out += noise if i % 2 else noise[::-1]  # flipped: more variety from few samples
        np.clip(out, 0, 255, out=out)
        img = out.astype(np.uint8)
        if cfg.jpeg_quality is not None:
            ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(cfg.jpeg_quality)])
            decoded = cv2.imdecode(buf, cv2.IMREAD_COLOR) if ok else None
            if decoded is not None:  # a buffer imencode just wrote always decodes
                img = decoded
        return img
