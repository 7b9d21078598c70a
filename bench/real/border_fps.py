"""``python -m bench.real.border_fps``: what the dual layer's false positives and misses on a real sequence are.

Runs the pipeline (``airpatrol process`` defaults plus ``--dual`` overrides) over a sequence, records for every
reported box whether this frame measured it (a detector box or a motion blob associated to the track) or the tracker
predicted it (a frame the detector skipped, or a track the detector missed), and scores it as ``bench.real`` does.
Prints the false positives split by border / measured / how much of the box lies outside the frame / best IoU with a
ground-truth box, and the misses split by frame kind (detector frame or coasted) and border.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from bench.real.contenders import pipeline_config
from bench.real.sequences import real_sequences
from tracking.evaluation.mot import drop_ignored, iou_xywh, mot_metrics
from tracking.evaluation.scoring import boxes_from_rows, touches_border
from tracking.pipeline import Pipeline
from vision.source import open_source


def _bucket(v: float, edges: list[float]) -> str:
    for lo, hi in zip(edges, edges[1:]):
        if lo <= v < hi:
            return f"{lo:.2f}-{hi:.2f}"
    return f">={edges[-1]:.2f}"


def run(seq_name: str, overrides: dict) -> None:
    seq = next(s for s in real_sequences() if s.name == seq_name)
    pipe = Pipeline(pipeline_config(False, overrides))
    rows, measured, detector_frame = [], [], {}
    with open_source(seq.source, max_frames=seq.run_frames) as src:
        pipe.reset(src.info.width, src.info.height, src.info.fps)
        for frame in src:
            before = pipe.detector_frames
            res = pipe.step(frame)
            n = frame.index + 1
            detector_frame[n] = pipe.detector_frames > before
            tracked = {int(t.track_id): t for t in pipe.tracker.tracked_stracks}
            for tr in res.tracks:
                x1, y1, x2, y2 = (float(v) for v in tr.xyxy)
                rows.append((n, tr.track_id, x1, y1, x2 - x1, y2 - y1))
                st = tracked.get(tr.track_id)
                measured.append(bool(detector_frame[n] and st is not None and st.frame_id == pipe.tracker.frame_id))
    pred = boxes_from_rows(rows)
    meas = np.array(measured, bool)
    gt, ignore = seq.ground_truth()
    gt, _ = drop_ignored(gt, ignore)
    pred_kept, _ = drop_ignored(pred, ignore)
    # drop_ignored keeps order: find the kept rows by (frame, id)
    kept_keys = set(zip(pred_kept.frame.tolist(), pred_kept.ids.tolist()))
    keep = np.array([(f, i) in kept_keys for f, i in zip(pred.frame.tolist(), pred.ids.tolist())], bool)
    pred, meas = pred.subset(keep), meas[keep]
    m, matches = mot_metrics(gt, pred, 0.5)
    print(f"{seq.name} {overrides}: MOTA {100 * m['mota']:.1f} FP {m['num_false_positives']} FN {m['num_misses']}")
    matched = {(mt.frame, mt.track_id) for mt in matches}
    fp = np.array([(f, i) not in matched for f, i in zip(pred.frame.tolist(), pred.ids.tolist())], bool)
    w, h = seq.size
    border = touches_border(pred.xywh, seq.size)
    x, y, bw, bh = pred.xywh.T
    inside_w = np.clip(x + bw, 0, w) - np.clip(x, 0, w)
    inside_h = np.clip(y + bh, 0, h) - np.clip(y, 0, h)
    outside = 1 - inside_w * inside_h / np.maximum(bw * bh, 1e-6)
    gt_by_frame = gt.by_frame()
    best_iou = np.zeros(len(pred))
    best_iou_clipped = np.zeros(len(pred))
    clipped = np.column_stack([np.clip(x, 0, w), np.clip(y, 0, h), inside_w.clip(0), inside_h.clip(0)])
    for k in np.flatnonzero(fp):
        g = gt_by_frame.get(int(pred.frame[k]))
        if g is None:
            continue
        best_iou[k] = iou_xywh(pred.xywh[k : k + 1], gt.xywh[g]).max()
        best_iou_clipped[k] = iou_xywh(clipped[k : k + 1], gt.xywh[g]).max()
    c: Counter = Counter()
    for k in np.flatnonzero(fp):
        c[
            (
                "border" if border[k] else "inner",
                "measured" if meas[k] else "predicted",
                "outside>10%" if outside[k] > 0.1 else "in frame",
                "iou " + _bucket(best_iou[k], [0, 0.01, 0.3, 0.5]),
            )
        ] += 1
    print(f"false positives: {int(fp.sum())}, border {int((fp & border).sum())}")
    for key, v in sorted(c.items(), key=lambda kv: -kv[1]):
        print(f"  {v:5d}  {' / '.join(key)}")
    tp = ~fp
    by_track = Counter(pred.ids[fp & border].tolist())
    print(f"  border FPs by track: {len(by_track)} tracks, largest {by_track.most_common(8)}")
    import os

    dump = os.environ.get("BORDER_FP_DUMP")
    if dump:  # frame, id, box of every border FP, for a look at the images
        np.savetxt(dump, np.column_stack([pred.frame, pred.ids, pred.xywh])[fp & border], fmt="%.1f", delimiter=",")
    for name, sel in (("border", border), ("inner", ~border)):
        print(
            f"  {name} boxes: measured TP {int((tp & sel & meas).sum())} FP {int((fp & sel & meas).sum())}; "
            f"predicted TP {int((tp & sel & ~meas).sum())} FP {int((fp & sel & ~meas).sum())}"
        )
    print(
        f"  FPs that clipping to the frame would turn into matches (IoU >= 0.5 once clipped): "
        f"{int((fp & (best_iou_clipped >= 0.5) & (best_iou < 0.5)).sum())}"
    )
    # misses
    matched_gt = {(mt.frame, mt.gt_id) for mt in matches} if hasattr(matches[0], "gt_id") else None
    if matched_gt is not None:
        miss = np.array([(f, i) not in matched_gt for f, i in zip(gt.frame.tolist(), gt.ids.tolist())], bool)
        gb = touches_border(gt.xywh, seq.size)
        det = np.array([detector_frame.get(int(f), False) for f in gt.frame], bool)
        mc = Counter(
            ("border" if gb[k] else "inner", "detector frame" if det[k] else "coasted frame")
            for k in np.flatnonzero(miss)
        )
        print(f"misses: {int(miss.sum())}")
        for key, v in sorted(mc.items(), key=lambda kv: -kv[1]):
            print(f"  {v:5d}  {' / '.join(key)}")


def main(argv: list[str] | None = None) -> int:
    import json

    ap = argparse.ArgumentParser(prog="python -m bench.real.border_fps", description=__doc__.splitlines()[0])
    ap.add_argument("--sequence", default="M0703-nadir")
    ap.add_argument("--dual", nargs="*", default=[], metavar="KEY=JSON", help="config overrides")
    args = ap.parse_args(argv)
    overrides = {k: json.loads(v) for k, v in (o.split("=", 1) for o in args.dual)}
    run(args.sequence, overrides)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
