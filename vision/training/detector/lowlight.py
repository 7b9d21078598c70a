"""Night and low-light training data for the vehicle detector.

Two sources, both written as YOLO-format folders the trainer appends to the day data:

- ``uavdt_frames``: frames of a real UAVDT sequence with its official boxes, restricted to a frame range (the night
  sequence is split in time: later frames train, earlier frames are scored). UAVDT ignore regions hold unlabelled
  vehicles (parked rows, crowds too small to label); they are filled with a flat colour so the detector is not taught
  that those vehicles are background.
- ``low_light_copies``: day images turned into night-like ones: darker and colour-shifted (sodium / LED street light),
  sensor noise, motion blur, blooming lights and headlight glare at vehicle fronts. Only darkening would teach a
  uniformly dark image; real night footage is dark road with bright saturated spots and noise.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

UAVDT_CLASSES = {1: 0, 2: 1, 3: 2}  # UAVDT category (car, truck, bus) -> ours (car, truck, bus)


class LowLightDataError(ValueError):
    """A missing or unusable input for the night data."""


def _yolo_lines(labels: Iterable[tuple[int, float, float, float, float]], width: int, height: int) -> str:
    out = []
    for c, x, y, w, h in labels:
        x1, y1 = max(x, 0.0), max(y, 0.0)
        x2, y2 = min(x + w, width), min(y + h, height)
        if x2 - x1 < 2 or y2 - y1 < 2:
            continue
        out.append(
            f"{c} {(x1 + x2) / 2 / width:.6f} {(y1 + y2) / 2 / height:.6f} "
            f"{(x2 - x1) / width:.6f} {(y2 - y1) / height:.6f}"
        )
    return "\n".join(out) + ("\n" if out else "")


def uavdt_frames(
    source: Path, gt_whole: Path, frames: tuple[int, int], out_dir: Path, step: int = 2, prefix: str | None = None
) -> int:
    """Write every ``step``-th frame of ``frames`` (1-based, inclusive) of a UAVDT sequence with its boxes to
    ``out_dir/images`` and ``out_dir/labels``; returns the number of images."""
    from vision.source import open_source

    gt_whole = Path(gt_whole)
    if not gt_whole.is_file():
        raise LowLightDataError(f"{gt_whole}: ground truth not found")
    gt = np.loadtxt(gt_whole, delimiter=",", ndmin=2)
    ignore_path = gt_whole.with_name(gt_whole.name.replace("_gt_whole.txt", "_gt_ignore.txt"))
    ignore = (
        np.loadtxt(ignore_path, delimiter=",", ndmin=2)
        if ignore_path.is_file() and ignore_path.stat().st_size
        else np.zeros((0, 6))
    )
    prefix = prefix or gt_whole.name.split("_")[0]
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    written = 0
    first, last = frames
    with open_source(source, max_frames=last) as src:
        for frame in src:
            n = frame.index + 1
            if n < first or (n - first) % step:
                continue
            image = frame.image.copy()
            h, w = image.shape[:2]
            fill = tuple(int(v) for v in np.median(image.reshape(-1, 3), axis=0))
            for x, y, bw, bh in ignore[ignore[:, 0] == n][:, 2:6]:
                cv2.rectangle(image, (int(x), int(y)), (int(x + bw), int(y + bh)), fill, -1)
            rows = gt[gt[:, 0] == n]
            labels = [(UAVDT_CLASSES.get(int(r[8]) if len(r) > 8 else 1, 0), *r[2:6]) for r in rows]
            name = f"{prefix}_{n:06d}"
            cv2.imwrite(str(out_dir / "images" / f"{name}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 95])
            (out_dir / "labels" / f"{name}.txt").write_text(_yolo_lines(labels, w, h))
            written += 1
    if not written:
        raise LowLightDataError(f"{source}: no frame in {first}..{last}")
    return written


def low_light(image: np.ndarray, boxes_xyxy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A night-like version of a day image (uint8 BGR); ``boxes_xyxy`` (pixels) place headlights and tail lights."""
    img: np.ndarray = image.astype(np.float32) / 255.0
    h, w = img.shape[:2]
    gamma = rng.uniform(2.2, 3.8)
    img = img**gamma * rng.uniform(0.35, 0.8)
    tint = np.array([rng.uniform(0.7, 1.1), rng.uniform(0.8, 1.0), rng.uniform(0.9, 1.3)], np.float32)  # B, G, R
    if rng.random() < 0.4:
        tint = tint[::-1]  # cold LED light instead of sodium
    img *= tint
    lights = np.zeros((h, w), np.float32)
    for _ in range(rng.integers(0, 6)):  # street lights: bright spots with a wide bloom
        cx, cy = rng.integers(0, w), rng.integers(0, h)
        cv2.circle(lights, (int(cx), int(cy)), int(rng.integers(2, 6)), 1.0, -1)
    for x1, y1, x2, y2 in boxes_xyxy:
        if rng.random() < 0.7:  # headlights or tail lights at one end of the vehicle's long side
            bw, bh = x2 - x1, y2 - y1
            r = max(1, int(0.12 * min(bw, bh)))
            if bh >= bw:
                yy = y1 + 0.1 * bh if rng.random() < 0.5 else y2 - 0.1 * bh
                pts = [(x1 + 0.25 * bw, yy), (x2 - 0.25 * bw, yy)]
            else:
                xx = x1 + 0.1 * bw if rng.random() < 0.5 else x2 - 0.1 * bw
                pts = [(xx, y1 + 0.25 * bh), (xx, y2 - 0.25 * bh)]
            for px, py in pts:
                cv2.circle(lights, (int(px), int(py)), r, rng.uniform(0.6, 1.0), -1)
    if lights.any():
        bloom = cv2.GaussianBlur(lights, (0, 0), sigmaX=rng.uniform(3, 9)) * rng.uniform(2, 5)
        img += (lights + bloom)[..., None] * np.array([0.85, 0.95, 1.0], np.float32)
    if rng.random() < 0.5:  # motion blur along a random direction (moving drone, long exposure)
        k = int(rng.integers(3, 8))
        kernel: np.ndarray = np.zeros((k, k), np.float32)
        kernel[k // 2, :] = 1.0 / k
        M = cv2.getRotationMatrix2D((k / 2 - 0.5, k / 2 - 0.5), float(rng.uniform(0, 180)), 1.0)
        kernel = cv2.warpAffine(kernel, M, (k, k))
        img = cv2.filter2D(img, -1, kernel / max(kernel.sum(), 1e-6))
    sigma = rng.uniform(0.01, 0.04)  # sensor noise grows when the camera pushes its gain
    img += rng.normal(0.0, sigma, img.shape).astype(np.float32) + rng.normal(0.0, sigma, (h, w, 1)).astype(np.float32)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def low_light_copies(image_paths: list[Path], labels_dir: Path, out_dir: Path, seed: int = 0) -> int:
    """Night-like copies of day images (YOLO labels from ``labels_dir``, same stem) into ``out_dir``."""
    rng = np.random.default_rng(seed)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    written = 0
    for path in image_paths:
        image = cv2.imread(str(path))
        if image is None:
            raise LowLightDataError(f"{path}: unreadable image")
        h, w = image.shape[:2]
        label_file = labels_dir / f"{path.stem}.txt"
        text = label_file.read_text() if label_file.is_file() else ""
        rows = np.array([[float(v) for v in line.split()] for line in text.splitlines() if line.strip()]).reshape(-1, 5)
        boxes = np.column_stack(
            [
                (rows[:, 1] - rows[:, 3] / 2) * w,
                (rows[:, 2] - rows[:, 4] / 2) * h,
                (rows[:, 1] + rows[:, 3] / 2) * w,
                (rows[:, 2] + rows[:, 4] / 2) * h,
            ]
        )
        name = f"lowlight__{path.stem}"
        cv2.imwrite(
            str(out_dir / "images" / f"{name}.jpg"), low_light(image, boxes, rng), [cv2.IMWRITE_JPEG_QUALITY, 92]
        )
        (out_dir / "labels" / f"{name}.txt").write_text(text)
        written += 1
    return written
