"""Frames per second of the detector and of the whole pipeline, by runtime (PyTorch / ONNX Runtime) and batch size.

    python bench/throughput.py                      # CPU, torch vs onnx, batch 1/8/32, 64 generated 1280x720 frames
    python bench/throughput.py --device cuda --runtimes torch --batches 1,8,32,64
    python bench/throughput.py --video ../shared/data/real_video/nadir_interchange/drone.mp4 --frames 96

"detector" is the ceiling: only the model (pre-processing, forward pass, NMS) on batches of frames (with
``--tiling on``: all tiles of the batch's frames, at most 32 images per forward pass, as the pipeline does). "pipeline" is
``Pipeline.step`` for batch 1 and ``BatchedPipeline.batch_step`` for larger batches (ego-motion, detection, motion
layer, ByteTrack, speeds), frames already decoded. Weights: ``--weights``, else the shipped detector, else (for
development) the COCO INT8 ONNX in ../shared dequantised to a float .pt in the cache folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def default_weights() -> Path:
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS
    from vision.runtime import cache_dir

    if DEFAULT_DETECTOR_WEIGHTS.is_file():
        return DEFAULT_DETECTOR_WEIGHTS
    shared = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared"))
    onnx = shared / "models" / "yolov8n_coco_int8" / "yolov8n_int8.onnx"
    if not onnx.is_file():
        sys.exit(f"no detector weights: {DEFAULT_DETECTOR_WEIGHTS} is missing and so is {onnx}; pass --weights")
    out = cache_dir() / "dev" / "coco_yolov8n_dequantised.pt"
    if not out.is_file():
        from vision.training.detector.dequantize import dequantize_onnx

        dequantize_onnx(onnx, out)
    print(f"# shipped weights missing: using {out} (COCO YOLOv8n dequantised from {onnx.name}) for development")
    return out


def load_frames(video: Path | None, n: int, size: tuple[int, int]) -> tuple[list, str]:
    from vision.source import open_source

    if video is None:
        from vision.synth import SceneConfig, generate_scene

        tmp = Path(tempfile.mkdtemp(prefix="ap-bench-"))
        w, h = size
        generate_scene(
            SceneConfig(
                scene="highway",
                seed=3,
                duration_s=n / 25 + 0.2,
                fps=25,
                width=w,
                height=h,
                altitude_m=60,
                use_shared_data="off",
            ),
            tmp,
            progress=False,
        )
        video = tmp / "video.mp4"
    with open_source(video, max_frames=n) as src:
        frames = list(src)
    return frames, str(video)


def detector_inputs(det, image, tiling: str) -> list:
    """What the detector runs for one frame: the whole frame, or (tiling 'on') its tiles. 'auto' counts as whole
    frames here: the probe's choice depends on the footage."""
    if tiling != "on":
        return [image]
    from vision.detection import tile_grid

    h, w = image.shape[:2]
    return [image[y1:y2, x1:x2] for x1, y1, x2, y2 in tile_grid(w, h, det.config.imgsz, det.config.tile_overlap)]


def timed(fn, repeats: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_runtime(runtime: str, args, frames) -> list[dict]:
    import torch

    from edge.batch.batched import MAX_MODEL_BATCH, BatchedPipeline
    from tracking.config import PipelineConfig
    from tracking.pipeline import Pipeline
    from vision.detection import VehicleDetector

    cfg = PipelineConfig.model_validate(
        {
            "device": args.device,
            "road": {"enabled": False},
            "detector": {"weights": str(args.weights), "runtime": runtime, "tiling": args.tiling, "imgsz": args.imgsz},
        }
    )
    pipeline = Pipeline(cfg)
    det = pipeline.detector
    assert isinstance(det, VehicleDetector)  # the real model, built from cfg
    images = [f.image for f in frames]
    inputs = [detector_inputs(det, im, args.tiling) for im in images]  # per frame: the frame, or its tiles
    det._predict(inputs[0][:2])  # warm-up: first call builds the predictor / ORT session
    rows = []
    for b in args.batches:

        def detector_only():
            for i in range(0, len(inputs), b):
                batch = [x for per_frame in inputs[i : i + b] for x in per_frame]
                for j in range(0, len(batch), MAX_MODEL_BATCH):
                    det._predict(batch[j : j + MAX_MODEL_BATCH])
            if args.device == "cuda":
                torch.cuda.synchronize()

        def whole_pipeline():
            pipeline.reset(frames[0].image.shape[1], frames[0].image.shape[0], 25.0)
            if b == 1:
                for f in frames:
                    pipeline.step(f)
            else:
                for _ in BatchedPipeline(pipeline).run(frames, b):
                    pass

        d = timed(detector_only, args.repeats)
        p = timed(whole_pipeline, args.repeats)
        stages = pipeline.stats()["ms_per_frame_by_stage"]
        rows.append(
            {
                "runtime": det.runtime,
                "batch": b,
                "detector_fps": round(len(frames) / d, 2),
                "pipeline_fps": round(len(frames) / p, 2),
                "ms_per_frame_by_stage": stages,
                "weights": det.weights,
            }
        )
        print(
            f"{runtime:>6}  batch {b:>3}:  detector {rows[-1]['detector_fps']:7.2f} frames/s   "
            f"pipeline {rows[-1]['pipeline_fps']:7.2f} frames/s   ms/frame by stage {stages}",
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, help="detector .pt (default: shipped, else the dequantised COCO model)")
    ap.add_argument("--video", type=Path, help="frames from this video (default: a generated 1280x720 highway clip)")
    ap.add_argument("--size", default="1280x720", help="size of the generated clip")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--runtimes", default="torch,onnx")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--tiling", default="off", choices=["off", "on", "auto"])
    ap.add_argument("--repeats", type=int, default=1, help="runs per measurement; the median is reported")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    args.weights = args.weights or default_weights()

    import onnxruntime
    import torch
    import ultralytics

    if args.threads:
        torch.set_num_threads(args.threads)
    w, h = (int(v) for v in args.size.lower().split("x"))
    frames, source = load_frames(args.video, args.frames, (w, h))
    fh, fw = frames[0].image.shape[:2]
    print(
        f"# {len(frames)} frames {fw}x{fh} from {source}; device {args.device}; imgsz {args.imgsz}; tiling {args.tiling}; "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), onnxruntime {onnxruntime.__version__}, "
        f"ultralytics {ultralytics.__version__}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    results = []
    for runtime in args.runtimes.split(","):
        results += bench_runtime(runtime, args, frames)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "frames": len(frames),
                    "size": [fw, fh],
                    "source": source,
                    "device": args.device,
                    "imgsz": args.imgsz,
                    "tiling": args.tiling,
                    "cpus": os.cpu_count(),
                    "machine": platform.machine(),
                    "torch": torch.__version__,
                    "onnxruntime": onnxruntime.__version__,
                    "results": results,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
