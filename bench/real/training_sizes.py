"""``python -m bench.real.training_sizes``: how long vehicles are, in pixels of the detector's input, in the data the
shipped detector was trained on: the size range the dual layer's scale choice aims at (``detector.target_vehicle_px``).

Reads the shared detection sets' YOLO labels (``../shared/data/detection``) the way the training set is built
(``vision/training/detector/dataset.py``): frames with a long side below 1920 px are letterboxed to 640 px; larger
ones are seen both downscaled to 640 px and at native resolution in 640 px tiles. Axis-aligned extent for rotated
boxes. The night frames of M1003 that train the detector (1024 px -> 640 px) are counted too.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from vision.training.detector import NIGHT_DEV_TRAIN_FRAMES
from vision.training.detector.training import shared_root

TRAIN_INPUT, TILE_FROM = 640, 1920


def training_vehicle_px() -> np.ndarray:
    """Long side (px) of every training vehicle box in the detector's 640 px input."""
    root = shared_root() / "data" / "detection"
    out: list[float] = []
    for labels in sorted(root.glob("*/labels")):
        images = labels.parent / "images"
        for txt in sorted(labels.glob("*.txt")):
            img = next((p for p in images.glob(txt.stem + ".*")), None)
            if img is None:
                continue
            w, h = Image.open(img).size
            for line in txt.read_text().split("\n"):
                v = [float(x) for x in line.split()[1:]]
                if len(v) == 4:
                    bw, bh = v[2] * w, v[3] * h
                elif len(v) == 8:
                    xs, ys = np.array(v[0::2]) * w, np.array(v[1::2]) * h
                    bw, bh = xs.max() - xs.min(), ys.max() - ys.min()
                else:
                    continue
                long_side = max(bw, bh)
                out.append(long_side * TRAIN_INPUT / max(w, h))
                if max(w, h) >= TILE_FROM:
                    out.append(long_side)  # native-resolution tiles
    gt = shared_root() / "data" / "mot" / "uavdt_M1003_night_dev" / "gt" / "M1003_gt_whole.txt"
    if gt.is_file():
        a = np.loadtxt(gt, delimiter=",", usecols=(0, 4, 5))
        a = a[(a[:, 0] >= NIGHT_DEV_TRAIN_FRAMES[0]) & (a[:, 0] <= NIGHT_DEV_TRAIN_FRAMES[1])]
        out += list(np.maximum(a[:, 1], a[:, 2]) * TRAIN_INPUT / 1024)
    return np.array(out)


def main() -> int:
    px = training_vehicle_px()
    if not len(px):
        print("no training labels found (../shared/data/detection missing)")
        return 2
    q = np.percentile(px, [10, 25, 50, 75, 90])
    print(
        f"{len(px)} training vehicle boxes; long side in the detector's input, px: "
        + ", ".join(f"p{p} {v:.1f}" for p, v in zip((10, 25, 50, 75, 90), q))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
