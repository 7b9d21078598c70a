"""What a live stream's stored run loses against the same video processed as a recording, with and without pacing.

For one real UAVDT sequence with ground truth (``../shared/data/mot``): ``airpatrol process`` on the video (the
recorded run), then the same video streamed at its real rate (``ffmpeg -re -c copy``, MPEG-TS over TCP on
127.0.0.1, as ``tests/edge/service/live_sources.py`` does) to a service stream worker (the PyAV pull reader, the
queue, the same pipeline, ``TrackStarts`` and the database sink on SQLite), once per mode (``--parallel``: both at
once, two streams and workers, so both see the same CPU load): ``paced``
(``service.live_pacing``: every k-th frame, evenly, k from the measured load) and ``drop-oldest`` (pacing off: what
the full queue drops). The stored run is what the worker writes to its database sink (every row, boxes included).

Printed per run: frames processed, processing rate, MOTA / IDF1 (motmetrics, IoU 0.5, UAVDT ignore regions) on the
frames that run processed (the recorded run also on all frames), ground-truth vehicles found (tracks >= 1 s that a
track follows, ``tracking.evaluation.track_match``) and the recorded run's vehicles the live run found (the
recorded run as the reference, on the live run's frames), and the median difference of the found vehicles'
median speeds (live - recorded).

    python bench/live_pacing.py --sequence M0703-nadir [--rounds 2] [--parallel] [--work DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.real.sequences import Sequence, real_sequences  # noqa: E402
from bench.serving import ffmpeg_live, free_port  # noqa: E402
from tracking.evaluation.io import Boxes, read_mot  # noqa: E402
from tracking.evaluation.mot import drop_ignored, mot_metrics  # noqa: E402
from tracking.evaluation.track_match import follows, match, tracks_by_id  # noqa: E402


def video_of(seq: Sequence, folder: Path) -> Path:
    """The sequence as a video file (M1303 is a JPEG folder: encoded once, H.264 CRF 18, both runs use it)."""
    if seq.source.is_file():
        return seq.source
    out = folder / f"{seq.name}.mp4"
    images = seq.source / "img" if (seq.source / "img").is_dir() else seq.source
    subprocess.run(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-framerate",
            "30",
            "-i",
            str(images / "img%06d.jpg"),
        ]
        + ["-c:v", "libx264", "-crf", "18", "-pix_fmt", "yuv420p", "-g", "30", str(out)],
        check=True,
    )
    return out


def recorded_run(video: Path, folder: Path, frames: int) -> dict:
    out = folder / "recorded"
    t0 = time.perf_counter()
    if not (out / "summary.json").is_file():  # --work: a recorded run of an earlier call is used again
        done = subprocess.run(
            ["airpatrol", "process", str(video), "--out", str(out), "--device", "cpu", "--no-video"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode:
            sys.exit(f"live_pacing: airpatrol process failed: {done.stderr.strip().splitlines()[-1:]}")
    wall = time.perf_counter() - t0
    pred, _ = read_mot(out / "tracks_mot.txt")
    pred = pred.subset(pred.frame <= frames)
    speeds = _speeds_csv(out / "tracks.csv", frames)
    summary = json.loads((out / "summary.json").read_text())
    return {
        "pred": pred,
        "speeds": speeds,
        "frames": list(range(1, frames + 1)),
        "wall_s": wall,
        "summary_fps": summary.get("timings", {}).get("fps"),
    }


def _speeds_csv(path: Path, frames: int) -> dict[tuple[int, int], float]:
    import csv

    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            frame = int(row["frame"]) + 1
            if frame <= frames and row["speed_kmh"]:
                out[(frame, int(row["track_id"]))] = float(row["speed_kmh"])
    return out


_SCHEMA_LOCK = threading.Lock()
_STORED: dict[str, list] = {}  # worker thread name -> rows its database sink got


def install_recording_sink() -> None:
    from edge.service import workers

    base = workers.LiveDatabaseSink
    if getattr(base, "records", False):
        return

    class RecordingSink(base):  # type: ignore[valid-type,misc]
        records = True

        def write(self, result):
            rows = _STORED.setdefault(threading.current_thread().name, [])
            for tr in result.tracks:
                x1, y1, x2, y2 = (float(v) for v in tr.xyxy)
                rows.append((result.frame.index + 1, tr.track_id, x1, y1, x2, y2, tr.speed_kmh))
            super().write(result)

    workers.LiveDatabaseSink = RecordingSink  # type: ignore[misc]


def live_run(video: Path, folder: Path, frames: int, paced: bool, stream_id: int = 1) -> dict:
    """The video streamed at its real rate to an in-process stream worker; the rows its database sink got."""
    from edge.config import load_settings
    from edge.service import workers
    from edge.service.ingest import check_source
    from edge.service.metrics import ServiceMetrics
    from tracking.pipeline import Pipeline

    db = folder / f"live-{stream_id}.db"
    db.unlink(missing_ok=True)
    settings = load_settings(None, {"data_dir": str(folder / "data"), "database_url": f"sqlite:///{db}"})
    from db.cli import ensure_schema
    from db.engine import session_factory

    with _SCHEMA_LOCK:  # Alembic's migration run is not thread-safe (--parallel)
        ensure_schema(settings.database_url)
    sessions = session_factory(settings.database_url)
    cfg = settings.service.model_copy(update={"live_pacing": paced})
    install_recording_sink()
    stored = _STORED.setdefault(f"stream-{stream_id}", [])
    stored.clear()
    processed: list[int] = []
    processed_at: list[float] = []
    keep: list[float] = []

    pipeline = Pipeline(settings.pipeline)
    warm_up(pipeline, video)  # models loaded and run once before the stream starts, as `serve` preloads them

    def step(pipe, frame):
        result = pipe.step(frame)
        processed.append(frame.index + 1)
        processed_at.append(time.perf_counter())
        return result

    port = free_port()
    ffmpeg = ffmpeg_live(video, f"tcp://127.0.0.1:{port}?listen=1", loop=False, quiet=False)
    time.sleep(0.5)
    spec = workers.StreamSpec(
        stream_id, "bench", "pull", check_source(f"tcp://127.0.0.1:{port}", None), None, None, None
    )
    worker = workers.StreamWorker(
        spec,
        workers.WorkerDeps(
            config=cfg, make_pipeline=lambda: pipeline, sessions=sessions, metrics=ServiceMetrics(), step=step
        ),
    )
    stop = threading.Event()

    def watch_k():
        while not stop.wait(0.2):
            keep.append(worker.stats()["keep_every"])

    threading.Thread(target=watch_k, daemon=True).start()
    worker.start()
    try:
        ffmpeg.wait(timeout=frames / 30 + 60)
        last = -1
        while worker.frames_processed != last or len(worker.queue):  # what arrived is processed
            last = worker.frames_processed
            time.sleep(1.5)
    finally:
        ffmpeg.kill()
        worker.stop(timeout=120)
        stop.set()
    stats = worker.stats()
    rows = np.array([r[:6] for r in stored], np.float64).reshape(-1, 6)
    rows = rows[rows[:, 0] <= frames]
    pred = Boxes(
        rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), np.c_[rows[:, 2:4], rows[:, 4:6] - rows[:, 2:4]]
    )
    speeds = {(int(f), int(i)): float(s) for f, i, *_, s in stored if s is not None and f <= frames}
    span = processed_at[-1] - processed_at[0] if len(processed_at) > 1 else float("nan")
    gaps = np.diff(sorted(processed))
    return {
        "pred": pred,
        "speeds": speeds,
        "frames": sorted(f for f in set(processed) if f <= frames),
        "received": stats["received"],
        "processed": stats["processed"],
        "shed": stats["shed"],
        "queue_dropped": stats["dropped"] - stats["shed"],
        "thinned": stats["thinned"],  # of those, dropped to thin the full queue evenly (edge.service.ingest.FrameQueue)
        "fps": (len(processed_at) - 1) / span,
        "keep_every": {"median": float(np.median(keep)) if keep else None, "max": max(keep, default=None)},
        "gap_frames": {int(g): int((gaps == g).sum()) for g in sorted(set(gaps.tolist()))},
        # the stream's start: its first processed frames and when (s after the first)
        "start": [(f, round(t - processed_at[0], 2)) for f, t in zip(processed[:12], processed_at[:12])],
        "run_state": worker.state,
        "detector_frames": pipeline.detector_frames,  # of the processed frames, those the detector ran on
        "ms_per_frame_by_stage": pipeline.stats().get("ms_per_frame_by_stage"),
    }


def warm_up(pipeline, video: Path, frames: int = 5) -> None:
    import cv2

    from vision.types import Frame

    cap = cv2.VideoCapture(str(video))
    for i in range(frames):
        ok, image = cap.read()
        if not ok:
            break
        if i == 0:
            pipeline.reset(image.shape[1], image.shape[0], 30.0)
        pipeline.step(Frame(i, i / 30, image))
    cap.release()


def score(run: dict, ref: dict | None, seq: Sequence, fps: float) -> dict:
    gt_all, ignore = seq.ground_truth()
    frames = np.array(run["frames"])
    keep_gt = np.isin(gt_all.frame, frames)
    gt, _ = drop_ignored(gt_all.subset(keep_gt), ignore)
    pred, _ = drop_ignored(run["pred"].subset(np.isin(run["pred"].frame, frames)), ignore)
    m, _ = mot_metrics(gt, pred, 0.5)
    # frame numbers count at the stream's rate (a track lasts 1 s when they span fps); the frames processed come at
    # ``rate`` per second (how many common frames make half a second)
    rate = fps * len(frames) / max(seq.run_frames, 1)

    def rows(b: Boxes) -> np.ndarray:
        return np.c_[b.frame, b.ids, b.xywh[:, :2], b.xywh[:, :2] + b.xywh[:, 2:]]

    found_gt = match(rows(pred), rows(gt), fps, processed_fps=rate)
    out = {
        "frames": len(frames),
        "mota": round(100 * m["mota"], 1),
        "idf1": round(100 * m["idf1"], 1),
        "gt_vehicles": found_gt["reference_vehicles"],
        "gt_vehicles_found": found_gt["found_matched"],
        "tracks_1s": found_gt["tracks"],
    }
    if ref is not None:
        ref_pred = ref["pred"].subset(np.isin(ref["pred"].frame, frames))
        vs = match(
            rows(run["pred"].subset(np.isin(run["pred"].frame, frames))), rows(ref_pred), fps, processed_fps=rate
        )
        out["recorded_vehicles"] = vs["reference_vehicles"]
        out["recorded_vehicles_found"] = vs["found_matched"]
        out["found_share"] = round(vs["found_matched"] / max(vs["reference_vehicles"], 1), 3)
        out["speed_diff_kmh"] = speed_difference(run, ref_pred, ref["speeds"], rows, rate)
    return out


def speed_difference(run: dict, ref_pred: Boxes, ref_speeds: dict, rows, rate: float) -> dict:
    """Median |live - recorded| of the median speeds of vehicles the live run found (pairs of following tracks)."""
    live, rec = tracks_by_id(rows(run["pred"])), tracks_by_id(rows(ref_pred))
    min_close = max(2, round(0.5 * rate))
    diffs = []
    for lid, lt in live.items():
        ls = [run["speeds"][(f, lid)] for f in lt if (f, lid) in run["speeds"]]
        if len(ls) < 3:
            continue
        for rid, rt in rec.items():
            rs = [ref_speeds[(f, rid)] for f in rt if (f, rid) in ref_speeds]
            if len(rs) >= 3 and follows(lt, rt, min_close, 0.5, 0.3):
                diffs.append(float(np.median(ls) - np.median(rs)))
    if not diffs:
        return {"pairs": 0}
    d = np.array(diffs)
    return {
        "pairs": len(d),
        "median_abs": round(float(np.median(np.abs(d))), 2),
        "median": round(float(np.median(d)), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequence", default="M0703-nadir", help="M1303, M1003-night or M0703-nadir")
    ap.add_argument("--modes", nargs="+", default=["paced", "drop-oldest"], choices=["paced", "drop-oldest"])
    ap.add_argument("--rounds", type=int, default=1, help="live runs per mode, alternating")
    ap.add_argument("--parallel", action="store_true", help="stream to both modes at the same time (same CPU load)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--work", type=Path, help="keep the runs in this folder (its recorded run is used again)")
    args = ap.parse_args()
    seqs = {s.name: s for s in real_sequences()}
    if args.sequence not in seqs:
        sys.exit(f"live_pacing: sequence {args.sequence} not found under ../shared/data/mot ({', '.join(seqs)})")
    seq = seqs[args.sequence]
    fps, frames = 30.0, seq.run_frames
    report: dict = {"sequence": seq.name, "scored_frames": list(seq.frames)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.work or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = video_of(seq, folder)
        rec = recorded_run(video, folder, frames)
        report["recorded"] = {
            "all_frames": score(rec, None, seq, fps),
            "wall_s": round(rec["wall_s"], 1),
            "fps": rec["summary_fps"],
        }
        print(json.dumps({"recorded": report["recorded"]}), flush=True)
        for r in range(1, args.rounds + 1):
            runs: dict[str, dict] = {}

            def one(mode: str, stream_id: int) -> None:
                runs[mode] = live_run(video, folder, frames, paced=mode == "paced", stream_id=stream_id)

            if args.parallel:  # both modes at once, each its own stream and worker: the same load on both
                threads = [threading.Thread(target=one, args=(m, i + 1)) for i, m in enumerate(args.modes)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            else:
                for i, m in enumerate(args.modes):
                    one(m, i + 1)
            for mode in args.modes:
                live = runs[mode]
                key = f"{mode} #{r}"
                report[key] = {
                    **{k: v for k, v in live.items() if k not in ("pred", "speeds", "frames")},
                    "live": score(live, rec, seq, fps),
                    "recorded_same_frames": score({**rec, "frames": live["frames"]}, None, seq, fps),
                }
                print(json.dumps({key: report[key]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
