"""A recorded run fills the frames a track was lost on (``tracker.fill_lost_gaps``): a vehicle the detector misses for a
few frames is reported on them too, at boxes between where it was seen, with no speed; live, and with the option off,
those frames stay empty."""

from __future__ import annotations

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.config import PipelineConfig, RoadConfig, TrackerConfig
from tracking.pipeline import Pipeline
from tracking.track_starts import from_first_frame
from tracking.types import INTERPOLATED
from vision.config import DetectorConfig, MotionConfig
from vision.types import Frame

MISSED = set(range(20, 26))  # frames the detector does not see the vehicle on


class _MissingDetector(BrightBoxDetector):
    def __init__(self):
        super().__init__()
        self.frame = 0

    def detect(self, image, road_mask=None, tiling=None):
        dets = super().detect(image, road_mask, tiling)
        self.frame += 1
        return dets[np.zeros(len(dets), bool)] if self.frame - 1 in MISSED else dets


def _vehicle_x(i: int) -> float:
    return 100 + 4.0 * i


def _run(fill: bool, recorded: bool) -> list[list]:
    config = PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),  # nothing but the detector finds the vehicle
        detector=DetectorConfig(every_n_frames=1),
        tracker=TrackerConfig(fill_lost_gaps=fill),
    )
    p = Pipeline(config, detector=_MissingDetector())
    p.reset(W, H, FPS)
    ground = _ground()

    def frame(i: int) -> np.ndarray:
        img = ground.copy()
        x = int(round(_vehicle_x(i)))
        cv2.rectangle(img, (x, 250), (x + 19, 259), (255, 255, 255), -1)
        return img

    results = (p.step(Frame(i, i / FPS, frame(i))) for i in range(45))
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
