"""Frames per second of the detector and of the whole pipeline, by runtime (PyTorch / ONNX Runtime / OpenVINO) and batch
size.

    python bench/throughput.py                      # CPU, torch vs onnx vs openvino, batch 1/8/32, 64 generated 1280x720 frames
    python bench/throughput.py --device cuda --runtimes torch --batches 1,8,32,64
    python bench/throughput.py --video ../shared/data/real_video/nadir_interchange/drone.mp4 --frames 96
    python bench/throughput.py --ray-nodes 1,2 --flights 6 --flight-seconds 5   # airpatrol batch --ray, 1 vs 2 nodes

"detector" is the ceiling: only the model (pre-processing, forward pass, NMS) on batches of frames (with
``--tiling on``: all tiles of the batch's frames, at most 32 images per forward pass, as the pipeline does). "pipeline" is
``Pipeline.step`` for batch 1 and ``BatchedPipeline.batch_step`` for larger batches (ego-motion, detection, motion
layer, ByteTrack, speeds), frames already decoded. Weights: ``--weights``, else the shipped detector, else (for
development) the COCO INT8 ONNX in ../shared dequantised to a float .pt in the cache folder.

``--ray-nodes N,M``: the whole ``airpatrol batch --ray ADDRESS`` command instead, on a Ray cluster of N (then M) nodes
of ``--cpus-per-node`` CPUs started on this machine (``edge/batch/local_cluster.py``), over the same generated flights
(``--flights`` of ``--flight-seconds`` at ``--fps``, ``--size``; no database, no road U-Net). The time is the
command's wall time (driver start, one worker per CPU loading the models, every flight), the cluster's own start
excluded; the nodes of one machine share its cores, so this shows how the work spreads, not what separate machines
would gain.
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
from collections import Counter
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


def make_flights(args) -> Path:
    """``--flights`` generated highway flights (video + DJI .SRT) in a temporary folder."""
    import shutil

    from vision.synth import SceneConfig, generate_scene

    root = Path(tempfile.mkdtemp(prefix="ap-bench-flights-"))
    w, h = (int(v) for v in args.size.lower().split("x"))
    for i in range(args.flights):
        work = root / f".gen{i}"
        cfg = SceneConfig(
            scene="highway",
            seed=100 + i,
            duration_s=args.flight_seconds,
            fps=args.fps,
            width=w,
            height=h,
            altitude_m=45,
            use_shared_data="off",
        )
        generate_scene(cfg, work, progress=False)
        shutil.move(work / "video.mp4", root / f"flight{i:02d}.mp4")
        shutil.move(work / "video.SRT", root / f"flight{i:02d}.SRT")
        shutil.rmtree(work)
    return root


def bench_ray(args) -> list[dict]:
    """Wall time of ``airpatrol batch --ray`` over the same flights on clusters of each size in ``--ray-nodes``."""
    import shutil
    import subprocess

    from edge.batch.local_cluster import LocalRayCluster

    flights = make_flights(args)
    frames = args.flights * round(args.flight_seconds * args.fps)
    pipeline = {
        "device": "cpu",
        "road": {"enabled": False},
        "detector": {"weights": str(args.weights), "runtime": args.runtimes.split(",")[0], "tiling": args.tiling},
    }
    config = flights / "config.json"
    config.write_text(json.dumps({"pipeline": pipeline}))
    beside = Path(sys.executable).with_name("airpatrol")
    command = [str(beside)] if beside.is_file() else [sys.executable, "-c", "from edge.cli import main; main()"]
    print(
        f"# {args.flights} flights x {args.flight_seconds} s at {args.fps} fps ({frames} frames, {args.size}); "
        f"detector {pipeline['detector']}; {os.cpu_count()} CPUs; nodes of {args.cpus_per_node} CPU on this machine"
    )
    rows = []
    for rep in range(args.repeats):  # sizes interleaved: a change in the machine's load hits each of them
        for nodes in args.ray_nodes:
            with LocalRayCluster(nodes=nodes, cpus_per_node=args.cpus_per_node) as cluster:
                out = Path(tempfile.mkdtemp(prefix="ap-bench-runs-"))
                cmd = [*command, "batch", str(flights), "--ray", cluster.address, "--out", str(out)]
                cmd += ["--config", str(config), "--quiet"]
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                done = subprocess.run(cmd, env={**os.environ, **cluster.client_env}, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if done.returncode != 0:
                    sys.exit(
                        f"airpatrol batch failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
                    )
                manifests = [json.loads(m.read_text()) for m in out.glob("*/batch.json")]
                per_node = sorted(Counter(m.get("ray_node") for m in manifests).values(), reverse=True)
                shutil.rmtree(out)
            rows.append(
                {
                    "nodes": nodes,
                    "repeat": rep + 1,
                    "wall_s": round(wall, 1),
                    "frames_per_s": round(frames / wall, 2),
                    "flights_per_min": round(args.flights / wall * 60, 2),
                    "flights_per_node": per_node,
                    "load_before": round(load, 1),
                }
            )
            r = rows[-1]
            print(
                f"{nodes} node(s), run {rep + 1}: {r['wall_s']:6.1f} s  {r['frames_per_s']:6.2f} frames/s  "
                f"{r['flights_per_min']:5.2f} flights/min  flights per node {per_node}  (load before {load:.1f})",
                flush=True,
            )
    shutil.rmtree(flights)
    for nodes in args.ray_nodes:
        walls = [r["wall_s"] for r in rows if r["nodes"] == nodes]
        print(
            f"{nodes} node(s): median {statistics.median(walls):.1f} s = {frames / statistics.median(walls):.2f} frames/s"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, help="detector .pt (default: shipped, else the dequantised COCO model)")
    ap.add_argument("--video", type=Path, help="frames from this video (default: a generated 1280x720 highway clip)")
    ap.add_argument("--size", help="size of the generated clip (default 1280x720; with --ray-nodes 640x360)")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--runtimes", default="torch,onnx,openvino")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--tiling", default="off", choices=["off", "on", "auto"])
    ap.add_argument("--repeats", type=int, default=1, help="runs per measurement; the median is reported")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--ray-nodes", help="e.g. 1,2: time `airpatrol batch --ray` on clusters of these sizes instead")
    ap.add_argument("--cpus-per-node", type=int, default=1, help="--ray-nodes: CPUs of each node")
    ap.add_argument("--flights", type=int, default=6, help="--ray-nodes: generated flights")
    ap.add_argument("--flight-seconds", type=float, default=5.0, help="--ray-nodes: length of each flight")
    ap.add_argument("--fps", type=int, default=10, help="--ray-nodes: frame rate of the generated flights")
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    args.weights = args.weights or default_weights()
    if args.ray_nodes:
        args.size = args.size or "640x360"  # the batch tests' flights
        args.ray_nodes = [int(n) for n in args.ray_nodes.split(",")]
        rows = bench_ray(args)
        if args.json:
            args.json.write_text(json.dumps({"cpus": os.cpu_count(), "results": rows}, indent=2))
        return

    import onnxruntime
    import torch
    import ultralytics

    try:
        import openvino

        openvino_version = openvino.__version__.split("-")[0]
    except ImportError:
        openvino_version = "not installed"

    if args.threads:
        torch.set_num_threads(args.threads)
    w, h = (int(v) for v in (args.size or "1280x720").lower().split("x"))
    frames, source = load_frames(args.video, args.frames, (w, h))
    fh, fw = frames[0].image.shape[:2]
    print(
        f"# {len(frames)} frames {fw}x{fh} from {source}; device {args.device}; imgsz {args.imgsz}; tiling {args.tiling}; "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), onnxruntime {onnxruntime.__version__}, "
        f"openvino {openvino_version}, "
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
                    "openvino": openvino_version,
                    "results": results,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
