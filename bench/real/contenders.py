"""The three contenders, each run over the first ``seq.run_frames`` frames of a sequence.

- ``plain``: what a user of Ultralytics runs: ``YOLO(weights).track(frame, tracker=T, persist=True, conf=c,
  imgsz=640)`` with the same weights, frame by frame, for both of Ultralytics' trackers (``bytetrack.yaml``, and
  ``botsort.yaml``: BoT-SORT with its camera-motion compensation, Ultralytics' default) and every conf of a sweep.
  ``run_plain_sweep`` does all of them in one pass over the video: the detector runs once per frame at the lowest
  conf and each (tracker, conf) gets the boxes above its conf, exactly what ``track`` feeds its tracker (NMS keeps the
  same boxes above a conf whatever lower conf it ran at); ``run_plain`` is ``model.track`` itself, which the tests use
  to check that the two agree.
- ``baseline`` / ``dual``: ``airpatrol process`` (``edge.runner.process_video``, the same code path as the CLI) with
  ``--baseline`` or the default dual layer, and optional config overrides.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.real.sequences import Sequence
from tracking.evaluation.io import Boxes, read_mot
from tracking.evaluation.scoring import boxes_from_rows


@dataclass
class RunResult:
    pred: Boxes
    ms_per_frame: float  # whole loop: decode + everything the contender does per frame
    frames: int
    stages: dict | None = None
    scales: list | None = None  # the dual layer's detector scale plan (summary.json -> detector_scales)


def run_plain(
    seq: Sequence,
    weights: Path,
    conf: float,
    imgsz: int = 640,
    tracker: str = "bytetrack",
    max_frames: int | None = None,
) -> RunResult:
    from ultralytics import YOLO

    from vision.source import open_source

    model = YOLO(str(weights), task="detect")
    rows = []
    n = 0
    t0 = time.perf_counter()
    with open_source(seq.source, max_frames=max_frames or seq.run_frames) as src:
        for frame in src:
            r = list(
                model.track(frame.image, tracker=f"{tracker}.yaml", persist=True, conf=conf, imgsz=imgsz, verbose=False)
            )[0]
            b = r.boxes
            if b is not None and b.id is not None:
                # a torch model's boxes are tensors (Boxes also holds NumPy arrays, for other backends)
                for (x1, y1, x2, y2), tid in zip(b.xyxy.cpu().numpy(), b.id.cpu().numpy()):  # type: ignore[union-attr]
                    rows.append((frame.index + 1, int(tid), x1, y1, x2 - x1, y2 - y1))
            n += 1
    ms = 1000 * (time.perf_counter() - t0) / max(n, 1)
    return RunResult(boxes_from_rows(rows), ms, n)


PLAIN_TRACKERS = ("bytetrack", "botsort")


def run_plain_sweep(
    seq: Sequence, weights: Path, confs: list[float], trackers=PLAIN_TRACKERS, imgsz: int = 640
) -> dict[tuple[str, float], RunResult]:
    """Ultralytics ``track`` with every (tracker, conf) in one pass; ms/frame = decode + detection + that tracker."""
    from ultralytics import YOLO
    from ultralytics.trackers.track import TRACKER_MAP
    from ultralytics.utils import YAML, IterableSimpleNamespace
    from ultralytics.utils.checks import check_yaml

    from vision.source import open_source

    model = YOLO(str(weights), task="detect")
    lowest = min(confs)
    runs: dict[tuple[str, float], tuple[Any, list, list[float]]] = {}
    for name in trackers:
        cfg = IterableSimpleNamespace(**YAML.load(check_yaml(f"{name}.yaml")))
        for conf in confs:
            runs[(name, conf)] = (TRACKER_MAP[cfg.tracker_type](args=cfg), [], [0.0])
    n, shared_s = 0, 0.0
    t0 = time.perf_counter()
    with open_source(seq.source, max_frames=seq.run_frames) as src:
        for frame in src:
            # what `track` runs: predict in track mode (batch 1), then the tracker on the boxes
            result: Any = list(model.predict(frame.image, conf=lowest, imgsz=imgsz, verbose=False, batch=1))[0]
            t1 = time.perf_counter()
            shared_s += t1 - t0
            h, w = frame.image.shape[:2]
            scores = result.boxes.conf.cpu().numpy() if result.boxes is not None else np.zeros(0)
            for (_name, conf), (tracker, rows, spent) in runs.items():
                t2 = time.perf_counter()
                det = result[scores > conf] if conf > lowest else result  # NMS keeps boxes scoring above conf
                tracks = tracker.update(det.boxes.cpu().numpy(), result.orig_img)
                # `track` writes the tracks into its Results, which clips them to the frame
                tracks[:, [0, 2]] = tracks[:, [0, 2]].clip(0, w)
                tracks[:, [1, 3]] = tracks[:, [1, 3]].clip(0, h)
                for x1, y1, x2, y2, tid in tracks[:, :5]:
                    rows.append((frame.index + 1, int(tid), x1, y1, x2 - x1, y2 - y1))
                spent[0] += time.perf_counter() - t2
            n += 1
            t0 = time.perf_counter()
    return {
        key: RunResult(boxes_from_rows(rows), 1000 * (shared_s + spent[0]) / max(n, 1), n)
        for key, (_, rows, spent) in runs.items()
    }


def pipeline_config(baseline: bool, overrides: dict | None = None):
    from tracking.config import PipelineConfig

    data: dict[str, Any] = {"baseline": baseline}
    for key, value in (overrides or {}).items():  # "detector.conf": 0.1 -> {"detector": {"conf": 0.1}}
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return PipelineConfig.model_validate(data)


def run_airpatrol(
    seq: Sequence, baseline: bool, overrides: dict | None = None, keep_dir: Path | None = None
) -> RunResult:
    """``airpatrol process SEQ [--baseline] --no-video`` with ``overrides`` (dotted config keys)."""
    import json

    from edge.runner import process_video

    config = pipeline_config(baseline, overrides)
    with tempfile.TemporaryDirectory(prefix="airpatrol-real-") as tmp:
        out = keep_dir or Path(tmp) / "run"
        outcome = process_video(seq.source, out, config, write_video=False, progress=False, max_frames=seq.run_frames)
        pred, _ = read_mot(outcome.out_dir / "tracks_mot.txt")
        summary = json.loads((outcome.out_dir / "summary.json").read_text())
    t = summary["timings"]
    return RunResult(
        pred,
        float(t["ms_per_frame"]),
        int(summary["counts"]["frames"]),
        t.get("ms_per_frame_by_stage"),
        summary.get("detector_scales"),
    )
