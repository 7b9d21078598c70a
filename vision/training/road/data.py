"""Road-segmentation samples: EPFL aerial tiles, hand-labelled drone frames, optional extra image/mask folders.

Every sample carries ``scale``: the factor that brings its stored image to the pixel scale the U-Net sees at
inference (the whole frame resized to a ``long_side`` of 512). Augmentation jitters around that scale, so the
network learns roads at the sizes it will meet in drone video.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vision.training.road.labels import DRONE_LABELS, RoadLabelError, crop_box, load_label_image, load_labels, rasterise

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
# Drone frames are stored at most this long (side, px) — twice the network's input, plenty for random crops.
STORE_LONG_SIDE = 1024


@dataclass
class Sample:
    id: str
    source: str  # "epfl", "drone", "extra"
    image: np.ndarray  # BGR uint8
    road: np.ndarray  # uint8 0/1
    valid: np.ndarray  # uint8 1 where the label counts (not ignored, inside the labelled crop)
    scale: float  # stored image -> network input scale
    view: str  # "nadir" (any rotation is plausible) or "oblique" (sky/horizon up: small rotations only)


def _pairs(folder: Path) -> list[tuple[Path, Path]]:
    """(image, mask) pairs of a folder with ``images/`` and ``masks/`` sub-folders, matched by file stem."""
    images, masks = folder / "images", folder / "masks"
    if not images.is_dir() or not masks.is_dir():
        raise RoadLabelError(f"{folder}: expected sub-folders images/ and masks/ (white = road)")
    by_stem = {p.stem: p for p in masks.iterdir() if p.suffix.lower() in IMAGE_EXTS}
    pairs = [
        (p, by_stem[p.stem]) for p in sorted(images.iterdir()) if p.suffix.lower() in IMAGE_EXTS and p.stem in by_stem
    ]
    if not pairs:
        raise RoadLabelError(f"{folder}: no image/mask pairs with matching names")
    return pairs


def _read_pair(image_path: Path, mask_path: Path) -> tuple[np.ndarray, np.ndarray]:
    image = cv2.imread(str(image_path), cv2.IMREAD_COLOR)
    mask = cv2.imread(str(mask_path), cv2.IMREAD_GRAYSCALE)
    if image is None or mask is None:
        raise RoadLabelError(f"{image_path if image is None else mask_path}: unreadable image")
    if mask.shape != image.shape[:2]:
        mask = cv2.resize(mask, (image.shape[1], image.shape[0]), interpolation=cv2.INTER_NEAREST)
    return image, (mask > 127).astype(np.uint8)


def epfl_split(folder: Path, val_every: int = 5) -> tuple[list[tuple[Path, Path]], list[tuple[Path, Path]]]:
    """Deterministic hold-out: every ``val_every``-th tile (sorted by name) is validation."""
    pairs = _pairs(folder)
    val = [p for i, p in enumerate(pairs) if i % val_every == val_every - 1]
    train = [p for i, p in enumerate(pairs) if i % val_every != val_every - 1]
    return train, val


def load_tiles(pairs: list[tuple[Path, Path]], source: str, long_side: int, view: str = "nadir") -> list[Sample]:
    """Image/mask pairs, each seen at inference as a whole image resized to ``long_side``."""
    out = []
    for img_path, mask_path in pairs:
        image, road = _read_pair(img_path, mask_path)
        out.append(
            Sample(img_path.stem, source, image, road, np.ones_like(road), long_side / max(image.shape[:2]), view)
        )
    return out


def load_extra(folder: Path, long_side: int, frames_per_video: int = 4) -> list[Sample]:
    """Extra training data: an ``images/`` + ``masks/`` folder (nadir tiles), or an ``airpatrol synth`` scene
    folder (``video.mp4`` + ``road_mask/NNNNNN.png``, numbered from 1) of which a few evenly spaced frames are used."""
    folder = Path(folder)
    video, masks = folder / "video.mp4", folder / "road_mask"
    if not (video.is_file() and masks.is_dir()):
        return load_tiles(_pairs(folder), "extra", long_side)
    numbered = sorted((int(p.stem), p) for p in masks.glob("*.png") if p.stem.isdigit())
    if not numbered:
        raise RoadLabelError(f"{masks}: no NNNNNN.png road masks")
    picks = {
        numbered[int(i)][0]: numbered[int(i)][1]
        for i in np.linspace(0, len(numbered) - 1, min(frames_per_video, len(numbered)))
    }
    out, cap, n = [], cv2.VideoCapture(str(video)), 0
    while picks and n < max(picks):
        ok, image = cap.read()
        n += 1
        if not ok:
            break
        if n in picks:
            road = cv2.imread(str(picks[n]), cv2.IMREAD_GRAYSCALE)
            if road is None or road.shape != image.shape[:2]:
                raise RoadLabelError(f"{picks[n]}: unreadable or not the size of {video}'s frames")
            road = (road > 127).astype(np.uint8)
            # Synthetic cameras may be oblique, so only small rotations are used.
            out.append(
                Sample(
                    f"{folder.name}_{n}",
                    "extra",
                    image,
                    road,
                    np.ones_like(road),
                    long_side / max(image.shape[:2]),
                    "oblique",
                )
            )
    cap.release()
    return out


def load_drone(data_root: Path, split: str, long_side: int, labels_path: Path = DRONE_LABELS) -> list[Sample]:
    """Hand-labelled drone frames of one split ("train" or "val").

    Training samples are cut to their labelled ``crop`` (so a frame's validation part is never seen);
    validation samples keep the whole frame as network input and mark only their crop valid.
    """
    out = []
    for entry in load_labels(labels_path):
        if entry.get("split", "train") != split:
            continue
        frame = load_label_image(entry, data_root)
        road, ignore = rasterise(entry, frame.shape[:2])
        valid = np.zeros_like(road)
        x0, y0, x1, y1 = crop_box(entry, frame.shape[:2])
        valid[y0:y1, x0:x1] = 1
        valid[ignore > 0] = 0
        road = (road > 0).astype(np.uint8)
        frame_long = max(frame.shape[:2])
        if split == "train":
            frame, road, valid = frame[y0:y1, x0:x1], road[y0:y1, x0:x1], valid[y0:y1, x0:x1]
        store = min(1.0, STORE_LONG_SIDE / frame_long)
        if store < 1.0:
            size = (round(frame.shape[1] * store), round(frame.shape[0] * store))
            frame = cv2.resize(frame, size, interpolation=cv2.INTER_AREA)
            road = cv2.resize(road, size, interpolation=cv2.INTER_NEAREST)
            valid = cv2.resize(valid, size, interpolation=cv2.INTER_NEAREST)
        out.append(
            Sample(
                entry["id"], "drone", frame, road, valid, long_side / frame_long / store, entry.get("view", "oblique")
            )
        )
    return out
