"""``python -m bench.real.cost``: time per frame of plain Ultralytics tracking vs ``airpatrol process`` (baseline and
dual), interleaved in one run on the same frames, so machine load affects all alike.

Reports wall ms/frame and CPU ms/frame (process time over all threads: what the contender costs the machine, less
sensitive to other jobs), per repeat and the median ratio to plain. Models are loaded before timing starts.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.real.contenders import pipeline_config
from bench.real.sequences import real_sequences
from bench.real.track_match import match


def _plain(seq, weights: Path, frames: int, imgsz: int = 640) -> tuple[float, float]:
    from ultralytics import YOLO

    from vision.source import open_source

    model = YOLO(str(weights), task="detect")
    with open_source(seq.source, max_frames=1) as src:
        model.predict(next(iter(src)).image, imgsz=imgsz, verbose=False)  # warm-up
    w0, c0 = time.perf_counter(), time.process_time()
    with open_source(seq.source, max_frames=frames) as src:
        for frame in src:
            model.track(frame.image, tracker="bytetrack.yaml", persist=True, conf=0.1, imgsz=imgsz, verbose=False)
    return 1000 * (time.perf_counter() - w0) / frames, 1000 * (time.process_time() - c0) / frames


def _airpatrol(seq, baseline: bool, frames: int, overrides: dict | None = None) -> tuple[float, float, dict]:
    import json

    from edge.runner import process_video
    from tracking.pipeline import Pipeline

    config = pipeline_config(baseline, overrides)
    pipeline = Pipeline(config)  # models loaded before timing
    with tempfile.TemporaryDirectory() as tmp:
        w0, c0 = time.perf_counter(), time.process_time()
        out = process_video(
            seq.source,
            Path(tmp) / "run",
            config,
            pipeline=pipeline,
            write_video=False,
            progress=False,
            max_frames=frames,
        )
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        stages = json.loads((out.out_dir / "summary.json").read_text())["timings"]["ms_per_frame_by_stage"]
    return 1000 * wall / frames, 1000 * cpu / frames, stages


def measure(seq, frames: int, repeats: int, log=print, dual_overrides: dict | None = None) -> dict:
    """Median wall and CPU ms/frame of plain, baseline and dual (shipped defaults) on the first ``frames`` frames,
    interleaved ``repeats`` times, with the ratios to plain."""
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    rows: dict[str, list[tuple[float, float]]] = {"plain": [], "baseline": [], "dual": []}
    stages: dict = {}
    for r in range(repeats):
        rows["plain"].append(_plain(seq, DEFAULT_DETECTOR_WEIGHTS, frames))
        for name, base in (("baseline", True), ("dual", False)):
            wall, cpu, st = _airpatrol(seq, base, frames, None if base else dual_overrides)
            rows[name].append((wall, cpu))
            stages[name] = st
        log(
            f"{seq.name} cost repeat {r + 1}: "
            + ", ".join(f"{k} {v[-1][0]:.0f} ms wall / {v[-1][1]:.0f} ms CPU" for k, v in rows.items())
        )
    plain_wall = statistics.median(w for w, _ in rows["plain"])
    plain_cpu = statistics.median(c for _, c in rows["plain"])
    out = {}
    for name, v in rows.items():
        wall, cpu = statistics.median(w for w, _ in v), statistics.median(c for _, c in v)
        out[name] = {
            "wall": wall,
            "cpu": cpu,
            "wall_ratio": wall / plain_wall,
            "cpu_ratio": cpu / plain_cpu,
            "stages": stages.get(name),
            "frames": frames,
            "repeats": repeats,
        }
    return out


INTERCHANGE = Path("data") / "real_video" / "nadir_interchange" / "drone.mp4"


def vehicles_found(mot_rows: np.ndarray, fps: float, min_s: float = 1.0) -> int:
    """Tracks lasting at least ``min_s`` seconds (first to last frame) in MOTChallenge rows (frame, id, ...)."""
    rows = np.asarray(mot_rows).reshape(-1, 6)
    spans: dict[int, list[int]] = {}
    for f, tid in rows[:, :2].astype(int):
        s = spans.setdefault(int(tid), [f, f])
        s[0], s[1] = min(s[0], f), max(s[1], f)
    return sum(1 for a, b in spans.values() if b - a + 1 >= min_s * fps)


def _plain_tracks(source: Path, weights: Path, frames: int) -> dict:
    from ultralytics import YOLO

    from vision.source import open_source

    model = YOLO(str(weights), task="detect")
    with open_source(source, max_frames=1) as src:
        model.predict(next(iter(src)).image, imgsz=640, verbose=False)  # warm-up
    rows, n = [], 0
    w0, c0 = time.perf_counter(), time.process_time()
    with open_source(source, max_frames=frames) as src:
        fps = src.info.fps
        for frame in src:
            r: Any = list(
                model.track(frame.image, tracker="bytetrack.yaml", persist=True, conf=0.1, imgsz=640, verbose=False)
            )[0]
            if r.boxes is not None and r.boxes.id is not None:
                ids, xyxy = r.boxes.id.cpu().numpy(), r.boxes.xyxy.cpu().numpy()
                rows += [(frame.index + 1, int(t), *map(float, b)) for t, b in zip(ids, xyxy)]
            n += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {
        "vehicles": vehicles_found(np.array(rows), fps),
        "wall": 1000 * wall / n,
        "cpu": 1000 * cpu / n,
        "frames": n,
        "fps": fps,
        "rows": rows,
    }


def _dual_tracks(source: Path, weights: Path, frames: int, overrides: dict) -> dict:
    import json

    from edge.runner import process_video
    from tracking.evaluation.io import read_mot
    from tracking.pipeline import Pipeline

    config = pipeline_config(False, {**overrides, "detector.weights": str(weights)})
    pipeline = Pipeline(config)  # models loaded before timing
    with tempfile.TemporaryDirectory() as tmp:
        w0, c0 = time.perf_counter(), time.process_time()
        out = process_video(
            source, Path(tmp) / "run", config, pipeline=pipeline, write_video=False, progress=False, max_frames=frames
        )
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        summary = json.loads((out.out_dir / "summary.json").read_text())
        pred, _ = read_mot(out.out_dir / "tracks_mot.txt")
    n = int(summary["counts"]["frames"])
    xyxy = np.column_stack([pred.xywh[:, :2], pred.xywh[:, :2] + pred.xywh[:, 2:]])
    rows = np.column_stack([pred.frame, pred.ids, xyxy])
    fps = float(summary.get("video", {}).get("fps", 25.0))
    return {
        "vehicles": vehicles_found(rows, fps),
        "fps": fps,
        "rows": rows.tolist(),
        "wall": 1000 * wall / n,
        "cpu": 1000 * cpu / n,
        "frames": n,
        "stages": summary["timings"].get("ms_per_frame_by_stage"),
        "detector_scales": summary.get("detector_scales"),
    }


# The reference for what can be found: the detector at the frame's own resolution on every frame.
NATIVE_REFERENCE = {"detector.tiling": "on", "detector.every_n_frames": 1}
# Before motion frames: while the motion layer carries the tracks, the detector ran on every frame.
PREVIOUS_CARRIED = {"motion.carried_detector_every_n_frames": 1}


def interchange(weights: Path, frames: int, cache: Path, cached, log=print) -> dict | None:
    """Vehicles found and CPU time per frame on the 1080p nadir interchange (no ground truth): plain ByteTrack at 640,
    the dual layer's defaults, and the native-resolution reference; ``cached(cache, key, compute, pipeline)``."""
    from vision.training.detector.training import shared_root

    source = shared_root() / INTERCHANGE
    if not source.is_file():
        log(f"{source}: missing, interchange cost skipped")
        return None
    import hashlib

    tag = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    key = {"seq": "interchange", "frames": frames, "weights": tag, "rows": True}
    out = {
        "source": f"../shared/{INTERCHANGE.as_posix()}",
        "plain": cached(cache, {**key, "contender": "plain"}, lambda: _plain_tracks(source, weights, frames), False),
        "dual": cached(cache, {**key, "contender": "dual"}, lambda: _dual_tracks(source, weights, frames, {})),
        "native": cached(
            cache,
            {**key, "contender": "dual", "overrides": NATIVE_REFERENCE},
            lambda: _dual_tracks(source, weights, frames, NATIVE_REFERENCE),
        ),
    }
    # what the motion layer adds there: the tiny vehicles the detector at an affordable scale cannot see
    out["dual_no_motion"] = cached(
        cache,
        {**key, "contender": "dual", "overrides": {"motion.enabled": False}},
        lambda: _dual_tracks(source, weights, frames, {"motion.enabled": False}),
    )
    # the previous behaviour where the motion layer carries the tracks: the detector on every frame (no motion frames)
    out["dual_detector_every_frame"] = cached(
        cache,
        {**key, "contender": "dual", "overrides": PREVIOUS_CARRIED},
        lambda: _dual_tracks(source, weights, frames, PREVIOUS_CARRIED),
    )
    # as a live stream's feed reports them: tracks from the frame they are confirmed on, lost frames empty (the native
    # reference and the other rows report them from their first frame and fill lost frames, as a recorded run does)
    live = {"motion.report_from_first_frame": False, "tracker.fill_lost_gaps": False}
    out["dual_as_live"] = cached(
        cache, {**key, "contender": "dual", "overrides": live}, lambda: _dual_tracks(source, weights, frames, live)
    )
    out["frames"] = out["dual"]["frames"]
    reference = np.array(out["native"]["rows"]).reshape(-1, 6)
    for k in ("plain", "dual", "dual_detector_every_frame", "dual_no_motion", "dual_as_live", "native"):
        r = out[k] = dict(out[k])  # the cached entry keeps its rows; the results file gets the counts only
        r["matched"] = match(np.array(r.pop("rows")).reshape(-1, 6), reference, r.get("fps", 25.0))
        m = r["matched"]
        log(
            f"interchange {k:14s} vehicles {r['vehicles']:4d}  found-and-matched {m['found_matched']:4d} of "
            f"{m['reference_vehicles']}  extra {m['extra']:4d}  {r['cpu']:6.0f} ms/frame CPU  {r['wall']:6.0f} wall"
        )
    return out


def _interchange_main(frames: int, cache: Path, out: Path | None) -> int:
    import json

    from bench.real.__main__ import _cached, _interchange
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    result = interchange(DEFAULT_DETECTOR_WEIGHTS, frames, cache, _cached)
    if result is None:
        return 2
    print("\n".join(_interchange({"interchange": result})))
    if out is not None:
        out.write_text(json.dumps(result, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.real.cost", description=__doc__.splitlines()[0])
    ap.add_argument("--sequence", default="M1303")
    ap.add_argument("--frames", type=int, help="frames timed (default: 150 of a sequence, all 177 of the interchange)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--dual",
        nargs="*",
        default=[],
        metavar="KEY=JSON",
        help="dual config overrides, e.g. detector.every_n_frames=1",
    )
    ap.add_argument(
        "--interchange",
        action="store_true",
        help="the 1080p nadir interchange instead, as `python -m bench.real` runs it (same cache): vehicles found, "
        "matched against the native-resolution run, and CPU ms/frame of each contender",
    )
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "airpatrol" / "bench_real")
    ap.add_argument("--out", type=Path, help="--interchange: also write the results (JSON) here")
    args = ap.parse_args(argv)
    if args.interchange:
        return _interchange_main(args.frames or 177, args.cache, args.out)
    args.frames = args.frames or 150
    seq = next((s for s in real_sequences() if s.name == args.sequence), None)
    if seq is None:
        print(f"sequence {args.sequence} not found (../shared/data/mot missing?)")
        return 2
    import json

    try:
        overrides = {k: json.loads(v) for k, v in (o.split("=", 1) for o in args.dual)}
    except ValueError:
        print(f"--dual {' '.join(args.dual)}: expected KEY=JSON pairs")
        return 2
    result = measure(seq, args.frames, args.repeats, dual_overrides=overrides)
    print(f"\n{seq.name}, first {args.frames} frames, {args.repeats} interleaved repeats (median):")
    for name, r in result.items():
        print(
            f"  {name:9s} {r['wall']:6.0f} ms/frame wall ({r['wall_ratio']:.2f}x plain)   {r['cpu']:6.0f} ms/frame CPU "
            f"({r['cpu_ratio']:.2f}x plain)" + (f"   stages {r['stages']}" if r.get("stages") else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
