"""A recorded run fills the frames a moving track was lost on (``tracker.fill_lost_gaps``): a vehicle the detector
misses for a few frames is reported on them too, at boxes between where it was seen, with no speed; live, with the
option off, and for a standing vehicle, those frames stay empty."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig, TrackerConfig
from tracking.pipeline import Pipeline
from tracking.track_starts import from_first_frame
from tracking.types import INTERPOLATED
from vision.config import DetectorConfig, MotionConfig
from vision.types import Frame

MISSED = set(range(20, 26))  # frames the detector does not see the vehicle on


class MissingDetector(BrightBoxDetector):
    """Finds the bright box on every frame but the ``missed`` ones (0-based)."""

    def __init__(self, missed: set[int] = MISSED):
        super().__init__()
        self.frame, self.missed = 0, missed

    def detect(self, image, road_mask=None, tiling=None):
        dets = super().detect(image, road_mask, tiling)
        self.frame += 1
        return dets[np.zeros(len(dets), bool)] if self.frame - 1 in self.missed else dets


def _vehicle_x(i: int) -> float:
    return 100 + 4.0 * i


def _config(fill: bool) -> PipelineConfig:
    return PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),  # nothing but the detector finds the vehicle
        detector=DetectorConfig(every_n_frames=1),
        tracker=TrackerConfig(fill_lost_gaps=fill),
        # a known scale: the vehicle's speed (~72 km/h) says it moves; only moving tracks' gaps are filled
        calibration=CalibrationConfig(metres_per_pixel=0.2),
    )


def _image(ground: np.ndarray, i: int) -> np.ndarray:
    img = ground.copy()
    x = int(round(_vehicle_x(i)))
    cv2.rectangle(img, (x, 250), (x + 19, 259), (255, 255, 255), -1)
    return img


def _run(fill: bool, recorded: bool) -> list[list]:
    p = Pipeline(_config(fill), detector=MissingDetector())
    p.reset(W, H, FPS)
    ground = _ground()
    results = (p.step(Frame(i, i / FPS, _image(ground, i))) for i in range(45))
    return [r.tracks for r in from_first_frame(results, p.report_lookback_frames() if recorded else 0)]


def test_a_vehicle_the_detector_misses_for_a_few_frames_is_filled_in_a_recorded_run():
    tracks = _run(fill=True, recorded=True)
    ids = {tr.track_id for frame in tracks for tr in frame}
    assert len(ids) == 1  # one vehicle, one track
    for i in range(3, 45):  # from the tracker's confirmation on, every frame
        assert len(tracks[i]) == 1, i
        tr = tracks[i][0]
        assert abs(tr.center[0] - (_vehicle_x(i) + 9.5)) < 3, (i, tr.center)
        assert (tr.speed_flag == INTERPOLATED) == (i in MISSED) and (tr.speed_kmh is None or i not in MISSED)


def test_live_or_with_the_option_off_the_lost_frames_stay_empty():
    for tracks in (_run(fill=False, recorded=True), _run(fill=True, recorded=False)):
        assert [i for i in range(3, 45) if not tracks[i]] == sorted(MISSED)
        assert not any(tr.speed_flag == INTERPOLATED for frame in tracks for tr in frame)


def test_airpatrol_process_writes_the_filled_rows_flagged_and_counts_them(tmp_path: Path):
    from edge.runner import process_video

    video = tmp_path / "clip.avi"
    ground = _ground()
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), FPS, (W, H))
    for i in range(45):
        writer.write(_image(ground, i))
    writer.release()
    config = _config(fill=True)
    pipeline = Pipeline(config, detector=MissingDetector())
    out = process_video(video, tmp_path / "run", config, pipeline=pipeline, write_video=False, progress=False)
    with open(out.out_dir / "tracks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    filled = [r for r in rows if r["speed_flag"] == INTERPOLATED]
    assert sorted(int(r["frame"]) - 1 for r in filled) == sorted(MISSED)  # 1-based frames in the file
    assert all(r["speed_kmh"] == "" for r in filled)
    assert len({r["track_id"] for r in rows}) == 1
    assert json.loads((out.out_dir / "summary.json").read_text())["counts"]["interpolated_boxes"] == len(MISSED)
