"""Plain Ultralytics tracking figures of detector weights on the real dev sequences (issue 23: day accuracy back).

What a user of Ultralytics runs, ``YOLO(w).track(frame, tracker="bytetrack.yaml", persist=True, conf=c, imgsz=640)``,
for c in 0.1 / 0.2 / 0.3, scored like ``bench/real`` (``tracking.evaluation.scoring.score``: motmetrics, IoU 0.5, UAVDT
ignore regions dropped) on M1303 (day oblique), M1003 frames 1-240 (night) and M0703 frames 1-340 (day nadir).

The detector runs once per frame at conf 0.1; each conf then replays Ultralytics' own ``BYTETracker`` on the
detections above c: ``bench.real``'s one-pass plain sweep (``bench/real/contenders.py`` ``run_plain_sweep``). That is
what ``track(conf=c)`` does (conf filtering before NMS removes only boxes below c, which cannot suppress boxes above
it), at a third of the CPU; ``tests/bench/test_real_bench.py`` checks the sweep against ``model.track``.

  python bench/detector_track.py --weights vision/weights/airpatrol_yolov8n.pt --cache /tmp/track_before.json
  python bench/detector_track.py --weights W --val      # held-out val split: day, low-light and turned vehicle AP50
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from bench.real.sequences import real_sequences  # noqa: E402
from tracking.evaluation.scoring import score  # noqa: E402

CONFS = (0.1, 0.2, 0.3)


def evaluate(weights: Path) -> dict:
    from bench.real.contenders import run_plain_sweep

    results: dict = {}
    for seq in real_sequences():
        runs = run_plain_sweep(seq, weights, list(CONFS), trackers=("bytetrack",))
        gt, ignore = seq.ground_truth()
        for conf in CONFS:
            s = score(gt, ignore, runs[("bytetrack", conf)].pred, seq.frames)
            results[f"{seq.name}@{conf}"] = s
            print(
                f"{seq.name:12s} conf {conf}: MOTA {s['mota']:.1f} IDF1 {s['idf1']:.1f} FP {s['fp']} FN {s['fn']} "
                f"IDsw {s['idsw']}",
                flush=True,
            )
    return results


def val_ap50(weights: Path, data_dir: Path) -> None:
    """Class-agnostic vehicle AP50 on the held-out val split of the day data (scenes no training image shows), on
    night-like copies of the same images (``low_light``, seed 123) and on the same images turned 45 and 90 degrees
    (vehicles at headings the day data rarely shows), with ``bench/detector_eval.py``'s AP code."""
    import tempfile

    from ultralytics import YOLO

    from bench.detector_eval import vehicle_ap50
    from vision.training.detector.lowlight import low_light_copies
    from vision.training.detector.turns import turned_copies

    images = sorted((data_dir / "images" / "val").glob("*.jpg"))
    if not images:
        raise SystemExit(f"{data_dir / 'images' / 'val'}: no val images (build the data: airpatrol train-detector)")
    model = YOLO(str(weights), task="detect")
    ap, p, r = vehicle_ap50(model, images)
    print(f"day val ({len(images)} images): vehicle AP50 {ap:.3f} (P {p:.2f} R {r:.2f})", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        low_light_copies(images, data_dir / "labels" / "val", Path(tmp), seed=123)
        ap_dark, p, r = vehicle_ap50(model, sorted((Path(tmp) / "images").glob("*.jpg")))
    print(f"low-light val: vehicle AP50 {ap_dark:.3f} (P {p:.2f} R {r:.2f}); mean {(ap + ap_dark) / 2:.3f}")
    for degrees in (45.0, 90.0):
        with tempfile.TemporaryDirectory() as tmp:
            # the canvas grows by up to 1.4x: a larger imgsz keeps the vehicles at the size the day rows saw them
            turned = turned_copies(images, data_dir / "labels" / "val", Path(tmp), degrees=degrees)
            ap_t, p, r = vehicle_ap50(model, turned, imgsz=896 if degrees == 45.0 else 640)
        print(f"val turned {degrees:g} degrees: vehicle AP50 {ap_t:.3f} (P {p:.2f} R {r:.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, default=REPO / "vision/weights/airpatrol_yolov8n.pt")
    parser.add_argument("--cache", type=Path, help="write (or read, when present) the figures as JSON")
    parser.add_argument("--val", action="store_true", help="instead: vehicle AP50 on the held-out val split")
    parser.add_argument("--data-dir", type=Path, default=Path("~/.cache/airpatrol/detector_data").expanduser())
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    if args.val:
        val_ap50(args.weights, args.data_dir)
        return
    if args.cache and args.cache.is_file():
        print(args.cache.read_text())
        return
    results = evaluate(args.weights)
    if args.cache:
        args.cache.write_text(json.dumps({"weights": str(args.weights), "results": results}, indent=1))


if __name__ == "__main__":
    main()
