"""Real imagery used to make synthetic scenes look like drone footage, when ../shared is there.

* ground texture: road-free patches of the EPFL aerial tiles (``data/road_seg/epfl_aerial``: images/ + masks/);
* car sprites: top-down car crops from the Madison drone set (``data/detection/madison_drone_view``, YOLO labels);
* truck, bus and van sprites: top-down crops of the Minsk drone photos of ``data/detection/aerial_cars_drone`` (YOLO
  labels: truck, bus, minibus -> van) and of the DRIFT 4K frames (``data/detection/drift_obb``, rotated boxes),
  straightened so that the long axis is horizontal. AU-AIR (``data/detection/au_air``) is not used: its trucks and
  vans are filmed from 10-30 m at a slant, sides and all, and would not pass for a roof.

Nothing here is copied into the repository; without the data the generator falls back to procedural textures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from vision.synth.scene import SceneConfig, SynthConfigError

EPFL = Path("data/road_seg/epfl_aerial")
MADISON = Path("data/detection/madison_drone_view")
AERIAL_CARS = Path("data/detection/aerial_cars_drone")
DRIFT = Path("data/detection/drift_obb")
HEAVY_CLASSES = ("truck", "bus", "van")
# aerial.names: car, truck, bus, minibus, cyclist; DRIFT data.yaml: bus, car, truck
AERIAL_CARS_CLASSES = {1: "truck", 2: "bus", 3: "van"}
DRIFT_CLASSES = {0: "bus", 2: "truck"}
# flight DJI_0762 films a tram street at a slant: its "buses" are trams seen from the side, its vans show a side too
AERIAL_CARS_SKIP = ("DJI_0762",)
HEAVY_MIN_LENGTH_PX = 50  # shorter crops are too blurred to stand for a 5-16 m vehicle
# straightened length / width: outside these the crop is not the vehicle's outline (a turned vehicle, or a width
# estimate that cut its sides off); an 18 m articulated bus is ~7
HEAVY_ASPECT = {"truck": (2.0, 7.0), "bus": (2.4, 7.5), "van": (1.8, 3.6)}
MAX_TILT_DEG = 25.0  # an axis-aligned box around a vehicle turned more than this is mostly background
EPFL_M_PER_PX = 0.4  # approximate ground resolution of the EPFL tiles (two-lane roads are ~20-25 px wide)


@dataclass
class Assets:
    ground_patches: list[np.ndarray] = field(default_factory=list)  # BGR, road-free
    car_crops: list[np.ndarray] = field(default_factory=list)  # BGR, long axis horizontal
    vehicle_crops: dict[str, list[np.ndarray]] = field(
        default_factory=dict
    )  # truck/bus/van -> BGR, long axis horizontal
    source: str = "procedural"


def default_shared_dir() -> Path:
    env = os.environ.get("AIRPATROL_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".." / "shared"


def load_assets(cfg: SceneConfig) -> Assets:
    if cfg.use_shared_data == "off":
        return Assets()
    root = Path(cfg.shared_dir) if cfg.shared_dir else default_shared_dir()
    have = any((root / d / "images").is_dir() for d in (EPFL, MADISON, AERIAL_CARS, DRIFT))
    if not have:
        if cfg.use_shared_data == "on":
            raise SynthConfigError(
                f"{root}: shared data not found (need {EPFL}, {MADISON}, {AERIAL_CARS} or {DRIFT}); "
                "use use_shared_data=off"
            )
        return Assets()
    patches = list(_epfl_patches(str(root.resolve())))
    crops = list(_madison_crops(str(root.resolve())))
    heavy: dict[str, list[np.ndarray]] = {}
    heavy_sources = set()
    for source, cls, crop in _heavy_crops(str(root.resolve())):
        heavy.setdefault(cls, []).append(crop)
        heavy_sources.add(source)
    parts = [name for name, got in (("epfl_aerial", patches), ("madison_drone_view", crops)) if got]
    parts += [name for name in ("aerial_cars_drone", "drift_obb") if name in heavy_sources]
    return Assets(patches, crops, heavy, "+".join(parts) if parts else "procedural")


@lru_cache(maxsize=4)
def _epfl_patches(root: str, size: int = 96, stride: int = 48) -> tuple[np.ndarray, ...]:
    """Square patches without any road pixel (the scene paints its own roads and its own road mask)."""
    out = []
    img_dir, mask_dir = Path(root) / EPFL / "images", Path(root) / EPFL / "masks"
    for p in sorted(img_dir.glob("*.png")):
        img, mask = cv2.imread(str(p)), cv2.imread(str(mask_dir / p.name), cv2.IMREAD_GRAYSCALE)
        if img is None or mask is None or img.shape[:2] != mask.shape[:2]:
            continue
        road = cv2.dilate((mask > 127).astype(np.uint8), np.ones((7, 7), np.uint8))
        integral = cv2.integral(road)
        for y in range(0, img.shape[0] - size + 1, stride):
            for x in range(0, img.shape[1] - size + 1, stride):
                n = integral[y + size, x + size] - integral[y, x + size] - integral[y + size, x] + integral[y, x]
                if n == 0:
                    out.append(img[y : y + size, x : x + size].copy())
    return tuple(out)


@lru_cache(maxsize=4)
def _madison_crops(root: str, max_images: int = 80) -> tuple[np.ndarray, ...]:
    """Car crops rotated so that the car's long axis is horizontal; boxes cut by the image border are skipped."""
    out = []
    img_dir, lab_dir = Path(root) / MADISON / "images", Path(root) / MADISON / "labels"
    for p in sorted(img_dir.glob("*.jpg"))[:max_images]:
        lab = lab_dir / (p.stem + ".txt")
        if not lab.is_file():
            continue
        img = cv2.imread(str(p))
        if img is None:
            continue
        H, W = img.shape[:2]
        for row in lab.read_text().split("\n"):
            parts = row.split()
            if len(parts) != 5:
                continue
            cx, cy, bw, bh = (float(v) for v in parts[1:])
            x0, x1 = int(round((cx - bw / 2) * W)), int(round((cx + bw / 2) * W))
            y0, y1 = int(round((cy - bh / 2) * H)), int(round((cy + bh / 2) * H))
            if x0 <= 1 or y0 <= 1 or x1 >= W - 1 or y1 >= H - 1:
                continue
            crop = img[y0:y1, x0:x1]
            h, w = crop.shape[:2]
            if max(h, w) < 50 or max(h, w) / max(min(h, w), 1) < 1.7:
                continue  # too small, or a diagonal car whose box is not its outline
            if h > w:
                crop = cv2.rotate(crop, cv2.ROTATE_90_CLOCKWISE)
            out.append(np.ascontiguousarray(crop))
    return tuple(out)


# ----------------------------------------------------------------------------------- trucks, buses, vans
def _axis_angle(gray: np.ndarray) -> float:
    """Direction of the long axis of the vehicle filling ``gray`` (degrees, image x = 0, y down = positive).

    The structure tensor's dominant gradient direction: across the vehicle's long edges, so the axis is 90 deg off.
    """
    g = cv2.GaussianBlur(gray.astype(np.float32), (5, 5), 0)
    gx, gy = cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1)
    jxx, jyy, jxy = float((gx * gx).sum()), float((gy * gy).sum()), float((gx * gy).sum())
    grad = 0.5 * np.degrees(np.arctan2(2 * jxy, jxx - jyy))
    axis = grad + 90.0
    return float((axis + 90.0) % 180.0 - 90.0)


def _cut_rotated(img: np.ndarray, centre, length: float, width: float, angle_deg: float) -> np.ndarray | None:
    """The ``length`` x ``width`` rectangle around ``centre`` whose long side points at ``angle_deg``, made
    horizontal; None when a corner of it lies outside the image."""
    L, W = int(round(length)), int(round(width))
    if L < 2 or W < 2:
        return None
    a = np.radians(angle_deg)
    u, v = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
    offsets = np.array([[sx * length / 2, sy * width / 2] for sx in (-1, 1) for sy in (-1, 1)])
    corners = np.array(centre) + offsets @ np.array([u, v])
    H, Wimg = img.shape[:2]
    if corners.min() <= 1 or (corners[:, 0] >= Wimg - 1).any() or (corners[:, 1] >= H - 1).any():
        return None  # cut by the image border
    # output pixel (x, y) <- image point centre + (x - L/2) u + (y - W/2) v
    M = np.column_stack([u, v, np.array(centre) - (L - 1) / 2 * u - (W - 1) / 2 * v])
    out = cv2.warpAffine(img, M, (L, W), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    return np.ascontiguousarray(out)


def _straighten(img: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> np.ndarray | None:
    """A vehicle in the axis-aligned box [x0, x1) x [y0, y1): its own rectangle, long axis horizontal, or None
    when it is turned too far for the box to show its outline."""
    bw, bh = x1 - x0, y1 - y0
    angle = _axis_angle(cv2.cvtColor(img[y0:y1, x0:x1], cv2.COLOR_BGR2GRAY))
    base = 0.0 if bw >= bh else 90.0
    tilt = (angle - base + 90.0) % 180.0 - 90.0
    if abs(tilt) > MAX_TILT_DEG:
        return None
    long_, short = max(bw, bh), min(bw, bh)
    c, s = np.cos(np.radians(tilt)), abs(np.sin(np.radians(tilt)))
    if abs(tilt) < 2.0:
        length, width = float(long_), float(short)
    else:  # box sides = L cos + W sin and L sin + W cos
        det = c * c - s * s
        length, width = (long_ * c - short * s) / det, (short * c - long_ * s) / det
    if width < 4 or length < width:
        return None
    return _cut_rotated(img, ((x0 + x1 - 1) / 2, (y0 + y1 - 1) / 2), length, width, base + tilt)


def _keep(cls: str, crop: np.ndarray) -> bool:
    h, w = crop.shape[:2]
    lo, hi = HEAVY_ASPECT[cls]
    return w >= HEAVY_MIN_LENGTH_PX and lo <= w / max(h, 1) <= hi


@lru_cache(maxsize=4)
def _heavy_crops(root: str) -> tuple[tuple[str, str, np.ndarray], ...]:
    """(source, class, crop) for every usable truck, bus and van: long axis horizontal, not cut by the border."""
    out: list[tuple[str, str, np.ndarray]] = []
    base = Path(root) / AERIAL_CARS
    for lab in sorted((base / "labels").glob("*.txt")):
        if lab.stem.replace("-", "_").startswith(AERIAL_CARS_SKIP):
            continue
        rows = [r.split() for r in lab.read_text().splitlines()]
        rows = [r for r in rows if len(r) == 5 and r[0].isdigit() and int(r[0]) in AERIAL_CARS_CLASSES]
        images = [p for p in sorted((base / "images").glob(lab.stem + ".*")) if p.stem == lab.stem]
        img = cv2.imread(str(images[0])) if rows and images else None
        if img is None:
            continue
        H, W = img.shape[:2]
        for r in rows:
            cls = AERIAL_CARS_CLASSES[int(r[0])]
            cx, cy, bw, bh = (float(v) for v in r[1:])
            x0, x1 = int(round((cx - bw / 2) * W)), int(round((cx + bw / 2) * W))
            y0, y1 = int(round((cy - bh / 2) * H)), int(round((cy + bh / 2) * H))
            if x0 <= 1 or y0 <= 1 or x1 >= W - 1 or y1 >= H - 1:
                continue
            crop = _straighten(img, x0, y0, x1, y1)
            if crop is not None and _keep(cls, crop):
                out.append(("aerial_cars_drone", cls, crop))
    base = Path(root) / DRIFT
    for lab in sorted((base / "labels").glob("*.txt")):
        rows = [r.split() for r in lab.read_text().splitlines()]
        rows = [r for r in rows if len(r) == 9 and r[0].isdigit() and int(r[0]) in DRIFT_CLASSES]
        img = cv2.imread(str(base / "images" / (lab.stem + ".jpg"))) if rows else None
        if img is None:
            continue
        H, W = img.shape[:2]
        for r in rows:
            pts = np.array([float(v) for v in r[1:]]).reshape(4, 2) * [W, H]
            e1, e2 = pts[1] - pts[0], pts[2] - pts[1]
            long_edge, short_edge = (e1, e2) if np.hypot(*e1) >= np.hypot(*e2) else (e2, e1)
            angle = float(np.degrees(np.arctan2(long_edge[1], long_edge[0])))
            angle = (angle + 90.0) % 180.0 - 90.0
            cls = DRIFT_CLASSES[int(r[0])]
            crop = _cut_rotated(img, pts.mean(axis=0), float(np.hypot(*long_edge)), float(np.hypot(*short_edge)), angle)
            if crop is not None and _keep(cls, crop):
                out.append(("drift_obb", cls, crop))
    return tuple(out)
