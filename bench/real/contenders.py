"""The three contenders, each run over the first ``seq.run_frames`` frames of a sequence.

- ``plain``: what a user of Ultralytics runs: ``YOLO(weights).track(frame, tracker="bytetrack.yaml", persist=True,
  conf=c, imgsz=640)`` with the same weights, frame by frame.
- ``baseline`` / ``dual``: ``airpatrol process`` (``edge.runner.process_video``, the same code path as the CLI) with
  ``--baseline`` or the default dual layer, and optional config overrides.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.real.scoring import boxes_from_rows
from bench.real.sequences import Sequence
from tracking.evaluation.io import Boxes, read_mot


@dataclass
class RunResult:
    pred: Boxes
    ms_per_frame: float  # whole loop: decode + everything the contender does per frame
    frames: int
    stages: dict | None = None


def run_plain(seq: Sequence, weights: Path, conf: float, imgsz: int = 640) -> RunResult:
    from ultralytics import YOLO

    from vision.source import open_source

    model = YOLO(str(weights), task="detect")
    rows = []
    n = 0
    t0 = time.perf_counter()
    with open_source(seq.source, max_frames=seq.run_frames) as src:
        for frame in src:
            r = list(
                model.track(frame.image, tracker="bytetrack.yaml", persist=True, conf=conf, imgsz=imgsz, verbose=False)
            )[0]
            b = r.boxes
            if b is not None and b.id is not None:
                # a torch model's boxes are tensors (Boxes also holds NumPy arrays, for other backends)
                for (x1, y1, x2, y2), tid in zip(b.xyxy.cpu().numpy(), b.id.cpu().numpy()):  # type: ignore[union-attr]
                    rows.append((frame.index + 1, int(tid), x1, y1, x2 - x1, y2 - y1))
            n += 1
    ms = 1000 * (time.perf_counter() - t0) / max(n, 1)
    return RunResult(boxes_from_rows(rows), ms, n)


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
    return RunResult(pred, float(t["ms_per_frame"]), int(summary["counts"]["frames"]), t.get("ms_per_frame_by_stage"))
