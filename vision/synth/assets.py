"""Real imagery used to make synthetic scenes look like drone footage, when ../shared is there.

* ground texture: road-free patches of the EPFL aerial tiles (``data/road_seg/epfl_aerial``: images/ + masks/);
* car sprites: top-down car crops from the Madison drone set (``data/detection/madison_drone_view``, YOLO labels).

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
EPFL_M_PER_PX = 0.4  # approximate ground resolution of the EPFL tiles (two-lane roads are ~20-25 px wide)


@dataclass
class Assets:
    ground_patches: list[np.ndarray] = field(default_factory=list)  # BGR, road-free
    car_crops: list[np.ndarray] = field(default_factory=list)  # BGR, long axis horizontal
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
    have = (root / EPFL / "images").is_dir() or (root / MADISON / "images").is_dir()
    if not have:
        if cfg.use_shared_data == "on":
            raise SynthConfigError(f"{root}: shared data not found (need {EPFL} or {MADISON}); use use_shared_data=off")
        return Assets()
    patches = list(_epfl_patches(str(root.resolve())))
    crops = list(_madison_crops(str(root.resolve())))
    parts = [name for name, got in (("epfl_aerial", patches), ("madison_drone_view", crops)) if got]
    return Assets(patches, crops, "+".join(parts) if parts else "procedural")


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
