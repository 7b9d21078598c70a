"""Ground scale from the vehicles themselves, for clips with neither telemetry nor calibration.

Every tracked vehicle is measured in the image itself, not by its box: detector boxes and motion blobs of vehicles
10 px long are several pixels looser than the vehicle (blob dilation, shadow, quantisation), which at that size is
a 40 % error. Around the track's box the pixels that differ from the local road surface (median and spread of a
ring around the box) form the vehicle: the components whose centre lies inside the box, cut at half the vehicle's
own contrast (where a blurred edge crosses the true one). Their second moments give extents (a bar of n pixels has
variance (n^2 - 1) / 12): along the direction of travel the vehicle's length, across it its width. Shadows are
always darker than the road, so a vehicle brighter than the road is measured by its bright pixels alone and, when
there are enough of them, only such vehicles count. Compared with class priors (car 4.5 x 1.8 m, van, truck, bus)
each vehicle gives pixels per metre, sqrt(k_length * k_width) so the length's motion smear and the width's blur meet
in the middle; one vote per track, robust statistics over the tracks (where most agree: ``fleet_mode``; MAD).

Nadir view: one pixels-per-metre number. Oblique view: on a flat ground plane seen by a camera without roll, the
lateral magnification (pixels per metre along image rows) is linear in the image row and zero at the horizon,
k(y) = a (y - y_horizon). A robust line fit of each vehicle's lateral extent against its row gives a and the
horizon; with an assumed focal length (24 mm-equivalent, the common drone lens) that is a full camera (height,
pitch) and a ground homography, so the scale varies with position. Where the road's lines meet in a vanishing point
(``tracking.horizon``), that gives the horizon, and each vehicle's lateral size gives the slope a by itself: a few
vehicles suffice (the fit of both from vehicles alone needs many at different rows, which a toll plaza or a quiet
road does not have).

Observations live in the image of an anchor frame (the first of the segment), carried there by the ego-motion
chain, so a moving or zooming drone keeps its scale; when the view has changed too much from the anchor (zoom
by more than 1.4x, or moved by more than a frame) a new segment starts on the current frame (the measurements are
carried over), and only the last ``size_window_s`` seconds of vehicles count.
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

import cv2
import numpy as np

from tracking.config import SpeedConfig
from tracking.horizon import Horizon, estimate_horizon, search_in_background

# (length, width) metres by class (VEHICLE_CLASSES order: car, truck, bus, van). European fleet means; a truck's
# length (7-18 m) is too variable to measure anything by, so trucks count by their width only.
CAR, TRUCK, BUS, VAN = 0, 1, 2, 3
RING_PX = 2  # background ring around the measuring window
MIN_CONTRAST = 14.0  # grey levels a vehicle pixel differs from the road at least
# time between two measurements of one track: neighbouring frames show nearly the same image, and once a track has
# a few measurements more only cost time (~0.1-0.3 ms each; 50-100 vehicles in view). In seconds, not calls: the pipeline hands vehicles over on detector frames only, every 1-3 frames (adaptive), and
# counting calls measured a track every 9 frames, so on a 7-s clip only a quarter of the vehicles got 3 measurements.
MEASURE_EVERY_S, MEASURE_EVERY_SETTLED_S, SETTLED_OBS = 0.1, 0.45, 10
OBS_PER_TRACK = 40
REFIT_EVERY = 5  # frames
# observed frames between two looks for the horizon (vanishing point of the road's lines, ~0.1-0.3 s of CPU each)
HORIZON_EVERY = 15
HORIZONS_KEPT = 20
# A look runs in the background (tracking.horizon.search_in_background) and its result is taken this many observed
# frames later - always then, waiting for it if need be, so the results never depend on how fast the thread was.
# Three frames (120 ms at 25 fps) cover a search on a busy core, and match the early looks' spacing.
HORIZON_LAG_FRAMES = 3
# a detector box at least this wide (pixels) measures its vehicle's lateral extent (oblique views): loose by a pixel
LATERAL_BOX_MIN_PX = 12.0
# A detector box this long (pixels) measures its vehicle to a few per cent: the detector is trained to box the body
# without its shadow, which the pixel measurement of a dark vehicle cannot leave out. Smaller boxes (and motion
# blobs) are several pixels loose: those vehicles are measured by their pixels.
BOX_MIN_PX = 16.0
# relative spread (1 sigma, in log k) of one class's sizes: cars 3.8-4.9 m long, 1.7-1.9 m wide give ~6 % in sqrt(L W)
FLEET_SPREAD = 0.06
# heights (m) by class: the roof is nearer the camera than the road, and off the image centre a vehicle's side shows
CLASS_HEIGHT_M = {0: 1.5, 1: 3.5, 2: 3.1, 3: 2.1}


def class_sizes(cfg: SpeedConfig) -> dict[int, tuple[float | None, float]]:
    return {CAR: (cfg.car_length_m, cfg.car_width_m), VAN: (5.2, 2.0), BUS: (12.0, 2.55), TRUCK: (None, 2.5)}


def _union_extent(half: float, magnification: float, shift: float) -> float:
    """Extent along one axis of a footprint interval [-half, half] and its roof: the same interval magnified by
    ``magnification`` and shifted by ``shift`` (the 3-D box seen from above: its image outline)."""
    return max(half, shift + magnification * half) - min(-half, shift - magnification * half)


def box_scale(
    box: np.ndarray,
    direction: np.ndarray,
    length_m: float,
    width_m: float,
    height_m: float,
    focal_px: float,
    cx: float,
    cy: float,
) -> float | None:
    """Pixels per metre on the road at a vehicle from its detector box, for a camera looking (nearly) straight down.

    The box outlines the whole vehicle body: its footprint (a length x width rectangle along ``direction``, the unit
    vector of its heading in the image) and its roof ``height_m`` higher. Seen from height H the roof is magnified by
    H / (H - h) about the principal point, so off the image centre it is also shifted outwards by (M - 1) times the
    vehicle's distance from the centre: the side facing the centre shows (a 1.5 m car 30 deg off-axis shows ~0.9 m of
    side, a 25 % wider box). With H = focal / k (k: pixels per metre on the road) the box size is a known function
    of k, solved by fixed-point iteration on the geometric mean of the box's width and height."""
    bw, bh = float(box[2] - box[0]), float(box[3] - box[1])
    c, s = abs(float(direction[0])), abs(float(direction[1]))
    ex, ey = length_m * c + width_m * s, length_m * s + width_m * c  # footprint's axis-aligned box (metres)
    if bw <= 0 or bh <= 0 or ex <= 0 or ey <= 0:
        return None
    px, py = (box[0] + box[2]) / 2 - cx, (box[1] + box[3]) / 2 - cy
    k = math.sqrt(bw * bh / (ex * ey))
    for _ in range(12):
        if height_m * k >= 0.5 * focal_px:  # the camera would be lower than twice the vehicle: not a drone view
            return None
        mag = focal_px / (focal_px - height_m * k)
        wx = _union_extent(k * ex / 2, mag, (mag - 1) * px)
        wy = _union_extent(k * ey / 2, mag, (mag - 1) * py)
        step = math.sqrt(bw * bh / (wx * wy))
        k *= step
        if abs(step - 1) < 1e-4:
            break
    return k


@dataclass
class VehicleMeasure:
    """A vehicle's extent in pixels, from the second moments of its pixels."""

    along_px: float  # along the direction given (travel), or the major axis
    across_px: float
    x_px: float  # extent along image rows (lateral in an oblique view)
    area_px: int
    bright: bool = True  # brighter than the road: measured without its shadow
    major_axis: np.ndarray | None = None  # unit vector of its principal axis in the image


def _extent(var: float) -> float:
    """Pixels of a uniform bar with this variance ((n^2 - 1) / 12)."""
    return math.sqrt(12.0 * max(var, 0.0) + 1.0)


def measure_vehicle(image: np.ndarray, box: np.ndarray, direction: np.ndarray | None) -> VehicleMeasure | None:
    """Measure the vehicle inside ``box`` (xyxy, pixels) of a BGR or grey ``image``; ``direction``: unit vector of
    travel in the image, or None (then the principal axes). None when no vehicle stands out from the road."""
    h_img, w_img = image.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    half = max(x2 - x1, y2 - y1) / 2 + 3  # a vehicle can be smaller than its box, never much larger
    a0, b0 = int(round(cx - half)) - RING_PX, int(round(cy - half)) - RING_PX
    a1, b1 = int(round(cx + half)) + RING_PX + 1, int(round(cy + half)) + RING_PX + 1
    if a0 < 0 or b0 < 0 or a1 > w_img or b1 > h_img or a1 - a0 < 8:
        return None  # cut by the frame edge: the extent would be wrong
    patch = image[b0:b1, a0:a1]
    if patch.ndim == 3:
        patch = cv2.cvtColor(patch, cv2.COLOR_BGR2GRAY)
    patch = patch.astype(np.float32)
    r = RING_PX
    ring = np.concatenate([patch[:r].ravel(), patch[-r:].ravel(), patch[r:-r, :r].ravel(), patch[r:-r, -r:].ravel()])
    bg = float(np.median(ring))
    spread = 1.4826 * float(np.median(np.abs(ring - bg)))
    fg = (np.abs(patch - bg) > max(3.0 * spread, MIN_CONTRAST)).astype(np.uint8)
    fg[:r], fg[-r:], fg[:, :r], fg[:, -r:] = 0, 0, 0, 0
    n, labels, stats, centroids = cv2.connectedComponentsWithStats(fg, connectivity=8)
    if n < 2:
        return None
    # the vehicle: every component whose centre lies inside the box (a large vehicle seen close up falls apart
    # into roof, windows, bonnet at this threshold); road marks and neighbours reach into the ring instead
    inside = [
        k
        for k in range(1, n)
        if stats[k, 4] >= 2 and x1 - a0 <= centroids[k][0] <= x2 - a0 and y1 - b0 <= centroids[k][1] <= y2 - b0
    ]
    if not inside or sum(stats[k, 4] for k in inside) < 4:
        return None
    # The vehicle's outline at half its contrast: a blurred edge crosses half contrast where the true edge is, so
    # blur (which at 4-px widths would add a pixel or two) and faint shadow fringes drop out. Pixels of the grown
    # component at or above half of the vehicle's typical contrast; a mask whose pixel centres lie inside an
    # n-pixel bar has variance (n^2 - 1) / 12.
    comp = labels == inside[0] if len(inside) == 1 else np.isin(labels, inside)
    region = cv2.dilate(comp.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    region &= (labels == 0) | comp
    signed = patch - bg
    # Shadows are always darker than the road, and at nadir a vehicle's own shadow joins it on one side. A vehicle
    # mostly brighter than the road is measured by its bright pixels alone (holes such as its windows closed), which
    # leaves the shadow out; a dark vehicle cannot be told from its shadow and is marked so.
    bright = float((signed[comp] > 0).mean()) >= 0.5
    contrast = signed if bright else -signed
    level = max(0.5 * float(np.percentile(contrast[comp], 90)), 2.0 * spread, 0.5 * MIN_CONTRAST)
    mask = (region & (contrast >= level)).astype(np.uint8)
    if bright:
        mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8)) & region.astype(np.uint8)
    ys, xs = np.nonzero(mask)
    if len(xs) < 3:
        return None
    pts = np.column_stack([xs, ys]).astype(np.float64)
    pts -= pts.mean(0)
    cov = pts.T @ pts / len(pts)
    evals, evecs = np.linalg.eigh(cov)
    major = evecs[:, 1]
    if direction is None:
        u = major
    else:
        u = np.asarray(direction, np.float64) / max(float(np.linalg.norm(direction)), 1e-9)
    v = np.array([-u[1], u[0]])
    return VehicleMeasure(_extent(u @ cov @ u), _extent(v @ cov @ v), _extent(cov[0, 0]), int(len(pts)), bright, major)


@dataclass
class SizeModel:
    """Pixels per metre of the anchor image from vehicle sizes: k(y) = alpha + beta * y (beta = 0: nadir, one
    number), with its uncertainty."""

    alpha: float
    beta: float
    focal_px: float
    cx: float
    cy: float
    rel_sigma: float  # 1-sigma relative error of the scale at the image centre
    n_tracks: int
    segment: int
    cov: np.ndarray | None = None  # covariance of (alpha, beta) of the oblique fit
    systematic: float = 0.0
    horizon_from: str | None = None  # oblique: "lines" (vanishing point of the road's lines) or "vehicles"

    @property
    def oblique(self) -> bool:
        return self.beta > 0

    @property
    def horizon_row(self) -> float | None:
        return -self.alpha / self.beta if self.beta > 0 else None

    def k(self, y: float) -> float:
        return self.alpha + self.beta * y

    def rel_sigma_at(self, y: float) -> float:
        if self.cov is None:
            return self.rel_sigma
        J = np.array([1.0, y])
        k = max(self.k(y), 1e-9)
        return float(math.hypot(math.sqrt(max(J @ self.cov @ J, 0.0)) / k, self.systematic))

    def image_to_ground(self) -> np.ndarray:
        """Homography anchor image -> ground metres (x right, y away from the camera / image up)."""
        if not self.oblique:
            s = 1.0 / self.alpha
            return np.array([[s, 0, -s * self.cx], [0, -s, s * self.cy], [0, 0, 1.0]])
        # k(y) = cos(pitch) / h * (y - y_h), y_h = cy - f tan(pitch): solve for the camera's pitch and height
        f, a, b = self.focal_px, self.alpha, self.beta
        pitch = math.atan2(a + b * self.cy, b * f)  # depression of the optical axis
        height = 1.0 / math.hypot(b, (a + b * self.cy) / f)
        cp, sp = math.cos(pitch), math.sin(pitch)
        # ground (X right, Y forward, 1) -> image, camera at (0, 0, height) looking forward and down
        G = np.array(
            [
                [f, self.cx * cp, self.cx * height * sp],
                [0.0, self.cy * cp - f * sp, height * (self.cy * sp + f * cp)],
                [0.0, cp, height * sp],
            ]
        )
        return np.linalg.inv(G)


class _Track:
    __slots__ = ("path", "obs", "detector_obs", "last_measured", "cls")

    def __init__(self) -> None:
        self.path: deque = deque()  # (t, x, y) centre in anchor pixels
        # (t, x, y, k_lw, k_x, bright, k_box, k_xbox, focal): anchor pixels; pixels per metre from its pixels (k_lw: length
        # and width, k_x: lateral extent) and from its detector box (k_box: 3-D outline from above, k_xbox: lateral
        # extent, for oblique views), and the focal length its box implies (oblique views with a horizon)
        self.obs: deque = deque(maxlen=OBS_PER_TRACK)
        self.detector_obs = 0
        self.last_measured = -1e9  # time (s)
        self.cls: dict[int, int] = {}


def fleet_mode(k: np.ndarray, spread: float = FLEET_SPREAD) -> float:
    """Where most vehicles agree: the density peak of log k nearest the median (mean shift, Gaussian kernel as wide
    as the spread of car sizes). Vehicles the detector calls cars but are bigger (vans, small trucks: +15-40 % in
    k) pull a median of ten vehicles up by a few per cent; the peak stays with the cars when they are the most."""
    x = np.log(np.asarray(k, np.float64))
    m = float(np.median(x))
    for _ in range(30):
        w = np.exp(-0.5 * ((x - m) / spread) ** 2)
        new = float((w * x).sum() / w.sum())
        if abs(new - m) < 1e-6:
            break
        m = new
    return math.exp(m)


def _huber_line(y: np.ndarray, k: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Robust (Huber IRLS) line k = alpha + beta y: (alpha, beta, their covariance)."""
    w = np.ones_like(y)
    A = np.column_stack([np.ones_like(y), y])
    for _ in range(10):
        W = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(A * W[:, None], k * W, rcond=None)
        r = k - A @ coef
        s = max(1.4826 * float(np.median(np.abs(r))), 1e-9)
        w = np.minimum(1.0, 1.5 * s / np.maximum(np.abs(r), 1e-12))
    dof = max(len(y) - 2, 1)
    sigma2 = float((w * r**2).sum() / dof)
    cov = sigma2 * np.linalg.pinv(A.T @ (A * w[:, None]))
    return float(coef[0]), float(coef[1]), cov


def _zoom(H: np.ndarray, x: float, y: float) -> float:
    """Local linear magnification of homography H at (x, y)."""
    p = np.array([x, y, 1.0])
    w = H[2] @ p
    J = (H[:2, :2] * w - np.outer(H[:2] @ p, H[2, :2])) / (w * w)
    return math.sqrt(abs(np.linalg.det(J)))


def _zoom_x(H: np.ndarray, x: float, y: float) -> float:
    """Magnification of homography H along the image rows at (x, y): what lateral extents scale by. (For a camera
    without roll moving and pitching, rows stay rows; the local zoom of an oblique view's homography differs along
    and across them.)"""
    p = np.array([x, y, 1.0])
    w = H[2] @ p
    J = (H[:2, :2] * w - np.outer(H[:2] @ p, H[2, :2])) / (w * w)
    return float(np.hypot(J[0, 0], J[1, 0]))


def _times(k: float | None, z: float) -> float | None:
    return None if k is None else k * z


def _apply(H: np.ndarray, x: float, y: float) -> tuple[float, float]:
    p = H @ np.array([x, y, 1.0])
    return float(p[0] / p[2]), float(p[1] / p[2])


@dataclass
class _PendingLook:
    """A horizon search under way: the frame's time, its pixels -> anchor, and the observed frame it is due at."""

    t: float
    H: np.ndarray
    due: int
    result: Future[Horizon | None]


class VehicleSizeScale:
    """Collects vehicle measurements frame by frame and fits the :class:`SizeModel` of the current segment.

    ``horizon_lag_frames``: 0 searches the horizon inline, on the frame that asked (the reference the background
    search is tested against).
    """

    def __init__(self, cfg: SpeedConfig, width: int, height: int, horizon_lag_frames: int = HORIZON_LAG_FRAMES):
        self.cfg = cfg
        self.width, self.height = width, height
        self.sizes = class_sizes(cfg)
        self.focal_px = max(width, height) * cfg.assumed_focal_equiv_mm / 34.6  # 35 mm-equivalent, long side
        self._tracks: dict[int, _Track] = {}
        self._H_anchor_to_first = np.eye(3)
        self._frames = 0
        self._model: SizeModel | None = None
        self._dirty = False
        self.segment = 0
        self._horizons: deque = deque(maxlen=HORIZONS_KEPT)  # (t, x, y) vanishing points in anchor pixels
        self.horizon_lag_frames = horizon_lag_frames
        self._pending_look: _PendingLook | None = None
        self.segment_starts: list[tuple[float, int]] = [(0.0, 0)]  # (time, segment): when each segment began
        self.models_by_segment: dict[int, SizeModel] = {}  # each segment's latest fit
        self._lateral = np.zeros((0, 7))

    # -- anchor / segments ---------------------------------------------------------------------------------
    def _cur_to_anchor(self, H_cur_to_first: np.ndarray | None) -> np.ndarray:
        if H_cur_to_first is None:
            return np.eye(3)
        return np.linalg.inv(self._H_anchor_to_first) @ H_cur_to_first

    def _maybe_new_segment(self, H_cur_to_first: np.ndarray | None, t: float = 0.0) -> np.ndarray:
        """Start a new segment on the current frame when the view has moved far from the anchor."""
        H = self._cur_to_anchor(H_cur_to_first)
        cx, cy = self.width / 2, self.height / 2
        z = _zoom(H, cx, cy)
        mx, my = _apply(H, cx, cy)
        if 0.7 <= z <= 1.4 and math.hypot(mx - cx, my - cy) <= max(self.width, self.height):
            return H
        Hinv = np.linalg.inv(H)  # old anchor -> current (= new anchor)
        for tr in self._tracks.values():
            tr.path = deque((t, *_apply(Hinv, x, y)) for t, x, y in tr.path)
            moved: deque = deque(maxlen=OBS_PER_TRACK)
            for to, x, ya, k_lw, k_x, bright, k_box, k_xbox, focal in tr.obs:
                zz, zx = _zoom(Hinv, x, ya), _zoom_x(Hinv, x, ya)
                nx, ny = _apply(Hinv, x, ya)
                moved.append(
                    (
                        to,
                        nx,
                        ny,
                        _times(k_lw, zz),
                        _times(k_x, zx),
                        bright,
                        _times(k_box, zz),
                        _times(k_xbox, zx),
                        focal,
                    )
                )
            tr.obs = moved
        self._horizons = deque(
            ((to, *_apply(Hinv, x, y)) if x is not None else (to, None, None) for to, x, y in self._horizons),
            maxlen=HORIZONS_KEPT,
        )
        if self._pending_look is not None:  # its frame -> the old anchor, now -> the new one
            self._pending_look.H = Hinv @ self._pending_look.H
        assert H_cur_to_first is not None  # None is the identity, returned above
        self._H_anchor_to_first = H_cur_to_first.copy()
        self.segment += 1
        self.segment_starts.append((t, self.segment))
        self._dirty = True
        return np.eye(3)

    # -- the horizon -----------------------------------------------------------------------------------------
    def _add_look(self, t: float, H: np.ndarray, hz: Horizon | None) -> None:
        # misses are kept too: a horizon counts only where most looks find it (a nadir view's odd crossing lines
        # meet somewhere once in a while)
        self._horizons.append((t, *_apply(H, *hz.vanishing_point)) if hz is not None else (t, None, None))
        self._dirty = True

    def _take_look(self, force: bool) -> None:
        """The background search's result once it is due (or now, with ``force``)."""
        look = self._pending_look
        if look is None or (not force and self._frames < look.due):
            return
        self._pending_look = None
        self._add_look(look.t, look.H, look.result.result())

    # -- observations ---------------------------------------------------------------------------------------
    def observe(
        self,
        t: float,
        image: np.ndarray,
        boxes: np.ndarray,
        track_ids: np.ndarray,
        class_ids: np.ndarray,
        from_detector: np.ndarray,
        H_cur_to_first: np.ndarray | None,
    ) -> None:
        self._frames += 1
        H = self._maybe_new_segment(H_cur_to_first, t)
        Hinv = np.linalg.inv(H)
        keep_s = self.cfg.size_window_s
        self._take_look(force=False)
        # looked for often at first (the first speeds need it), then now and then
        looks = len(self._horizons) + (self._pending_look is not None)
        if self._frames % HORIZON_EVERY == 1 or (looks < 3 and self._frames % 3 == 1):
            self._take_look(force=True)  # one search at a time
            if self.horizon_lag_frames <= 0:
                self._add_look(t, H, estimate_horizon(image, self.focal_px))
            else:
                due = self._frames + self.horizon_lag_frames
                self._pending_look = _PendingLook(t, H, due, search_in_background(image, self.focal_px))
        vp = self.horizon_point(t)
        vp_cur = None if vp is None else _apply(Hinv, vp[0], vp[1])  # the horizon's vanishing point, this image
        for box, tid, cls, det in zip(boxes, track_ids, class_ids, from_detector):
            tid = int(tid)
            tr = self._tracks.setdefault(tid, _Track())
            cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            ax, ay = _apply(H, cx, cy)
            tr.path.append((t, ax, ay))
            while tr.path and t - tr.path[0][0] > 1.5:
                tr.path.popleft()
            if det:
                tr.detector_obs += 1
                tr.cls[int(cls)] = tr.cls.get(int(cls), 0) + 1
            if (
                t - tr.last_measured
                < (MEASURE_EVERY_S if len(tr.obs) < SETTLED_OBS else MEASURE_EVERY_SETTLED_S) - 1e-6
            ):
                continue
            tr.last_measured = t
            direction = self._direction(tr, box, Hinv)
            m = measure_vehicle(image, box, direction)
            cls_now = self._class_of(tr)
            length_m, width_m = self.sizes[cls_now]
            k_box = None
            # the vehicle itself (not just its box, which is loose on small vehicles) long enough for its box
            if det and length_m and m is not None and m.along_px >= BOX_MIN_PX:
                heading = direction
                if heading is None and m is not None and m.major_axis is not None:
                    heading = m.major_axis  # standing: its long axis
                if heading is not None:
                    k_box = box_scale(
                        box,
                        heading,
                        length_m,
                        width_m,
                        CLASS_HEIGHT_M[cls_now],
                        self.focal_px,
                        self.width / 2,
                        self.height / 2,
                    )
            # oblique views: the box's lateral extent against the vehicle's expected lateral metres (its footprint's
            # extent along the rows, from its heading); shadow-free like the box route above
            k_xbox: float | None = None
            c_lat = 0.0 if direction is None else self._lateral_share(direction, cx, cy, vp_cur)
            if det and direction is not None and float(box[2] - box[0]) >= LATERAL_BOX_MIN_PX:
                c, s = c_lat, math.sqrt(max(1.0 - c_lat**2, 0.0))
                if length_m or s > 0.95:
                    k_xbox = float(box[2] - box[0]) / ((length_m or 0.0) * c + width_m * s)
            focal: float | None = None
            if k_xbox is not None and length_m and c_lat < 0.25 and vp_cur is not None:
                focal = self._focal_from_box(box, vp_cur[1], length_m, width_m, CLASS_HEIGHT_M[cls_now])
            if m is None and k_xbox is None:
                continue
            z, zx = _zoom(H, cx, cy), _zoom_x(H, cx, cy)  # current pixels -> anchor pixels
            k_lw = k_x = None
            if m is None:
                tr.obs.append((t, ax, ay, None, None, None, None, _times(k_xbox, zx), focal))  # brightness unknown
                self._dirty = True
                continue
            if direction is not None:
                # moving: along travel = length, across = width; both, so their biases (motion smear lengthens,
                # blur widens) meet in the middle: k = sqrt(k_length * k_width)
                k_w = m.across_px / width_m
                k_lw = math.sqrt(m.along_px / length_m * k_w) if length_m else k_w
                c, s = c_lat, math.sqrt(max(1.0 - c_lat**2, 0.0))
                if length_m or s > 0.95:  # lateral extent expected of a rectangle seen at this angle
                    lat_m = math.hypot((length_m or 0.0) * c, width_m * s)
                    k_x = m.x_px / lat_m
            elif length_m:
                k_lw = math.sqrt(m.along_px / length_m * m.across_px / width_m)  # parked: major / minor axis
            if k_lw is None and k_x is None and k_box is None and k_xbox is None:
                continue
            tr.obs.append(
                (t, ax, ay, _times(k_lw, z), _times(k_x, zx), m.bright, _times(k_box, z), _times(k_xbox, zx), focal)
            )
            self._dirty = True
        for tid in [k for k, tr in self._tracks.items() if tr.path and t - tr.path[-1][0] > keep_s]:
            del self._tracks[tid]

    def _lateral_share(self, direction: np.ndarray, x: float, y: float, vp: tuple[float, float] | None) -> float:
        """|sin| of the vehicle's heading against the camera's forward direction on the ground: the share of its
        length that lies across the view. Without a horizon, the image direction's (a nadir view's). With one, from
        where the vehicle's line of travel meets the horizon: on an oblique view a car driving straight away from
        the camera but off to one side runs diagonally in the image, towards the vanishing point, while on the
        ground it shows only its width across the view (taking the image direction there made the width of such
        cars 2-3x too large)."""
        dx, dy = float(direction[0]), float(direction[1])
        if vp is None or y <= vp[1] + 1.0:
            return abs(dx)
        if abs(dy) < 1e-3:
            return 1.0  # along the rows: across the view
        u = x + (vp[1] - y) * dx / dy  # where its line of travel meets the horizon
        cos_pitch = self.focal_px / math.hypot(self.focal_px, self.height / 2 - vp[1])
        r = (u - self.width / 2) * cos_pitch / self.focal_px  # lateral over forward, on the ground
        return abs(r) / math.hypot(1.0, r)

    def _focal_from_box(
        self, box: np.ndarray, horizon_row: float, length_m: float, width_m: float, height_m: float
    ) -> float | None:
        """The focal length (pixels) a vehicle driving along the view implies. On an oblique view its box is about
        its width across and L sin(d) + h cos(d) down (footprint foreshortened, its back or front seen, d: depression
        below the horizon), so the box's aspect says d, and the horizon lies f tan(d)-ish above its row. Solved
        exactly: for a candidate f (pitch from the horizon), the class-size box placed on the ground under the box's
        bottom centre, at the distance where its projected width is the box's, projects to some height; f is where
        that height is the box's. (The lens is otherwise an assumption, and on an oblique view the scale along the
        view is proportional to it: a zoomed or cropped video with the 24 mm guess gives speeds along the view 2x
        too low.)"""
        bw, bh = float(box[2] - box[0]), float(box[3] - box[1])
        u, y_top, y_bot = float(box[0] + box[2]) / 2, float(box[1]), float(box[3])
        cx, cy = self.width / 2, self.height / 2
        if (y_top + y_bot) / 2 - horizon_row < 0.05 * self.height or bw <= 0:
            return None

        def aspect_error(f: float) -> float | None:
            t = math.atan((cy - horizon_row) / f)  # pitch
            o = np.array([0.0, math.cos(t), -math.sin(t)])  # optical axis (x right, y forward, z up)
            dn = np.array([0.0, -math.sin(t), -math.cos(t)])  # image down
            ray = o * f + dn * (y_bot - cy) + np.array([u - cx, 0.0, 0.0])
            if ray[2] >= 0:
                return None
            g = ray / -ray[2]  # the ground under the box's bottom centre, camera 1 up (z = 0 plane at -1)
            inv_h = 0.05  # the car's size in camera heights, fitted to the box's width
            for _ in range(6):
                pts = np.array(
                    [
                        [g[0] + a * width_m / 2 * inv_h, g[1] + b * length_m * inv_h, -1.0 + z * height_m * inv_h]
                        for a in (-1, 1)
                        for b in (0, 1)
                        for z in (0, 1)
                    ]
                )
                depth = pts @ o
                if (depth <= 0).any():
                    return None
                xs, ys = f * pts[:, 0] / depth, f * (pts @ dn) / depth
                inv_h *= bw / max(float(xs.max() - xs.min()), 1e-9)
            return float(ys.max() - ys.min()) - bh

        lo, hi = 0.25 * self.focal_px, 8.0 * self.focal_px
        e_lo, e_hi = aspect_error(lo), aspect_error(hi)
        if e_lo is None or e_hi is None or (e_lo > 0) == (e_hi > 0):
            return None
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            e = aspect_error(mid)
            if e is None:
                return None
            if (e > 0) == (e_lo > 0):
                lo, e_lo = mid, e
            else:
                hi = mid
        return math.sqrt(lo * hi)

    def _class_of(self, tr: _Track) -> int:
        """The detector's class when it saw the vehicle; a motion blob alone counts as a car (most traffic)."""
        if tr.detector_obs >= 3 and tr.cls:
            return max(tr.cls, key=lambda c: tr.cls[c])
        return CAR

    @staticmethod
    def _direction(tr: _Track, box: np.ndarray, H_anchor_to_cur: np.ndarray) -> np.ndarray | None:
        """Unit vector of travel in the current image, or None for a vehicle that is not clearly moving."""
        t1, x1, y1 = tr.path[-1]
        older = [p for p in tr.path if t1 - p[0] >= 0.3]
        if not older:
            return None
        _, x0, y0 = older[-1] if t1 - older[-1][0] >= 0.5 else older[0]
        d_anchor = np.array([x1 - x0, y1 - y0])
        long_side = max(float(box[2] - box[0]), float(box[3] - box[1]))
        if np.linalg.norm(d_anchor) < max(2.0, 0.4 * long_side):
            return None
        a = np.array(_apply(H_anchor_to_cur, x1, y1))
        b = np.array(_apply(H_anchor_to_cur, x1 - d_anchor[0], y1 - d_anchor[1]))
        d = a - b
        n = np.linalg.norm(d)
        return d / n if n > 0 else None

    # -- the model -------------------------------------------------------------------------------------------
    def model(self, t: float | None = None) -> SizeModel | None:
        if self._dirty and (self._model is None or self._frames % REFIT_EVERY == 0):
            self._model = self._fit(t)
            self._dirty = False
            if self._model is not None:
                self.models_by_segment[self._model.segment] = self._model
        return self._model

    def anchor_to_first(self) -> np.ndarray:
        return self._H_anchor_to_first

    def _per_track(self, t: float | None) -> tuple[np.ndarray, np.ndarray]:
        """Per track (one vote each): (anchor row, k from its pixels, k_x, bright, k from its box, k from its box's
        lateral extent), all tracks with 3 measurements (2 for the lateral box), and the rows the one-number (nadir)
        scale uses."""
        rows = []
        window = self.cfg.size_window_s
        for tr in self._tracks.values():
            obs = [o for o in tr.obs if t is None or t - o[0] <= window]
            # lateral scale for the fit with a known horizon: the box where the detector boxed it, else the pixels
            k_xbox = [o[7] for o in obs if o[7] is not None] or [o[4] for o in obs if o[4] is not None]
            focal = [o[8] for o in obs if o[8] is not None]
            if len(obs) < 3 and len(k_xbox) < 2:
                continue
            k_lw = [o[3] for o in obs if o[3] is not None]
            k_x = [o[4] for o in obs if o[4] is not None]
            k_box = [o[6] for o in obs if o[6] is not None]
            rows.append(
                (
                    float(np.median([o[2] for o in obs])),
                    float(np.median(k_lw)) if len(k_lw) >= 3 else np.nan,
                    float(np.median(k_x)) if len(k_x) >= 3 else np.nan,
                    float(np.mean([o[5] for o in obs if o[5] is not None] or [0.0]) >= 0.5),
                    float(np.median(k_box)) if len(k_box) >= 3 else np.nan,
                    float(np.median(k_xbox)) if len(k_xbox) >= 2 else np.nan,
                    float(np.median(focal)) if focal else np.nan,
                )
            )
        per = np.array(rows, np.float64).reshape(-1, 7)
        self._lateral = per.copy()  # every track, for the oblique fit with a known horizon
        # vehicles brighter than the road are measured without their shadows: they alone count when there are
        # enough of them
        bright = per[:, 3] > 0
        if (bright & np.isfinite(per[:, 1])).sum() >= self.cfg.size_min_tracks:
            per = per[bright]
        # the one-number scale: a vehicle's box where it has one (shadow-free, its 3-D outline modelled), else its
        # pixels; box-measured and bright vehicles alone when there are enough of them
        everyone = np.array(rows, np.float64).reshape(-1, 7)
        boxed = np.isfinite(everyone[:, 4])
        if boxed.any() and self._looks_oblique(everyone, boxed):
            boxed[:] = False  # not a straight-down view, which the box model assumes: pixels only
        if boxed.any() and not self._cars_boxable(everyone[:, 1]):
            boxed[:] = False  # the boxed vehicles are the large tail of the fleet, not measurable cars: pixels only
        k_one = np.where(boxed, everyone[:, 4], everyone[:, 1])
        clean = boxed | (everyone[:, 3] > 0)
        if (clean & np.isfinite(k_one)).sum() >= self.cfg.size_min_tracks:
            k_one = k_one[clean]
        return per, k_one[np.isfinite(k_one)]

    def _fit(self, t: float | None) -> SizeModel | None:
        cfg = self.cfg
        per, k_lw = self._per_track(t)
        if len(k_lw) < cfg.size_min_tracks:
            return None
        cx, cy = self.width / 2, self.height / 2
        sys_rel = cfg.size_systematic_rel
        horizon_from = "lines"
        oblique = self._fit_with_horizon(self._lateral, t)
        if oblique is None:
            horizon_from = "vehicles"
            oblique = self._fit_oblique(per)
        if oblique is not None:
            alpha, beta, cov = oblique
            focal, focal_rel = self.focal_px, cfg.size_focal_rel
            if horizon_from == "lines":
                focal, focal_rel = self._fit_focal(focal, focal_rel)
            m = SizeModel(
                alpha,
                beta,
                focal,
                cx,
                cy,
                0.0,
                len(per),
                self.segment,
                cov,
                math.hypot(sys_rel, focal_rel),
                horizon_from,
            )
            m.rel_sigma = m.rel_sigma_at(cy)
            return m
        k = float(np.median(k_lw))
        mad = 1.4826 * float(np.median(np.abs(k_lw - k)))
        se = 1.25 * mad / math.sqrt(len(k_lw))  # standard error of a median
        return SizeModel(k, 0.0, self.focal_px, cx, cy, math.hypot(se / k, sys_rel), len(k_lw), self.segment)

    def _cars_boxable(self, k_pixels: np.ndarray) -> bool:
        """Whether a typical car, at the scale the vehicles' pixels give (median over the tracks), is at least
        BOX_MIN_PX long, so that the box route measures the fleet and not only its largest members. A vehicle
        qualifies for its box by its own pixel length; where cars are shorter than that (a high nadir view: 0.43 m/px,
        cars ~10 px), the vehicles that qualify are those much longer than a car: trucks and buses the detector calls
        car, two cars merged, a car with its shadow. Measured against the car prior they all give pixels per metre
        too large (on the nadir interchange 16 of 56 tracks, their median 2.4x the calibrated scale), a selection
        bias no per-vehicle threshold avoids. The gate is on the fleet (the median of every track's pixel scale),
        whose own error (~10 %) is small against the threshold's margin."""
        k = k_pixels[np.isfinite(k_pixels)]
        if len(k) < self.cfg.size_min_tracks:
            return True  # too few to tell: as before (a vehicle's own length decides)
        return float(np.median(k)) * self.cfg.car_length_m >= BOX_MIN_PX

    def _looks_oblique(self, per: np.ndarray, boxed: np.ndarray) -> bool:
        """Vehicles (box-measured ones, or all by their lateral pixel extent) growing clearly down the frame: an
        oblique view, even where the oblique fit is not kept (e.g. its horizon implausibly low)."""
        lateral = np.isfinite(per[:, 2])
        for ok, col in ((boxed, 4), (lateral, 2)):
            if ok.sum() >= max(8, self.cfg.size_min_tracks) and self._grows_with_row(
                *_huber_line(per[ok, 0], per[ok, col])
            ):
                return True
        return False

    def _grows_with_row(self, alpha: float, beta: float, cov: np.ndarray) -> bool:
        """A scale clearly (> 3 SE) growing towards the image bottom, by size_min_perspective or more."""
        k_mid = alpha + beta * self.height / 2
        if beta <= 0 or k_mid <= 0 or beta < 3.0 * math.sqrt(max(cov[1, 1], 0.0)):
            return False
        return beta * self.height / k_mid >= self.cfg.size_min_perspective

    def horizon_point(self, t: float | None = None) -> tuple[float, float] | None:
        """A point of the horizon (median vanishing point of the road's lines) in the anchor image; None unless
        found by at least two looks and half of them."""
        looks = [(x, y) for to, x, y in self._horizons if t is None or t - to <= self.cfg.size_window_s]
        pts = [p for p in looks if p[0] is not None]
        if len(pts) < 2 or len(pts) < 0.5 * len(looks):
            return None
        return float(np.median([p[0] for p in pts])), float(np.median([p[1] for p in pts]))

    def horizon_row(self, t: float | None = None) -> tuple[float, float] | None:
        """(row, 1-sigma) of the horizon in the anchor image from the road's lines (median of the recent vanishing
        points), or None where none was found."""
        if self.horizon_point(t) is None:
            return None
        rows = [y for to, x, y in self._horizons if x is not None and (t is None or t - to <= self.cfg.size_window_s)]
        y = float(np.median(rows))
        spread = 1.4826 * float(np.median(np.abs(np.array(rows) - y))) if len(rows) >= 3 else 0.0
        return y, max(spread, 0.02 * self.height)  # vanishing points of one scene agree to ~2 % of the frame

    def _fit_with_horizon(self, per: np.ndarray, t: float | None) -> tuple[float, float, np.ndarray] | None:
        """k_x(y) = a (y - y_h) with the horizon y_h from the road's lines: each vehicle's lateral scale gives a
        (where most of them agree, ``fleet_mode``), so a handful of vehicles is enough. Lateral scale: its box's
        lateral extent where the detector boxed it (shadow-free), else its pixels'. None without a horizon, with too
        few vehicles, or where the vehicles clearly contradict it (their own sizes not growing down the frame)."""
        hz = self.horizon_row(t)
        if hz is None or not len(per):
            return None
        y_h, s_h = hz
        lat = np.where(np.isfinite(per[:, 5]), per[:, 5], per[:, 2])
        ok = np.isfinite(lat) & (per[:, 0] > y_h + 0.05 * self.height)
        if ok.sum() < min(3, self.cfg.size_min_tracks):
            return None  # one parameter: three vehicles give it (their spread is in its uncertainty)
        y, k = per[ok, 0], lat[ok]
        a_i = k / (y - y_h)
        a = fleet_mode(a_i)  # where most vehicles agree: trucks the detector calls cars are 40 % wider
        se_a = 1.25 * 1.4826 * float(np.median(np.abs(a_i - a))) / math.sqrt(len(a_i))
        if len(y) >= max(8, self.cfg.size_min_tracks):
            _, b_v, cov_v = _huber_line(y, k)
            if b_v + 3.0 * math.sqrt(max(cov_v[1, 1], 0.0)) < 0.5 * a:
                return None  # the vehicles are no bigger at the bottom than at the top: the lines are not the ground's
        # alpha = -a y_h, beta = a: first-order covariance with the horizon's own uncertainty
        cov = np.array([[y_h**2 * se_a**2 + a**2 * s_h**2, -y_h * se_a**2], [-y_h * se_a**2, se_a**2]])
        return -a * y_h, a, cov

    def _fit_focal(self, assumed: float, assumed_rel: float) -> tuple[float, float]:
        """(focal length in pixels, its relative 1-sigma error): from the boxes of cars driving along the view
        (``_focal_from_box``, where most agree) when 3 or more give one, else the assumed lens."""
        f = self._lateral[:, 6] if len(self._lateral) else np.zeros(0)
        f = f[np.isfinite(f)]
        if len(f) < 3:
            return assumed, assumed_rel
        est = min(max(fleet_mode(f), 0.5 * assumed), 4.0 * assumed)
        se = 1.25 * 1.4826 * float(np.median(np.abs(f - est))) / math.sqrt(len(f))
        return est, max(se / est, assumed_rel)

    def _fit_oblique(self, per: np.ndarray) -> tuple[float, float, np.ndarray] | None:
        """Robust line k_x(y) = alpha + beta y; kept when the scale clearly grows towards the image bottom."""
        ok = np.isfinite(per[:, 2]) if len(per) else np.zeros(0, bool)
        if ok.sum() < max(8, self.cfg.size_min_tracks):
            return None
        alpha, beta, cov = _huber_line(per[ok, 0], per[ok, 2])
        if not self._grows_with_row(alpha, beta, cov):
            return None  # the scale changes too little across the frame to be told from noise: nadir
        y_h = -alpha / beta
        if y_h > 0.25 * self.height:
            return None  # the horizon low in the frame: not a plausible drone view (or vehicles on several levels)
        return alpha, beta, cov
