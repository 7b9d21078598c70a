"""Ego-motion and motion layer: OpenCV backend vs torch (kornia) backend, per frame, on one clip.

    python -m bench.ego_motion_backends [--video CLIP] [--frames 60] [--device cpu|cuda] [--torch-threads N]
                                        [--batch 8] [--streams 4]

Both backends run on the same frames, interleaved frame by frame (a loaded machine slows both alike). Prints per
stage the median and mean ms/frame of each backend (ego-motion = grey + downscale + registration; motion =
background update + blobs), the agreement of their results (homography frame-corner error in full-resolution px,
foreground-mask IoU, blob counts), and for the torch backend the batched forms: ``register_sequence`` over
``--batch`` frames and ``update_streams`` over ``--streams`` copies of the clip (ms per frame per stream).
Default clip: ../shared/data/real_video/nadir_interchange/drone.mp4 (1080p).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from vision.config import EgoMotionConfig, MotionConfig
from vision.ego_motion import EgoMotionEstimator
from vision.gpu.ego_motion import TorchEgoMotionEstimator
from vision.gpu.ego_motion import update_streams as ego_streams
from vision.gpu.motion import TorchMotionDetector
from vision.gpu.motion import update_streams as motion_streams
from vision.motion import MotionDetector

DEFAULT_VIDEO = (
    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real_video" / "nadir_interchange" / "drone.mp4"
)


def _read(video: Path, n: int) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(video))
    frames: list[np.ndarray] = []
    while len(frames) < n:
        ok, img = cap.read()
        if not ok:
            break
        frames.append(img)
    cap.release()
    return frames


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _corner_error(a: np.ndarray, b: np.ndarray, w: int, h: int) -> float:
    c = np.array([[0, 0, 1], [w, 0, 1], [w, h, 1], [0, h, 1.0]]).T
    pa, pb = a @ c, b @ c
    return float(np.linalg.norm(pa[:2] / pa[2] - pb[:2] / pb[2], axis=0).max())


def _small(H: np.ndarray, s: float) -> np.ndarray:
    return np.diag([s, s, 1.0]) @ H @ np.diag([1 / s, 1 / s, 1.0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--torch-threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    ap.add_argument("--batch", type=int, default=8, help="frames per batched registration (0: skip)")
    ap.add_argument("--streams", type=int, default=4, help="streams stepped together (0: skip)")
    a = ap.parse_args(argv)
    if not a.video.is_file():
        print(f"error: {a.video}: no such video", file=sys.stderr)
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda: no CUDA GPU on this machine", file=sys.stderr)
        return 2
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    frames = _read(a.video, a.frames)
    if len(frames) < 3:
        print(f"error: {a.video}: fewer than 3 frames decoded", file=sys.stderr)
        return 2
    h, w = frames[0].shape[:2]
    ecfg, mcfg = EgoMotionConfig(), MotionConfig()
    cv_ego, cv_mot = EgoMotionEstimator(ecfg), MotionDetector(mcfg)
    t_ego, t_mot = TorchEgoMotionEstimator(ecfg, a.device), TorchMotionDetector(mcfg, a.device)
    # warm-up (kernel selection, CUDA context) on the first two frames, not timed
    for img in frames[:2]:
        t_ego.update(t_ego.prepare(img))
    t_ego.reset()
    times: dict[str, list[float]] = {k: [] for k in ("ego opencv", "ego torch", "motion opencv", "motion torch")}
    corner, ious, blobs = [], [], []
    failures = [0, 0]
    for k, img in enumerate(frames):
        t0 = time.perf_counter()
        g = cv_ego.prepare(img)
        e = cv_ego.update(g)
        t1 = time.perf_counter()
        gt = t_ego.prepare(img)
        et = t_ego.update(gt)
        _sync(a.device)
        t2 = time.perf_counter()
        s = cv_ego.scale
        f = cv_mot.update(g, _small(e.H, s) if e.ok else None, s)
        b = cv_mot.blobs(f)
        t3 = time.perf_counter()
        ft = t_mot.update(gt, _small(et.H, t_ego.scale) if et.ok else None, t_ego.scale)
        bt = t_mot.blobs(ft)
        _sync(a.device)
        t4 = time.perf_counter()
        if k == 0:
            continue
        for name, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[name].append(1000 * dt)
        failures[0] += not e.ok
        failures[1] += not et.ok
        if e.ok and et.ok:
            corner.append(_corner_error(e.H, et.H, w, h))
        m, mt = f.mask > 0, ft.mask > 0
        if k >= 2:
            ious.append((m & mt).sum() / max((m | mt).sum(), 1))
            blobs.append((len(b), len(bt)))
    print(
        f"clip {a.video} ({w}x{h}), {len(frames)} frames; torch device {a.device}, torch threads "
        f"{torch.get_num_threads()}; interleaved frame by frame"
    )
    print("stage                  median ms   mean ms")
    for name, v in times.items():
        print(f"{name:<22} {statistics.median(v):9.1f} {statistics.mean(v):9.1f}")

    def stat(v: list, f: str) -> str:
        return f"median {np.median(v):{f}}, min {np.min(v):{f}}, max {np.max(v):{f}}" if v else "n/a"

    print(f"registration failures: opencv {failures[0]}, torch {failures[1]} of {len(frames) - 1} pairs")
    print(
        f"agreement: homography frame-corner error (px) {stat(corner, '.3f')} ({len(corner)} pairs registered by "
        f"both); motion-mask IoU {stat(ious, '.3f')}; blobs per frame opencv "
        f"{np.mean([x for x, _ in blobs]) if blobs else 0:.1f}, torch {np.mean([y for _, y in blobs]) if blobs else 0:.1f}"
    )
    if a.batch and len(frames) > a.batch:
        est = TorchEgoMotionEstimator(ecfg, a.device)
        stack = np.stack(frames[: a.batch + 1])
        est.register_sequence(est.prepare_batch(stack))  # warm-up
        _sync(a.device)
        t0 = time.perf_counter()
        est.register_sequence(est.prepare_batch(stack))
        _sync(a.device)
        print(
            f"torch register_sequence, {a.batch} pairs in one call: "
            f"{1000 * (time.perf_counter() - t0) / a.batch:.1f} ms/frame (grey + downscale included)"
        )
    if a.streams:
        egos = [TorchEgoMotionEstimator(ecfg, a.device) for _ in range(a.streams)]
        mots = [TorchMotionDetector(mcfg, a.device) for _ in range(a.streams)]
        n, t_total = 0, 0.0
        for k, img in enumerate(frames[:20]):
            t0 = time.perf_counter()
            greys = [e.prepare(img) for e in egos]
            res = ego_streams(egos, greys)
            fields = motion_streams(
                mots, greys, [_small(r.H, egos[0].scale) if r.ok else None for r in res], [egos[0].scale] * a.streams
            )
            for det, fl in zip(mots, fields):
                det.blobs(fl)
            _sync(a.device)
            if k >= 2:
                t_total += time.perf_counter() - t0
                n += 1
        print(
            f"torch update_streams, {a.streams} streams together: {1000 * t_total / max(n, 1) / a.streams:.1f} "
            f"ms/frame per stream (ego-motion + motion layer)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
