"""Real footage at native scale vs a smaller one: what a recording's detector scale does where truth exists.

Two checks (docs/study.md, "The detector on OpenVINO"):

``upscaled``: UAVDT's oblique sequences (1024 x 540, native either way) upscaled to 1920 x 1012 (bicubic, their truth
boxes with them) and processed as recordings (``run_airpatrol``) with each named setting; MOTA, IDF1, recall and
precision, and the scale plan each run used. The frames are written once into ``--work``.

``photos``: the held-out 1920 x 1080 images of the labelled drone sets (``vision/training/detector/dataset.py``'s val
scenes, never trained on) detected at two input sizes; recall of the labels (IoU >= 0.5, one box each) and the boxes
that match no label, at conf 0.1 and 0.25.

    python bench/native_scale_check.py upscaled --work /tmp/up --settings 'onnx075={"detector.runtime": "onnx"}' \
        'default={}' --sequences M1303,M1003-night
    python bench/native_scale_check.py photos --sizes 1440,1920
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("YOLO_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

W, H = 1920, 1012  # UAVDT's 1024 x 540 at 1080p width


def upscaled(args) -> None:
    import cv2

    from bench.real.contenders import run_airpatrol
    from bench.real.sequences import real_sequences
    from tracking.evaluation.io import Boxes
    from tracking.evaluation.scoring import score

    settings = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.settings)}
    for seq in real_sequences():
        if seq.name not in args.sequences.split(","):
            continue
        src = Path(args.work) / seq.name / "img"
        if not src.exists():
            src.mkdir(parents=True)
            files = sorted(seq.source.rglob("*.jpg")) if seq.source.is_dir() else None
            cap = None if files else cv2.VideoCapture(str(seq.source))
            for i in range(seq.run_frames):
                img = cv2.imread(str(files[i])) if files else cap.read()[1]  # type: ignore[union-attr]
                if img is None:
                    sys.exit(f"{seq.source}: frame {i + 1} unreadable")
                big = cv2.resize(img, (W, H), interpolation=cv2.INTER_CUBIC)
                cv2.imwrite(str(src / f"img{i + 1:06d}.jpg"), big, [cv2.IMWRITE_JPEG_QUALITY, 95])
        s = np.array([W / seq.size[0], H / seq.size[1]] * 2)
        gt, ign = seq.ground_truth()
        gt, ign = Boxes(gt.frame, gt.ids, gt.xywh * s), Boxes(ign.frame, ign.ids, ign.xywh * s)
        for name, overrides in settings.items():
            r = run_airpatrol(replace(seq, source=src, size=(W, H)), False, overrides)
            m = score(gt, ign, r.pred, seq.frames, (W, H))
            scales = sorted({e["scale"] for e in r.scales or []})
            print(
                f"{seq.name:12s} {name:12s} MOTA {m['mota']:5.1f} IDF1 {m['idf1']:5.1f} recall {m['recall']:.3f} "
                f"precision {m['precision']:.3f}  scales {scales}",
                flush=True,
            )


def photos(args) -> None:
    import cv2
    import torch
    from torchvision.ops import box_iou

    from vision.config import DetectorConfig
    from vision.runtime import runtime_weights
    from vision.training.detector.dataset import SOURCES, _source_images, read_labels
    from vision.training.detector.training import shared_root
    from vision.yolo_weights import DEFAULT_DETECTOR_WEIGHTS, load_yolo

    path, runtime = runtime_weights(DetectorConfig(runtime=args.runtime), "cpu", DEFAULT_DETECTOR_WEIGHTS)
    model = load_yolo(path)
    root = shared_root() / "data" / "detection"
    totals: dict[tuple, np.ndarray] = {}
    for src in SOURCES:
        if not (root / src.name).is_dir():
            continue
        for p in _source_images(root, src):
            if src.scene_of(p.stem) not in src.val_scenes:
                continue
            img = cv2.imread(str(p))
            if img is None:
                print(f"{p}: unreadable, skipped")
                continue
            h, w = img.shape[:2]
            labels = read_labels(root / src.name / "labels" / f"{p.stem}.txt", src.class_map, src.obb)
            if (w, h) != (1920, 1080) or not len(labels):
                continue
            cx, cy, bw, bh = labels[:, 1] * w, labels[:, 2] * h, labels[:, 3] * w, labels[:, 4] * h
            gt = torch.tensor(np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1), dtype=torch.float32)
            for size in (int(v) for v in args.sizes.split(",")):
                boxes = model.predict(img, imgsz=size, conf=0.1, iou=0.5, verbose=False)[0].boxes
                for conf in (0.1, 0.25):
                    pred = boxes.xyxy[boxes.conf >= conf].float().cpu()
                    t = totals.setdefault((src.name, size, conf), np.zeros(3))
                    t[0] += len(gt)
                    found = 0
                    if len(pred):  # one box a label, the best overlaps first
                        iou = box_iou(gt, pred).numpy()
                        labels_taken: set[int] = set()
                        boxes_taken: set[int] = set()
                        for g, q in sorted(zip(*np.nonzero(iou >= 0.5)), key=lambda gq: -iou[gq[0], gq[1]]):
                            if g not in labels_taken and q not in boxes_taken:
                                labels_taken.add(g)
                                boxes_taken.add(q)
                                found += 1
                    t[1] += found
                    t[2] += len(pred) - found
    print(f"# {path.name} ({runtime})")
    for (name, size, conf), t in sorted(totals.items()):
        print(
            f"{name:18s} {size:5d} px conf {conf:.2f}: labels {t[0]:4.0f} recall {t[1] / t[0]:.3f} "
            f"unmatched boxes {t[2]:4.0f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="check", required=True)
    up = sub.add_parser("upscaled", help="UAVDT's oblique sequences upscaled to 1080p, as recordings")
    up.add_argument("--work", required=True, help="folder for the upscaled frames")
    up.add_argument("--sequences", default="M1303,M1003-night")
    up.add_argument("--settings", nargs="+", default=["default={}", 'onnx={"detector.runtime": "onnx"}'])
    ph = sub.add_parser("photos", help="held-out 1080p labelled drone images at two input sizes")
    ph.add_argument("--sizes", default="1440,1920")
    ph.add_argument("--runtime", default="onnx", choices=["auto", "torch", "onnx", "openvino"])
    args = ap.parse_args()
    upscaled(args) if args.check == "upscaled" else photos(args)


if __name__ == "__main__":
    main()
