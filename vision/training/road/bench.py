"""Measure road-layer speed and save mask overlays: ``python -m vision.training.road.bench [--video PATH] [--out DIR]``.

Times (median of repeated runs, single torch thread unless told otherwise): one U-Net inference on a 960-px-wide
frame, and ``RoadSegmenter.update`` on frames where the U-Net does not run (warp + compose).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from vision.config import RoadConfig
from vision.road.segmenter import RoadSegmenter
from vision.road.unet import load_checkpoint, predict_proba
from vision.types import Frame


def overlay(image: np.ndarray, mask: np.ndarray, colour=(0, 0, 255), alpha: float = 0.45) -> np.ndarray:
    """The frame with road tinted and the mask outline drawn, for looking at a mask."""
    out = image.copy()
    road = mask > 0
    out[road] = ((1 - alpha) * out[road] + alpha * np.array(colour)).astype(np.uint8)
    contours, _ = cv2.findContours(road.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(out, contours, -1, (0, 255, 255), 2)
    return out


def _median_ms(fn, repeats: int) -> tuple[float, float]:
    """(wall, CPU) median milliseconds per call. On a shared machine the wall time includes waiting for a core;
    the process CPU time of a single-threaded call is what the call itself costs."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return round(float(np.median(wall)), 1), round(float(np.median(cpu)), 1)


def bench(image: np.ndarray, repeats: int = 20, threads: int = 1, weights: str | None = None) -> dict:
    torch.set_num_threads(threads)
    model, long_side, _ = load_checkpoint(weights)
    frame960 = cv2.resize(image, (960, round(image.shape[0] * 960 / image.shape[1])), interpolation=cv2.INTER_AREA)
    unet = _median_ms(lambda: predict_proba(model, frame960, long_side), repeats)
    seg = RoadSegmenter(RoadConfig(weights=weights, every_n_frames=10**6), device="cpu")
    seg.update(Frame(0, 0.0, image), None)
    shift = np.array([[1, 0, 2.0], [0, 1, 1.0], [0, 0, 1]])
    between = _median_ms(lambda: seg.update(Frame(1, 0.04, image), shift), repeats)
    return {
        "threads": threads,
        "unet_input_from": f"{frame960.shape[1]}x{frame960.shape[0]}",
        "unet_ms_wall": unet[0],
        "unet_ms_cpu": unet[1],
        "frame_size": f"{image.shape[1]}x{image.shape[0]}",
        "update_between_runs_ms_wall": between[0],
        "update_between_runs_ms_cpu": between[1],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("images", nargs="+", type=Path, help="images or videos (first frame) to overlay")
    ap.add_argument("--out", type=Path, default=Path("/tmp/road_overlays"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--weights", default=None)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for path in args.images:
        cap = cv2.VideoCapture(str(path))
        ok, image = cap.read()
        cap.release()
        if not ok:
            raise SystemExit(f"{path}: cannot read an image or video frame")
        seg = RoadSegmenter(RoadConfig(weights=args.weights), device="cpu")
        mask = seg.update(Frame(0, 0.0, image), None)
        cv2.imwrite(str(args.out / f"{path.stem}_road.png"), overlay(image, mask))
        results.append(
            {
                "image": str(path),
                "road_fraction": round(seg.road_fraction, 3),
                **bench(image, threads=args.threads, weights=args.weights),
            }
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
