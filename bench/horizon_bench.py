"""CPU cost of the horizon search (tracking/horizon.py) on real oblique frames, and its results, for comparing trees.

Frames: every 12th frame of the toll-plaza clip scaled to 1080x1920 (a 1080p frame's pixels), then the AU-AIR and
aerial-cars photos (1920x1080) from ../shared. Prints CPU milliseconds per frame (this thread's CPU time, so the
figure holds on a busy machine) of the whole search and, where the tree has it, of the part left on the frame path
(``prepare``: the grey copy a background search works on), and a digest of every result (row, vanishing point,
support): the same digest from two trees means the same horizons.

    python3 bench/horizon_bench.py                          # this tree
    PYTHONPATH=/path/to/older/checkout python3 bench/horizon_bench.py
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared"))


def frames() -> list[np.ndarray]:
    out = []
    cap = cv2.VideoCapture(str(SHARED / "data/real_video/toll_plaza/247589_medium.mp4"))
    for i in range(0, 258, 12):
        cap.set(cv2.CAP_PROP_POS_FRAMES, i)
        ok, f = cap.read()
        if ok:
            out.append(cv2.resize(f, (1080, 1920), interpolation=cv2.INTER_CUBIC))
    cap.release()
    photos = sorted(glob.glob(str(SHARED / "data/detection/au_air/images/*.jpg")))
    photos += sorted(glob.glob(str(SHARED / "data/detection/aerial_cars_drone/images/*.jpg")))[:10]
    for p in photos:
        photo = cv2.imread(p)
        if photo is not None:
            out.append(
                photo if photo.shape[1] <= 1920 else cv2.resize(photo, (1920, 1080), interpolation=cv2.INTER_AREA)
            )
    return out


def main() -> None:
    import tracking.horizon as hz

    images = frames()
    if not images:
        raise SystemExit(f"{SHARED}: no frames found (set AIRPATROL_SHARED)")
    results, whole, prep = [], [], []
    for f in images:
        focal = max(f.shape[:2]) * 24 / 34.6
        c = time.thread_time()
        h = hz.estimate_horizon(f, focal)
        whole.append(1000 * (time.thread_time() - c))
        if hasattr(hz, "prepare"):
            c = time.thread_time()
            hz.prepare(f)
            prep.append(1000 * (time.thread_time() - c))
        results.append(None if h is None else [h.row, *h.vanishing_point, h.support, h.support_frac])
    digest = hashlib.sha256(json.dumps(results).encode()).hexdigest()[:16]
    toll = len(range(0, 258, 12))
    print(
        f"{len(images)} frames ({toll} toll-plaza 1080x1920, {len(images) - toll} photos), "
        f"{sum(r is not None for r in results)} horizons, results digest {digest}; search CPU per frame: "
        f"mean {np.mean(whole):.1f} ms, toll-plaza frames mean {np.mean(whole[:toll]):.1f} ms, max {max(whole):.1f} ms"
        + (f"; on the frame path (prepare) mean {np.mean(prep):.2f} ms, max {max(prep):.2f} ms" if prep else "")
    )


if __name__ == "__main__":
    main()
