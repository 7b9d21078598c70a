"""Evaluate AirPatrol's vehicle detector against the COCO YOLOv8n INT8 baseline. Prints the numbers.

(a) held-out val split of the built detector data (vision/training/detector/dataset.py): Ultralytics mAP50 per class for our
    weights, and a class-agnostic "vehicle" AP50 for both models (COCO car/truck/bus count as vehicle);
(b) UAVDT M1303 (never trained on): ByteTrack via ``model.track(conf=0.1, imgsz=640, persist=True)`` frame by frame,
    MOTA / IDF1 with motmetrics (IoU >= 0.5, ``tracking.evaluation.mot``); predictions whose centre is in an ignore
    region are dropped, and so are GT boxes whose centre is there;
(c) vehicles found per frame on a few frames of the 1920x1080 nadir interchange video, tiled inference at native
    resolution (640 px tiles, overlap, merged with NMS).

  python bench/detector_eval.py                       # all three, default weights
  python bench/detector_eval.py --parts mot --weights path/to/other.pt
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
import torchvision
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from vision.training.detector import DEFAULT_WEIGHTS  # noqa: E402
from vision.training.detector.dataset import DEFAULT_DATA_DIR, build_dataset, tile_origins  # noqa: E402
from vision.training.detector.training import shared_root  # noqa: E402

COCO_VEHICLES = (2, 5, 7)  # car, bus, truck


def load(weights: Path):
    from ultralytics import YOLO

    return YOLO(str(weights), task="detect")


def vehicle_classes(model) -> list[int]:
    """Class ids that are vehicles for this model (COCO: car/bus/truck; ours: all)."""
    return list(COCO_VEHICLES) if len(model.names) == 80 else list(model.names)


# ---------------------------------------------------------------- (a) held-out val split
def read_yolo_boxes(label: Path, width: int, height: int) -> np.ndarray:
    rows = np.loadtxt(label, ndmin=2) if label.exists() and label.stat().st_size else np.zeros((0, 5))
    cx, cy, w, h = rows[:, 1] * width, rows[:, 2] * height, rows[:, 3] * width, rows[:, 4] * height
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def vehicle_ap50(model, val_images: list[Path], imgsz: int = 640) -> tuple[float, float, float]:
    """Class-agnostic AP50 of 'vehicle' (and P, R at conf 0.25) over the val images, with Ultralytics' AP code."""
    from ultralytics.utils.metrics import ap_per_class, box_iou

    classes = vehicle_classes(model)
    tps, confs, n_gt = [], [], 0
    for image_path in tqdm(val_images, desc="val vehicle AP50", unit="img"):
        image = cv2.imread(str(image_path))
        if image is None:
            raise SystemExit(f"{image_path}: not a readable image")
        gt = torch.tensor(
            read_yolo_boxes(
                Path(str(image_path).replace("/images/", "/labels/")).with_suffix(".txt"),
                image.shape[1],
                image.shape[0],
            ),
            dtype=torch.float32,
        )
        n_gt += len(gt)
        result = model.predict(image, imgsz=imgsz, conf=0.001, iou=0.7, classes=classes, verbose=False)[0]
        boxes, scores = result.boxes.xyxy.cpu(), result.boxes.conf.cpu()
        tp = np.zeros(len(boxes), bool)
        if len(boxes) and len(gt):
            iou = box_iou(gt, boxes).numpy()
            taken = np.zeros(len(gt), bool)
            for j in np.argsort(-scores.numpy()):  # greedy, highest score first
                i = int(np.argmax(np.where(taken, -1, iou[:, j])))
                if iou[i, j] >= 0.5 and not taken[i]:
                    taken[i], tp[j] = True, True
        tps.append(tp)
        confs.append(scores.numpy())
    tp, conf = np.concatenate(tps)[:, None], np.concatenate(confs)
    out = ap_per_class(tp, conf, np.zeros_like(conf), np.zeros(n_gt))
    p, r, ap = out[2], out[3], out[5]  # tp, fp, p, r, f1, ap, ...
    return float(ap[0, 0]), float(p[0]), float(r[0])


def eval_val(weights: Path, coco_onnx: Path | None, data_dir: Path, shared: Path) -> None:
    # Reuse a built data set as it is: rebuilding here (without the label teacher) would replace the training images
    # of a training run that is using the same folder (it did once, mid-run).
    built = data_dir / "data.yaml"
    data_yaml = (
        built
        if (data_dir / "images" / "val").is_dir() and built.is_file()
        else build_dataset(shared / "data" / "detection", data_dir)
    )
    ours = load(weights)
    metrics = ours.val(
        data=str(data_yaml),
        split="val",
        imgsz=640,
        batch=16,
        device="cpu",
        plots=False,
        verbose=False,
        project=str(data_dir / "runs"),
        name="eval_val",
        exist_ok=True,
    )
    print("\n(a) held-out val split:", data_dir / "images" / "val")
    print(f"  ours, Ultralytics val: mAP50 {metrics.box.map50:.3f}  mAP50-95 {metrics.box.map:.3f}")
    for i, name in ours.names.items():
        if i in metrics.box.ap_class_index:
            k = list(metrics.box.ap_class_index).index(i)
            print(f"    {name:6s} AP50 {metrics.box.ap50[k]:.3f}")
    images = sorted((data_dir / "images" / "val").glob("*.jpg"))
    for label, path in _models(weights, coco_onnx):
        ap, p, r = vehicle_ap50(load(path), images)
        print(f"  {label:15s} class-agnostic vehicle AP50 {ap:.3f}  (P {p:.3f} R {r:.3f} at the F1-best threshold)")


# ---------------------------------------------------------------- (b) UAVDT M1303 MOTA / IDF1
def mot_scores(weights: Path, seq: Path, max_frames: int | None = None) -> dict[str, float]:
    from tracking.evaluation.mot import drop_ignored, mot_metrics
    from tracking.evaluation.scoring import boxes_from_rows

    frames = sorted((seq / "img").glob("*.jpg"))[:max_frames]
    gt = boxes_from_rows(np.loadtxt(seq / "gt" / "gt_mot.txt", delimiter=",", ndmin=2)[:, :6])
    gt = gt.subset(gt.frame <= len(frames))
    ignore = boxes_from_rows(np.loadtxt(seq / "gt" / "M1303_gt_ignore.txt", delimiter=",", ndmin=2)[:, :6])
    model = load(weights)
    classes = vehicle_classes(model)
    rows = []
    started = time.monotonic()
    for index, frame_path in enumerate(tqdm(frames, desc=f"track {weights.name}", unit="frame"), 1):
        result = model.track(
            cv2.imread(str(frame_path)),
            tracker="bytetrack.yaml",
            conf=0.1,
            imgsz=640,
            persist=True,
            classes=classes,
            verbose=False,
        )[0]
        if result.boxes.id is not None:
            xyxy = result.boxes.xyxy.cpu().numpy()
            for (x1, y1, x2, y2), tid in zip(xyxy, result.boxes.id.cpu().numpy().astype(int)):
                rows.append((index, tid, x1, y1, x2 - x1, y2 - y1))
    seconds = time.monotonic() - started
    # boxes centred in an ignore region dropped on both sides, as ``airpatrol eval`` does
    row, _ = mot_metrics(drop_ignored(gt, ignore)[0], drop_ignored(boxes_from_rows(rows), ignore)[0], 0.5)
    row["ms_per_frame"] = 1000 * seconds / len(frames)
    return row


def eval_mot(weights: Path, coco_onnx: Path | None, shared: Path, max_frames: int | None) -> None:
    seq = shared / "data" / "mot" / "uavdt_M1303"
    print(f"\n(b) UAVDT M1303 ({seq}), ByteTrack conf=0.1 imgsz=640, IoU>=0.5:")
    for label, path in _models(weights, coco_onnx):
        s = mot_scores(path, seq, max_frames)
        print(
            f"  {label:15s} MOTA {100 * s['mota']:5.1f}  IDF1 {100 * s['idf1']:5.1f}  P {s['precision']:.3f}  "
            f"R {s['recall']:.3f}  IDsw {int(s['num_switches'])}  FP {int(s['num_false_positives'])}  "
            f"FN {int(s['num_misses'])}  {s['ms_per_frame']:.0f} ms/frame"
        )


# ---------------------------------------------------------------- (c) nadir video, tiled inference
def tiled_detect(model, image: np.ndarray, conf: float, tile: int = 640, overlap: int = 128) -> np.ndarray:
    """(N, 6) xyxy, score, class over native-resolution tiles, merged by class-agnostic NMS (IoU 0.5)."""
    height, width = image.shape[:2]
    crops, origins = [], []
    for y0 in tile_origins(height, tile, overlap):
        for x0 in tile_origins(width, tile, overlap):
            crops.append(image[y0 : y0 + tile, x0 : x0 + tile])
            origins.append((x0, y0))
    rows = []
    for crop, (x0, y0) in zip(crops, origins):  # one by one: the ONNX export has a fixed batch of 1
        b = model.predict(crop, imgsz=tile, conf=conf, classes=vehicle_classes(model), verbose=False)[0].boxes
        xyxy = b.xyxy.cpu().numpy() + np.array([x0, y0, x0, y0])
        rows.append(np.concatenate([xyxy, b.conf.cpu().numpy()[:, None], b.cls.cpu().numpy()[:, None]], axis=1))
    det = np.concatenate(rows) if rows else np.zeros((0, 6))
    keep = torchvision.ops.nms(torch.from_numpy(det[:, :4]).float(), torch.from_numpy(det[:, 4]).float(), 0.5)
    return det[keep.numpy()]


def eval_video(
    weights: Path, coco_onnx: Path | None, shared: Path, frame_ids: list[int], conf: float, overlay_dir: Path | None
) -> None:
    video = shared / "data" / "real_video" / "nadir_interchange" / "drone.mp4"
    capture = cv2.VideoCapture(str(video))
    frames = {}
    for index in range(max(frame_ids) + 1):
        ok, image = capture.read()
        if not ok:
            break
        if index in frame_ids:
            frames[index] = image
    print(f"\n(c) {video.name} 1920x1080 nadir, tiled 640 px at native resolution, conf {conf}: vehicles per frame")
    for label, path in _models(weights, coco_onnx):
        model = load(path)
        counts = []
        for index, image in frames.items():
            det = tiled_detect(model, image, conf)
            counts.append(len(det))
            if overlay_dir is not None:
                overlay_dir.mkdir(parents=True, exist_ok=True)
                drawn = image.copy()
                for x1, y1, x2, y2, *_ in det.astype(int):
                    cv2.rectangle(drawn, (x1, y1), (x2, y2), (0, 255, 0), 1)
                cv2.imwrite(str(overlay_dir / f"{label.split()[0].lower()}_{index:04d}.jpg"), drawn)
        print(f"  {label:15s} " + "  ".join(f"f{i}: {c}" for i, c in zip(frames, counts)))


def _models(weights: Path, coco_onnx: Path | None) -> list[tuple[str, Path]]:
    return ([("COCO INT8 ONNX", coco_onnx)] if coco_onnx else []) + [("ours", weights)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument("--shared", type=Path, default=shared_root())
    parser.add_argument("--coco-onnx", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--parts", default="val,mot,video", help="comma list of val, mot, video")
    parser.add_argument("--max-frames", type=int, default=None, help="limit UAVDT frames (quick look)")
    parser.add_argument("--video-frames", default="0,60,120,176")
    parser.add_argument("--video-conf", type=float, default=0.25)
    parser.add_argument("--no-coco", action="store_true", help="skip the COCO INT8 baseline")
    parser.add_argument("--overlay-dir", type=Path, default=None, help="write frames with boxes drawn here")
    args = parser.parse_args()
    coco_onnx = args.coco_onnx or args.shared / "models" / "yolov8n_coco_int8" / "yolov8n_int8.onnx"
    for path in (args.weights, None if args.no_coco else coco_onnx):
        if path is not None and not path.is_file():
            parser.error(f"{path}: weights file not found")
    coco_onnx = None if args.no_coco else coco_onnx
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    parts = set(args.parts.split(","))
    if "val" in parts:
        eval_val(args.weights, coco_onnx, args.data_dir, args.shared)
    if "mot" in parts:
        eval_mot(args.weights, coco_onnx, args.shared, args.max_frames)
    if "video" in parts:
        eval_video(
            args.weights,
            coco_onnx,
            args.shared,
            [int(i) for i in args.video_frames.split(",")],
            args.video_conf,
            args.overlay_dir,
        )


if __name__ == "__main__":
    main()
