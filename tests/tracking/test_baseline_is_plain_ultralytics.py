"""`--baseline` is plain YOLOv8 + ByteTrack as Ultralytics' `track` runs it: same boxes, same ids, frame by frame."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tracking.config import DetectorConfig, PipelineConfig
from tracking.evaluation.mot import iou_xywh
from tracking.pipeline import Pipeline
from vision.detection import DEFAULT_DETECTOR_WEIGHTS
from vision.source import open_source

SEQ = Path(os.environ.get("AIRPATROL_SHARED", Path(__file__).resolve().parents[3] / "shared")) / "data/mot/uavdt_M1303"
pytestmark = pytest.mark.skipif(not SEQ.is_dir(), reason=f"{SEQ} not found (needs ../shared)")


def _xywh(b) -> np.ndarray:
    b = np.asarray(b, float).reshape(-1, 4)
    return np.column_stack([b[:, :2], b[:, 2:] - b[:, :2]])


def test_baseline_reports_what_ultralytics_track_reports():
    from ultralytics import YOLO

    model = YOLO(str(DEFAULT_DETECTOR_WEIGHTS), task="detect")
    pipeline = Pipeline(PipelineConfig(baseline=True, device="cpu", detector=DetectorConfig(runtime="torch")))
    agree = total = 0
    with open_source(SEQ, max_frames=20) as src:
        pipeline.reset(src.info.width, src.info.height, src.info.fps)
        for frame in src:
            ours = pipeline.step(frame).tracks
            r = list(
                model.track(frame.image, tracker="bytetrack.yaml", persist=True, conf=0.1, imgsz=640, verbose=False)
            )[0]
            # a torch model's boxes are tensors (Boxes also holds NumPy arrays, for other backends)
            theirs = r.boxes.xyxy.cpu().numpy() if r.boxes is not None and r.boxes.id is not None else np.zeros((0, 4))  # type: ignore[union-attr]
            total += max(len(ours), len(theirs))
            if len(ours) and len(theirs):
                iou = iou_xywh(_xywh([t.xyxy for t in ours]), _xywh(theirs))
                agree += int((iou.max(1) > 0.95).sum())
    assert total > 100  # M1303 has ~25 vehicles per frame
    assert agree >= 0.95 * total
