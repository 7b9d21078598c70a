"""`airpatrol process` on a flight filmed at a high frame rate analyses every n-th frame (``analysis_rate``,
tracking/frame_rate.py) and reports the car on every frame all the same: the frames between carry its track,
interpolated where it drove, in every output; batch runs in segments skip and fill the same frames."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from edge.batch.segments import between_frames
from edge.runner import process_video
from tests.edge.test_process_linking import _video as linking_video
from tests.tracking.test_pipeline_lost_gaps import MissingDetector
from tests.tracking.test_pipeline_motion_frames import H, W
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig, StandingHoldConfig
from tracking.frame_rate import AnalysisRateConfig
from tracking.types import FrameResult
from vision.config import DetectorConfig, MotionConfig
from vision.source import SourceInfo
from vision.types import Frame

FPS, FRAMES = 30.0, 90


def _vehicle_x(i: int) -> float:
    return 100 + 3.0 * i  # 3 px a frame: 18 km/h at 0.2 m/px


def _video(path: Path) -> Path:
    return linking_video(path, FRAMES, FPS, _vehicle_x)


def _config(rate: AnalysisRateConfig) -> PipelineConfig:
    return PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),
        detector=DetectorConfig(every_n_frames=1),
        calibration=CalibrationConfig(metres_per_pixel=0.2),
        standing_hold=StandingHoldConfig(enabled=False),
        analysis_rate=rate,
    )


def _run(tmp_path: Path, rate: AnalysisRateConfig, name: str):
    from tracking.pipeline import Pipeline

    config = _config(rate)
    detector = MissingDetector(set())
    out = process_video(
        _video(tmp_path / "clip.avi"),
        tmp_path / name,
        config,
        pipeline=Pipeline(config, detector=detector),
        write_video=False,
        progress=False,
    )
    with open(out.out_dir / "tracks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return json.loads((out.out_dir / "summary.json").read_text()), rows, detector.frame


def test_a_30_fps_flight_is_analysed_at_15_and_reported_on_every_frame(tmp_path: Path):
    # the clip is 960 x 540: it would keep every frame (full_rate_up_to_px); the test lowers that bar
    summary, rows, detected = _run(tmp_path, AnalysisRateConfig(max_fps=15.0, full_rate_up_to_px=0), "half")
    assert summary["analysis_rate"] == {"every_n_frames": 2, "fps": 15.0, "frames_interpolated": FRAMES // 2}
    assert summary["counts"]["frames"] == FRAMES // 2 and detected == FRAMES // 2  # the pipeline saw every 2nd frame
    assert summary["timings"]["x_duration"] > 0
    assert len({r["track_id"] for r in rows}) == 1
    frames = sorted(int(r["frame"]) for r in rows)
    assert frames == list(range(frames[0], FRAMES)) and frames[0] <= 5  # every frame to the last analysed one
    for r in rows:
        i = int(r["frame"]) - 1  # tracks.csv counts frames from 1
        assert abs((float(r["x1"]) + float(r["x2"])) / 2 - (_vehicle_x(i) + 9.5)) < 3
        assert (r["speed_flag"] == "interpolated") == (i % 2 == 1)  # the frames between were not measured
    speeds = [float(r["speed_kmh"]) for r in rows if r["speed_kmh"] and int(r["frame"]) > 30]
    assert speeds and abs(np.median(speeds) - 3.0 * FPS * 0.2 * 3.6) < 2  # the speed is the car's: 64.8 km/h


def test_every_frame_unless_the_rate_is_above_max_fps(tmp_path: Path):
    summary, rows, detected = _run(tmp_path, AnalysisRateConfig(max_fps=None, full_rate_up_to_px=0), "full")
    assert summary["analysis_rate"]["every_n_frames"] == 1 and detected == FRAMES
    assert not any(r["speed_flag"] == "interpolated" for r in rows)


def test_batch_segments_skip_and_fill_the_same_frames():
    config = _config(AnalysisRateConfig(full_rate_up_to_px=0))
    info = SourceInfo("clip.avi", W, H, FPS, 9, 9 / FPS, "mjpeg")
    assert config.recorded_step(info.fps, info.width, info.height) == 2
    plain = config.model_copy(update={"baseline": True})
    assert plain.recorded_step(info.fps, info.width, info.height) == 1  # plain: every frame
    analysed = [FrameResult(Frame(i, i / FPS, np.zeros((0, 0, 3), np.uint8)), []) for i in (0, 2, 4, 6, 8)]
    assert [f.index for f in between_frames(analysed, info, 2)] == [1, 3, 5, 7]
