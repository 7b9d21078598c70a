"""Which tracks the pipeline reports: motion-only tracks once they have lasted, detector-fed tracks at once."""

from __future__ import annotations

import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from tracking.types import TrackState
from vision.types import Detections, DetectionSource

FPS = 25


def _pipeline() -> Pipeline:
    p = Pipeline(PipelineConfig(device="cpu", road=RoadConfig(enabled=False)), detector=BrightBoxDetector())
    p.reset(320, 240, FPS)
    return p


def _step(p: Pipeline, sources: dict[int, int]) -> set[int]:
    """One frame where track id -> detection of that source; returns the ids reported."""
    ids = list(sources)
    dets = Detections(
        np.tile([10, 10, 30, 20], (len(ids), 1)),
        np.full(len(ids), 0.5),
        np.zeros(len(ids)),
        np.array([sources[i] for i in ids], np.int8),
    )
    rows = np.array([[10, 10, 30, 20, tid, 0.5, 0, k] for k, tid in enumerate(ids)], np.float32).reshape(-1, 8)
    tracks = [TrackState(tid, np.array([10, 10, 30, 20], np.float32), 0.5, 0) for tid in ids]
    reported = {tr.track_id for tr in p._confirmed(tracks, rows, dets)[0]}
    p.frames += 1
    return reported


def test_motion_only_track_is_reported_after_min_motion_track_s():
    p = _pipeline()
    wait = int(np.ceil(PipelineConfig().motion.min_motion_track_s * FPS))
    first = next(k for k in range(3 * wait) if _step(p, {7: DetectionSource.MOTION}))
    assert first == wait - 1  # reported on its wait-th frame, not before


def test_detector_fed_track_is_reported_at_once_and_stays_reported():
    p = _pipeline()
    assert _step(p, {3: DetectionSource.DETECTOR}) == {3}
    for _ in range(5):  # the detector misses it; blobs keep it alive: still reported
        assert _step(p, {3: DetectionSource.MOTION}) == {3}


def test_motion_track_confirmed_by_the_detector_is_reported_from_then_on():
    p = _pipeline()
    assert _step(p, {5: DetectionSource.MOTION}) == set()
    assert _step(p, {5: DetectionSource.DETECTOR}) == {5}
    assert _step(p, {5: DetectionSource.MOTION}) == {5}


def test_support_of_long_gone_tracks_is_forgotten():
    p = _pipeline()
    _step(p, {1: DetectionSource.DETECTOR})
    for _ in range(120):
        _step(p, {})
    assert 1 not in p._track_support


def test_a_motion_only_track_is_withheld_until_reported():
    p = _pipeline()
    tracks = [TrackState(7, np.array([10, 10, 30, 20], np.float32), 0.5, 0)]
    rows = np.array([[10, 10, 30, 20, 7, 0.5, 0, 0]], np.float32)
    dets = Detections(
        np.array([[10, 10, 30, 20]]), np.array([0.5]), np.zeros(1), np.array([DetectionSource.MOTION], np.int8)
    )
    reported, withheld = p._confirmed(tracks, rows, dets)
    assert [tr.track_id for tr in withheld] == [7] and reported == []
