"""Still vehicles' boxes (tracking/still_boxes.py): a recorded run reports a vehicle standing still at its window's
median box, in the run's first frame's pixels, so neither the detector's jitter nor a second-long box of it with its
neighbour takes the box off the car; moving vehicles, a car setting off and one entering at the frame's edge keep
theirs."""

from __future__ import annotations

import numpy as np

from tests.tracking.test_box_sizes import H, W, _box, _iou
from tracking.linked_run import link_results
from tracking.linking import LinkingConfig
from tracking.still_boxes import still_boxes
from tracking.types import FrameResult, TrackState
from vision.types import Frame

FPS = 10.0


def _shift(dx: float) -> np.ndarray:
    """This frame's pixels -> the first frame's, for a drone that has drifted ``dx`` px to the right."""
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def _results(boxes: dict[int, list[np.ndarray]], drift: float = 0.0) -> list[FrameResult]:
    n = max(len(b) for b in boxes.values())
    return [
        FrameResult(
            Frame(f, f / FPS, np.zeros((1, 1, 3), np.uint8)),
            [TrackState(tid, b[f], 0.9, 0) for tid, b in boxes.items() if f < len(b)],
            to_first=_shift(drift * f),
        )
        for f in range(n)
    ]


def test_a_queued_car_stays_on_its_box_through_jitter_and_a_box_with_its_neighbour():
    # a 30 x 28 px car waits while the drone drifts 0.5 px a frame (the car moves left in the image); the detector's
    # box of it is off by a pixel or so, by 6 px now and then, and on frames 30-32 it boxes the car with its neighbour (56 x 30)
    rng = np.random.default_rng(1)
    drift = 0.5
    true = [_box(400 - drift * f, 300, 30, 28) for f in range(80)]
    off = rng.normal(0.0, 1.0, (80, 2)) + rng.choice([-6.0, 6.0], (80, 2)) * (rng.random((80, 1)) < 0.15)
    seen = [b + np.concatenate([d, d]).astype(np.float32) for b, d in zip(true, off)]
    for f in range(30, 33):
        seen[f] = _box(413 - drift * f, 301, 56, 30)
    results = _results({1: seen}, drift)
    before = [_iou(s, t) for s, t in zip(seen, true)]
    assert sum(b < 0.5 for b in before) >= 5, "the test needs frames the detected boxes miss"
    changed = still_boxes(results, 1.0, 0.1)
    after = [_iou(r.tracks[0].xyxy, t) for r, t in zip(results, true)]
    assert changed > 40
    assert min(after[10:70]) >= 0.7, "a second's boxes on either side say where the car stands"
    assert sum(a < 0.5 for a in after) <= 2 and np.mean(after) > np.mean(before)


def test_moving_cars_a_car_setting_off_and_one_entering_at_the_edge_keep_theirs():
    moving = [_box(200 + 4 * f, 300, 30, 24) for f in range(40)]
    # waits 20 frames, then sets off at 3 px a frame: from the frame it moves on, its boxes are its own
    setting_off = [_box(500 + max(0, f - 20) * 3.0, 200, 30, 24) for f in range(40)]
    at_edge = [_box(5 + f, 100, 10 + 2 * f, 16) for f in range(40)]  # entering: more of it in view each frame
    results = _results({1: moving, 2: setting_off, 3: at_edge})
    jittered = [r.tracks[1].xyxy.copy() for r in results]
    for r, f in zip(results, range(40)):
        if f >= 21:
            r.tracks[1].xyxy = r.tracks[1].xyxy + np.array([2, 0, 2, 0], np.float32) * (f % 2)  # a moving box's jitter
            jittered[f] = r.tracks[1].xyxy.copy()
    still_boxes(results, 1.0, 0.1)
    for f, r in enumerate(results):
        np.testing.assert_array_equal(r.tracks[0].xyxy, moving[f])
        np.testing.assert_array_equal(r.tracks[2].xyxy, at_edge[f])
        if f >= 21:
            np.testing.assert_array_equal(r.tracks[1].xyxy, jittered[f])


def test_recorded_runs_hold_still_boxes_unless_told_not_to():
    seen = [_box(400, 300, 30, 28) + np.array([6, 0, 6, 0], np.float32) * (f % 5 == 2) for f in range(40)]
    results = _results({1: seen})
    assert link_results(results, W, H, LinkingConfig(still_box_s=0)).still_boxes == 0
    assert all(np.array_equal(r.tracks[0].xyxy, s) for r, s in zip(results, seen))
    report = link_results(results, W, H)
    assert report.still_boxes == 8  # the eight boxes 6 px off moved back onto the car
    np.testing.assert_allclose([r.tracks[0].xyxy for r in results], [_box(400, 300, 30, 28)] * 40, atol=1e-3)
