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
import torch

from bench.real.cache import cached, weights_tag
from bench.real.contenders import pipeline_config
from bench.real.sequences import real_sequences
from tracking.evaluation.io import Boxes, read_mot
from tracking.evaluation.track_match import match, vehicles_found

# torch's threads before anything ran: Ultralytics' CPU set-up lowers them to cores - 1 for the whole process, so each
# contender is timed after setting them back (the pipeline keeps its count, vision/runtime.py; plain would not)
THREADS = torch.get_num_threads()


def plain_weights(weights: Path, overrides: dict | None = None) -> Path:
    """What plain Ultralytics is timed with: the same weights on the runtime the dual layer's detector runs them on
    (its cached ONNX or OpenVINO export on a CPU), so the ratio is the pipeline's cost, not the runtime's."""
    from vision.runtime import runtime_weights

    return runtime_weights(pipeline_config(False, overrides).detector, "cpu", weights)[0]


def measure(seq, frames: int, repeats: int, log=print, dual_overrides: dict | None = None) -> dict:
    """Median wall and CPU ms/frame of plain, baseline and dual (shipped defaults) on the first ``frames`` frames,
    interleaved ``repeats`` times, with the ratios to plain."""
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    rows: dict[str, list[tuple[float, float]]] = {"plain": [], "baseline": [], "dual": []}
    stages: dict = {}
    plain_model = plain_weights(DEFAULT_DETECTOR_WEIGHTS, dual_overrides)
    for r in range(repeats):
        torch.set_num_threads(THREADS)
        plain = _plain_tracks(seq.source, plain_model, frames, keep_rows=False)
        rows["plain"].append((plain["wall"], plain["cpu"]))
        for name, base in (("baseline", True), ("dual", False)):
            torch.set_num_threads(THREADS)
            wall, cpu, summary, _ = _timed_process(
                seq.source, pipeline_config(base, None if base else dual_overrides), frames
            )
            rows[name].append((1000 * wall / frames, 1000 * cpu / frames))
            stages[name] = summary["timings"]["ms_per_frame_by_stage"]
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


def _plain_tracks(source: Path, weights: Path, frames: int, keep_rows: bool = True) -> dict:
    """Plain ``model.track`` (ByteTrack, conf 0.1, imgsz 640) over the first ``frames`` frames, the model loaded and
    warmed up before timing: wall and CPU ms per frame; with ``keep_rows`` also its tracks as rows (frame, id, x1, y1,
    x2, y2) and how many last >= 1 s."""
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
            if keep_rows and r.boxes is not None and r.boxes.id is not None:
                ids, xyxy = r.boxes.id.cpu().numpy(), r.boxes.xyxy.cpu().numpy()
                rows += [(frame.index + 1, int(t), *map(float, b)) for t, b in zip(ids, xyxy)]
            n += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    out = {"wall": 1000 * wall / n, "cpu": 1000 * cpu / n, "frames": n, "fps": fps}
    return {"vehicles": vehicles_found(np.array(rows), fps), **out, "rows": rows} if keep_rows else out


def _timed_process(source: Path, config, frames: int) -> tuple[float, float, dict, Boxes]:
    """``airpatrol process`` (no video) on the first ``frames`` frames, the models loaded before timing: wall and CPU
    seconds, summary.json and the reported tracks."""
    import json

    from edge.runner import process_video
    from tracking.pipeline import Pipeline

    pipeline = Pipeline(config)  # models loaded before timing
    with tempfile.TemporaryDirectory() as tmp:
        w0, c0 = time.perf_counter(), time.process_time()
        out = process_video(
            source, Path(tmp) / "run", config, pipeline=pipeline, write_video=False, progress=False, max_frames=frames
        )
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        summary = json.loads((out.out_dir / "summary.json").read_text())
        pred, _ = read_mot(out.out_dir / "tracks_mot.txt")
    return wall, cpu, summary, pred


def _dual_tracks(source: Path, weights: Path, frames: int, overrides: dict) -> dict:
    config = pipeline_config(False, {**overrides, "detector.weights": str(weights)})
    wall, cpu, summary, pred = _timed_process(source, config, frames)
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


# The dual runs on the interchange, in the order they run: name in the results -> config overrides.
INTERCHANGE_DUAL: dict[str, dict] = {
    "dual": {},
    # the reference for what can be found: the detector at the frame's own resolution on every frame
    "native": {"detector.tiling": "on", "detector.every_n_frames": 1},
    # what the motion layer adds there: the tiny vehicles the detector at an affordable scale cannot see
    "dual_no_motion": {"motion.enabled": False},
    # before motion frames: while the motion layer carries the tracks, the detector ran on every frame
    "dual_detector_every_frame": {"motion.carried_detector_every_n_frames": 1},
    # as a live stream's feed reports them: tracks from the frame they are confirmed on, lost frames empty (the native
    # reference and the other rows report them from their first frame and fill lost frames, as a recorded run does)
    "dual_as_live": {"motion.report_from_first_frame": False, "tracker.fill_lost_gaps": False},
}


def interchange(weights: Path, frames: int, cache: Path, log=print) -> dict | None:
    """Vehicles found and CPU time per frame on the 1080p nadir interchange (no ground truth): plain ByteTrack at 640,
    the dual layer's defaults and variants, and the native-resolution reference; each run kept in ``cache``."""
    from vision.training.detector.training import shared_root

    source = shared_root() / INTERCHANGE
    if not source.is_file():
        log(f"{source}: missing, interchange cost skipped")
        return None
    key = {"seq": "interchange", "frames": frames, "weights": weights_tag(weights), "rows": True}
    plain_model = plain_weights(weights)
    torch.set_num_threads(THREADS)
    out: dict[str, Any] = {
        "source": f"../shared/{INTERCHANGE.as_posix()}",
        "plain": cached(
            cache,
            {**key, "contender": "plain", "model": plain_model.name},
            lambda: _plain_tracks(source, plain_model, frames),
            False,
        ),
    }
    for name, overrides in INTERCHANGE_DUAL.items():
        torch.set_num_threads(THREADS)
        out[name] = cached(
            cache,
            {**key, "contender": "dual", **({"overrides": overrides} if overrides else {})},
            lambda: _dual_tracks(source, weights, frames, overrides),  # called at once, inside this turn
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


def interchange_markdown(results: dict) -> list[str]:
    """The report's section on the interchange (``results["interchange"]`` from :func:`interchange`)."""
    ic = results.get("interchange")
    if not ic:
        return []
    lines = [
        "## Cost on the real 1080p nadir interchange (no ground truth)",
        "",
        f"`{ic['source']}`, {ic['frames']} frames 1920x1080, 25 fps. The native-resolution run (detector at the "
        "frame's own 1920 px on every frame: what the previous default did there) is the reference for what can be "
        "found. Tracks = tracks lasting >= 1 s; found and matched = the native run's vehicles (its tracks >= 1 s) "
        "that a track of the contender follows (box IoU >= 0.3 or centres within one vehicle length in >= 50 % of "
        "their common frames, >= 0.5 s; tracking/evaluation/track_match.py); extra = the contender's tracks >= 1 s that "
        "follow no native-run track (invented, or vehicles the native run missed: no ground truth tells which). "
        "CPU ms per frame over all threads, run one after another.",
        "",
        "| contender | tracks >= 1 s | found and matched | share of the native run's | extra tracks | CPU ms/frame "
        "| wall ms/frame | x plain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    p = ic["plain"]
    for label, k in (
        ("plain Ultralytics track, ByteTrack, imgsz 640, conf 0.1", "plain"),
        ("`airpatrol process` (dual, defaults)", "dual"),
        (
            "dual, detector on every frame while the motion layer carries (`motion.carried_detector_every_n_frames: "
            "1`: before motion frames)",
            "dual_detector_every_frame",
        ),
        ("dual without the motion layer (`motion.enabled: false`)", "dual_no_motion"),
        (
            "dual as live: tracks reported from the frame they are confirmed on, lost frames empty "
            "(`motion.report_from_first_frame: false`, `tracker.fill_lost_gaps: false`)",
            "dual_as_live",
        ),
        ("reference: dual at native resolution, detector every frame", "native"),
    ):
        r = ic.get(k)
        if r is None:
            continue
        m = r.get("matched") or {}
        found = m.get("found_matched", "-")
        share = f"{100 * found / max(m['reference_vehicles'], 1):.0f} %" if m else "-"
        lines.append(
            f"| {label} | {r['vehicles']} | {found} | {share} | {m.get('extra', '-')} | {r['cpu']:.0f} | "
            f"{r['wall']:.0f} | {r['cpu'] / p['cpu']:.2f} |"
        )
    plan = ic["dual"].get("detector_scales")
    if plan:
        lines += [
            "",
            "Detector scales the dual run used: "
            + "; ".join(
                f"frames {q['frames'][0]}-{q['frames'][1]} rows {q['rows'][0]}-{q['rows'][1]}: x{q['scale']:.2f}"
                for q in plan[:12]
            )
            + ".",
        ]
    return [*lines, ""]


def _interchange_main(frames: int, cache: Path, out: Path | None) -> int:
    import json

    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    result = interchange(DEFAULT_DETECTOR_WEIGHTS, frames, cache)
    if result is None:
        return 2
    print("\n".join(interchange_markdown({"interchange": result})))
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
