"""``python bench/edge_rule_plain.py``: how much of the dual layer's lead is the frame-edge rule? Plain Ultralytics
``track`` (the strongest tracker and conf of ``python -m bench.real``) scored as it is and with the dual layer's
frame-edge rule (``tracker.min_visible_at_border``, ``tracking/frame_edge.py``) applied to its tracks afterwards
(every box plain reports is a measured one)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real.contenders import run_plain  # noqa: E402
from bench.real.scoring import score  # noqa: E402
from bench.real.sequences import real_sequences  # noqa: E402
from tracking.evaluation.io import Boxes  # noqa: E402
from tracking.frame_edge import FrameEdgeRule  # noqa: E402


def with_edge_rule(pred: Boxes, size: tuple[int, int], min_visible: float) -> Boxes:
    rule = FrameEdgeRule(min_visible, *size)
    keep = np.zeros(len(pred), bool)
    for f, rows in sorted(pred.by_frame().items()):
        x, y, w, h = pred.xywh[rows].T
        xyxy = np.column_stack([x, y, x + w, y + h])
        keep[rows] = rule.keep(pred.ids[rows].tolist(), xyxy, np.ones(len(rows), bool))
    return pred.subset(keep)


def main(argv: list[str] | None = None) -> int:
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", nargs="*", default=["M0703-nadir"])
    ap.add_argument("--tracker", default="botsort")
    ap.add_argument("--conf", type=float, default=0.1)
    ap.add_argument("--min-visible", type=float, default=0.5)
    args = ap.parse_args(argv)
    for seq in real_sequences():
        if seq.name not in args.sequences:
            continue
        run = run_plain(seq, DEFAULT_DETECTOR_WEIGHTS, args.conf, tracker=args.tracker)
        gt, ignore = seq.ground_truth()
        for label, pred in (
            ("as is", run.pred),
            (f"edge rule {args.min_visible}", with_edge_rule(run.pred, seq.size, args.min_visible)),
        ):
            r = score(gt, ignore, pred, seq.frames, seq.size)
            print(
                f"{seq.name} plain {args.tracker} conf {args.conf} {label:14s} MOTA {r['mota']:5.1f} FP {r['fp']:5d} "
                f"(border {r['border_fp']}) FN {r['fn']:5d} IDsw {r['idsw']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
