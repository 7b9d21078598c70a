"""Multi-scale copies of training images, so the detector sees vehicles at the sizes inference feeds it.

Ultralytics resizes every training image so its long side is ``imgsz`` (640): a smaller image is blown up again, so
a downscaled copy only keeps its scale when it is laid out on a full 640 px canvas, and a larger one only keeps its
native scale when it is cut into 640 px tiles. Hence two helpers:

- ``half_scale_collages``: four 640 px images at half size in a 2x2 grid (vehicles of 40-100 px become 20-50 px, the
  middle of the range the scale-adaptive inference aims at; the native copies keep the large ones);
- ``native_tiles``: 640 px tiles of images larger than that, at native resolution (e.g. UAVDT's 1024x540 night
  frames, whose vehicles a 640 px resize shrinks by 0.625).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from vision.training.detector.dataset import tile_labels, tile_origins

CANVAS = 640
FILL = 114  # Ultralytics' letterbox grey


class ScaleDataError(ValueError):
    """An unreadable image or label file among the multi-scale inputs."""


def _labels(path: Path) -> np.ndarray:
    if not path.is_file() or not path.stat().st_size:
        return np.zeros((0, 5))
    try:
        return np.loadtxt(path, ndmin=2).reshape(-1, 5)
    except ValueError as exc:
        raise ScaleDataError(f"{path}: not YOLO 'cls cx cy w h' rows ({exc})") from None


def _write(image: np.ndarray, rows: np.ndarray, out_dir: Path, name: str) -> None:
    cv2.imwrite(str(out_dir / "images" / f"{name}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 92])
    lines = [f"{int(c)} {x:.6f} {y:.6f} {w:.6f} {h:.6f}" for c, x, y, w, h in rows]
    (out_dir / "labels" / f"{name}.txt").write_text("\n".join(lines) + ("\n" if lines else ""))


def _read(path: Path) -> np.ndarray:
    image = cv2.imread(str(path))
    if image is None:
        raise ScaleDataError(f"{path}: unreadable image")
    return image


def half_scale_collages(images: list[Path], labels_dir: Path, out_dir: Path, min_side: float = 2.0) -> int:
    """Groups of four ``images`` (in the given order) at half size in a 2x2 grid on a 640x640 canvas; returns the
    number of collages. Boxes smaller than ``min_side`` px after the resize are dropped; a last group of fewer than
    four images leaves its cells grey."""
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    cell = CANVAS // 2
    written = 0
    for start in range(0, len(images), 4):
        group = images[start : start + 4]
        canvas = np.full((CANVAS, CANVAS, 3), FILL, np.uint8)
        rows = []
        for k, path in enumerate(group):
            image = _read(path)
            h, w = image.shape[:2]
            scale = cell / max(h, w)  # 640 px images -> exactly half size
            small = cv2.resize(image, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
            x0, y0 = (k % 2) * cell, (k // 2) * cell
            canvas[y0 : y0 + small.shape[0], x0 : x0 + small.shape[1]] = small
            for c, cx, cy, bw, bh in _labels(labels_dir / f"{path.stem}.txt"):
                pw, ph = bw * small.shape[1], bh * small.shape[0]
                if min(pw, ph) < min_side:
                    continue
                rows.append(
                    (
                        c,
                        (x0 + cx * small.shape[1]) / CANVAS,
                        (y0 + cy * small.shape[0]) / CANVAS,
                        pw / CANVAS,
                        ph / CANVAS,
                    )
                )
        _write(canvas, np.array(rows).reshape(-1, 5), out_dir, f"half__{group[0].stem}")
        written += 1
    return written


def native_tiles(images: list[Path], labels_dir: Path, out_dir: Path, min_visible: float = 0.4) -> int:
    """640 px tiles (overlapping, covering the frame) of each image at native resolution; returns the tile count."""
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    written = 0
    for path in images:
        image = _read(path)
        h, w = image.shape[:2]
        labels = _labels(labels_dir / f"{path.stem}.txt")
        for y0 in tile_origins(h, CANVAS, 128):
            for x0 in tile_origins(w, CANVAS, 128):
                crop = image[y0 : y0 + CANVAS, x0 : x0 + CANVAS]
                tile_rows = tile_labels(labels, w, h, x0, y0, CANVAS, min_visible)
                # tile_labels normalises by the full tile side; a crop at the frame edge can be smaller
                tile_rows[:, [1, 3]] *= CANVAS / crop.shape[1]
                tile_rows[:, [2, 4]] *= CANVAS / crop.shape[0]
                _write(crop, tile_rows, out_dir, f"native__{path.stem}__x{x0}_y{y0}")
                written += 1
    return written
