"""``python bench/edge_rule_plain.py``: how much of the dual layer's lead is the frame-edge rule, and the filling of
lost frames? Plain Ultralytics ``track`` (the strongest tracker and conf of ``python -m bench.real``) scored as it is,
with the dual layer's frame-edge rule (``tracker.min_visible_at_border``, ``tracking/frame_edge.py``) applied to its
tracks afterwards (every box plain reports is a measured one), and with ``--fill-gaps N``: each track's gaps of up to
N frames filled by linear interpolation (what ``tracker.fill_lost_gaps`` does in a recorded run; ByteTrack's authors
do the same offline), alone and after the edge rule."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real.contenders import run_plain  # noqa: E402
from bench.real.sequences import real_sequences  # noqa: E402
from tracking.evaluation.io import Boxes  # noqa: E402
from tracking.evaluation.scoring import score  # noqa: E402
from tracking.frame_edge import FrameEdgeRule  # noqa: E402


def with_edge_rule(pred: Boxes, size: tuple[int, int], min_visible: float) -> Boxes:
    rule = FrameEdgeRule(min_visible, *size)
    keep = np.zeros(len(pred), bool)
    for f, rows in sorted(pred.by_frame().items()):
        x, y, w, h = pred.xywh[rows].T
        xyxy = np.column_stack([x, y, x + w, y + h])
        keep[rows] = rule.keep(pred.ids[rows].tolist(), xyxy, np.ones(len(rows), bool))
    return pred.subset(keep)


def with_gaps_filled(pred: Boxes, max_gap: int) -> Boxes:
    """Every gap of at most ``max_gap`` frames in a track filled with boxes interpolated between its two ends."""
    frames, ids, boxes = [pred.frame], [pred.ids], [pred.xywh]
    for tid in np.unique(pred.ids):
        rows = np.flatnonzero(pred.ids == tid)
        rows = rows[np.argsort(pred.frame[rows])]
        f, b = pred.frame[rows], pred.xywh[rows]
        for k in np.flatnonzero((np.diff(f) > 1) & (np.diff(f) <= max_gap + 1)):
            w = (np.arange(f[k] + 1, f[k + 1]) - f[k]) / (f[k + 1] - f[k])
            frames.append(np.arange(f[k] + 1, f[k + 1]))
            ids.append(np.full(len(w), tid))
            boxes.append((1 - w)[:, None] * b[k] + w[:, None] * b[k + 1])
    return Boxes(np.concatenate(frames), np.concatenate(ids), np.concatenate(boxes))


def main(argv: list[str] | None = None) -> int:
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", nargs="*", default=["M0703-nadir"])
    ap.add_argument("--tracker", default="botsort")
    ap.add_argument("--conf", type=float, default=0.1)
    ap.add_argument("--min-visible", type=float, default=0.5)
    ap.add_argument("--fill-gaps", type=int, default=0, help="also score with gaps of up to N frames filled")
    args = ap.parse_args(argv)
    for seq in real_sequences():
        if seq.name not in args.sequences:
            continue
        run = run_plain(seq, DEFAULT_DETECTOR_WEIGHTS, args.conf, tracker=args.tracker)
        gt, ignore = seq.ground_truth()
        edge = with_edge_rule(run.pred, seq.size, args.min_visible)
        contenders = [("as is", run.pred), (f"edge rule {args.min_visible}", edge)]
        if args.fill_gaps:
            contenders += [
                (f"gaps <= {args.fill_gaps} filled", with_gaps_filled(run.pred, args.fill_gaps)),
                ("edge rule, filled", with_gaps_filled(edge, args.fill_gaps)),
            ]
        for label, pred in contenders:
            r = score(gt, ignore, pred, seq.frames, seq.size)
            print(
                f"{seq.name} plain {args.tracker} conf {args.conf} {label:18s} MOTA {r['mota']:5.1f} FP {r['fp']:5d} "
                f"(border {r['border_fp']}) FN {r['fn']:5d} IDsw {r['idsw']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
