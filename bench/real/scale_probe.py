"""``python -m bench.real.scale_probe``: how well the detector finds vehicles against their length in its input.

On every 15th frame of each real sequence with ground truth, the frame is detected at several input scales (input px
per frame px; conf 0.25, NMS IoU 0.5) and matched to the ground truth (IoU >= 0.5, Hungarian). Printed per scale:
recall and false boxes overall, then per bucket of the vehicle's long side in the detector's input: recall / false
boxes of that size. This is the measurement behind ``detector.target_vehicle_px`` (docs/detector_scale.md).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import linear_sum_assignment

SCALES = (0.375, 0.5, 0.625, 0.8, 1.0, 1.25)
BUCKETS = (0, 8, 12, 16, 24, 32, 48, 64, 96, 200)


def main(argv: list[str] | None = None) -> int:
    from bench.real.sequences import real_sequences
    from tracking.evaluation.mot import drop_ignored, iou_xywh
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS, load_yolo
    from vision.source import open_source

    ap = argparse.ArgumentParser(prog="python -m bench.real.scale_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default=str(DEFAULT_DETECTOR_WEIGHTS))
    ap.add_argument("--step", type=int, default=15, help="every N-th frame")
    args = ap.parse_args(argv)
    model = load_yolo(args.weights)
    seqs = real_sequences()
    if not seqs:
        print("no real sequence with ground truth found (../shared/data/mot missing)")
        return 2
    for seq in seqs:
        gt, ignore = seq.ground_truth()
        gt, _ = drop_ignored(gt, ignore)
        found: dict[float, list] = {s: [] for s in SCALES}
        false: dict[float, list] = {s: [] for s in SCALES}
        with open_source(seq.source, max_frames=seq.run_frames) as src:
            for frame in src:
                number = frame.index + 1
                if number % args.step:
                    continue
                g = gt.xywh[gt.frame == number]
                for s in SCALES:
                    imgsz = int(np.ceil(max(seq.size) * s / 32) * 32)
                    b = model.predict(frame.image, imgsz=imgsz, conf=0.25, iou=0.5, verbose=False)[0].boxes
                    d = b.xyxy.cpu().numpy()
                    d[:, 2:] -= d[:, :2]
                    iou = iou_xywh(g, d) if len(g) and len(d) else np.zeros((len(g), len(d)))
                    r, c = linear_sum_assignment(-iou)
                    ok = iou[r, c] >= 0.5
                    gm, dm = np.zeros(len(g), bool), np.zeros(len(d), bool)
                    gm[r[ok]], dm[c[ok]] = True, True
                    found[s] += [(max(w, h) * s, m) for (_, _, w, h), m in zip(g, gm)]
                    false[s] += [(max(w, h) * s, not m) for (_, _, w, h), m in zip(d, dm)]
        print(seq.name)
        for s in SCALES:
            a, f = np.array(found[s]).reshape(-1, 2), np.array(false[s]).reshape(-1, 2)
            line = f"  x{s:5.3f} recall {a[:, 1].mean():.2f} false boxes {int(f[:, 1].sum()):4d} |"
            for lo, hi in zip(BUCKETS[:-1], BUCKETS[1:]):
                sel = (a[:, 0] >= lo) & (a[:, 0] < hi)
                fsel = (f[:, 0] >= lo) & (f[:, 0] < hi)
                if sel.sum() >= 5:
                    line += f" {lo}-{hi} px: {a[sel, 1].mean():.2f}/{int(f[fsel, 1].sum())}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
