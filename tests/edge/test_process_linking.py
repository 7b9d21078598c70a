"""`airpatrol process` links the pieces of a vehicle's path over the whole flight (``linking``): a car that stops and
that the detector loses for longer than the tracker waits is one track in every output, and on every frame."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import pytest

from edge.runner import process_video
from tests.tracking.test_pipeline_lost_gaps import MissingDetector
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig, StandingHoldConfig
from tracking.linking import LinkingConfig
from tracking.pipeline import Pipeline
from vision.config import DetectorConfig, MotionConfig
from vision.detection import VehicleDetector
from vision.source import open_source

FRAMES = 150
STOP = (40, 110)  # the car stands at a red light on these frames ...
MISSED = set(range(50, 100))  # ... and the detector does not see it on these (2 s: longer than track_buffer)


def _vehicle_x(i: int) -> float:
    return 100 + 4.0 * (min(i, STOP[0]) + max(0, i - STOP[1]))


def _config(link: bool) -> PipelineConfig:
    return PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),
        detector=DetectorConfig(every_n_frames=1),
        calibration=CalibrationConfig(metres_per_pixel=0.2),
        linking=LinkingConfig(enabled=link),
        # what is tested is the whole-flight linking's fill: the hold would carry the car by its appearance instead
        # (tests/tracking/test_standing_hold.py)
        standing_hold=StandingHoldConfig(enabled=False),
    )


def _video(path: Path, frames: int = FRAMES, fps: float = FPS, vehicle_x=_vehicle_x) -> Path:
    """A 19 x 10 px white car on textured ground, at ``vehicle_x(frame)``."""
    ground = _ground()
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), fps, (W, H))
    for i in range(frames):
        img = ground.copy()
        x = int(round(vehicle_x(i)))
        cv2.rectangle(img, (x, 250), (x + 19, 259), (255, 255, 255), -1)
        writer.write(img)
    writer.release()
    return path


def _process(video: Path, out: Path, link: bool):
    config = _config(link)
    return process_video(
        video,
        out,
        config,
        pipeline=Pipeline(config, detector=MissingDetector(MISSED)),
        write_video=link,
        progress=False,
    )


def test_a_car_lost_while_it_waits_is_one_track_in_every_output(tmp_path: Path):
    video = _video(tmp_path / "clip.avi")
    out = _process(video, tmp_path / "run", link=True)
    with open(out.out_dir / "tracks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len({r["track_id"] for r in rows}) == 1
    frames = sorted(int(r["frame"]) for r in rows)
    assert frames == list(range(frames[0], FRAMES + 1)) and frames[0] <= 3  # every frame from confirmation on
    waiting = [r for r in rows if int(r["frame"]) - 1 in MISSED]
    assert all(r["speed_flag"] == "interpolated" and r["moving"] == "0" for r in waiting)
    assert all(abs((float(r["x1"]) + float(r["x2"])) / 2 - (_vehicle_x(STOP[0]) + 9.5)) < 3 for r in waiting)
    mot_ids = {line.split(",")[1] for line in (out.out_dir / "tracks_mot.txt").read_text().splitlines()}
    assert mot_ids == {rows[0]["track_id"]}
    with open(out.out_dir / "tracks_summary.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 1
    summary = json.loads((out.out_dir / "summary.json").read_text())
    assert summary["linking"]["links"] == 1 and summary["linking"]["filled_boxes"] >= len(MISSED)
    with open_source(out.out_dir / "annotated.mp4") as annotated:  # the video is written from the second decode
        assert sum(1 for _ in annotated) == FRAMES


def test_without_linking_the_same_car_is_two_tracks(tmp_path: Path):
    out = _process(_video(tmp_path / "clip.avi"), tmp_path / "run", link=False)
    with open(out.out_dir / "tracks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len({r["track_id"] for r in rows}) == 2
    assert not any(int(r["frame"]) - 1 in MISSED for r in rows)
    assert json.loads((out.out_dir / "summary.json").read_text())["linking"] is None


def test_process_runs_the_detector_with_the_recorded_budget(tmp_path: Path):
    """``airpatrol process`` is a recording: its detector plans with ``recorded_max_input_pixels``, in ONNX Runtime's
    pixels, times its runtime's speed against ONNX Runtime (a live stream's pipeline is reset without ``recorded`` and
    keeps the per-frame budget)."""
    config = _config(link=True)
    pipe = Pipeline(config)
    process_video(
        _video(tmp_path / "clip.avi"),
        tmp_path / "run",
        config,
        pipeline=pipe,
        write_video=False,
        progress=False,
        max_frames=3,
    )
    detector = pipe.detector
    assert isinstance(detector, VehicleDetector)
    assert detector.recorded
    assert detector.budget_pixels == pytest.approx(config.detector.recorded_max_input_pixels * detector.runtime_pixels)
    assert detector.budget_pixels > config.detector.max_input_pixels
