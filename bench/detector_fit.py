"""How well the shipped detector alone boxes a clip's truth, by vehicle class. Prints the numbers.

For every ``--every``-th frame, the detector runs on the frame as ``bench/study.py --e2e`` counts the vehicles it
boxes (``bench/study_e2e.py`` ``detector_ious``: tiled at native resolution, scores >= 0.25), and each truth box takes
the best IoU of any detector box: the share found at IoU >= 0.5, the share only at 0.3-0.5 (a box on the vehicle that fits badly), and the median IoU
of those at 0.3 or more. A render (``airpatrol synth``: ``video.mp4``, ``gt/gt.txt``, classes from ``scene.json``)
or a real MOT sequence (a video or an image folder, and its MOTChallenge ``gt``) alike: docs/study.md compares the
renders' oblique vehicles with the real oblique UAVDT M1303 this way.

  YOLO_OFFLINE=1 python bench/detector_fit.py RENDER/video.mp4 RENDER/gt/gt.txt --scene RENDER/scene.json
  YOLO_OFFLINE=1 python bench/detector_fit.py ../shared/data/mot/uavdt_M1303/img ../shared/data/mot/uavdt_M1303/gt/gt_mot.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def best_ious(source: Path, gt_path: Path, every: int, classes: dict[int, str]) -> dict[str, np.ndarray]:
    """Class -> the best detector IoU of each truth box on the sampled frames ("all" without classes)."""
    from bench.study_e2e import detector_ious
    from tracking.config import DetectorConfig
    from vision.detection import VehicleDetector
    from vision.source import open_source

    rows = np.loadtxt(gt_path, delimiter=",", ndmin=2)
    det = VehicleDetector(DetectorConfig(tiling="on"), "cpu")
    found: dict[str, list[float]] = {}
    with open_source(source) as frames:
        for frame in frames:
            f = frame.index + 1  # MOTChallenge frames are 1-based
            truth = rows[rows[:, 0] == f]
            if frame.index % every or not len(truth):
                continue
            best = detector_ious(det, frame.image, truth[:, 2:6])
            for vid, iou in zip(truth[:, 1].astype(int), best):
                found.setdefault(classes.get(int(vid), "all") if classes else "all", []).append(float(iou))
    return {c: np.array(v) for c, v in found.items()}


def table(ious: dict[str, np.ndarray]) -> list[str]:
    lines = [f"{'class':8s} {'boxes':>6s} {'>=0.5':>6s} {'0.3-0.5':>8s} {'<0.3':>6s} {'median >=0.3':>13s}"]
    for c, v in sorted(ious.items()):
        fit = v[v >= 0.3]
        med = f"{np.median(fit):.3f}" if len(fit) else "-"
        lines.append(
            f"{c:8s} {len(v):6d} {np.mean(v >= 0.5):6.3f} {np.mean((v >= 0.3) & (v < 0.5)):8.3f} "
            f"{np.mean(v < 0.3):6.3f} {med:>13s}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="the clip: a video file or a folder of frames")
    ap.add_argument("gt", type=Path, help="MOTChallenge truth (frame, id, left, top, width, height, ...)")
    ap.add_argument("--scene", type=Path, help="a render's scene.json: results by vehicle class")
    ap.add_argument("--every", type=int, default=15, help="every n-th frame (default 15)")
    args = ap.parse_args(argv)
    for p in (args.source, args.gt, *([args.scene] if args.scene else [])):
        if not p.exists():
            print(f"error: {p}: no such file or folder", file=sys.stderr)
            return 2
    classes: dict[int, str] = {}
    if args.scene:
        try:
            vehicles = json.loads(args.scene.read_text())["vehicles"]
            classes = {int(k): v.get("class", "car") for k, v in vehicles.items()}
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            print(f"error: {args.scene}: not a render's scene.json ({exc})", file=sys.stderr)
            return 2
    try:
        ious = best_ious(args.source, args.gt, max(1, args.every), classes)
    except ValueError as exc:
        print(f"error: {args.gt}: not MOTChallenge truth ({exc})", file=sys.stderr)
        return 2
    print("\n".join(table(ious)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
