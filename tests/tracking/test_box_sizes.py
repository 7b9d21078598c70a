"""Steady box sizes (tracking/box_sizes.py): a recorded run reports each box at its centre with its track's median
size, so a detector's frame-to-frame jitter does not take a box off its vehicle; edges and turns keep what they
measured."""

from __future__ import annotations

import numpy as np

from tracking.box_sizes import steady_box_sizes
from tracking.linked_run import link_results
from tracking.linking import LinkingConfig
from tracking.types import FrameResult, TrackState
from vision.types import Frame

FPS = 10.0
W, H = 1000, 600


def _box(cx: float, cy: float, w: float, h: float) -> np.ndarray:
    return np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], np.float32)


def _results(boxes: dict[int, list[np.ndarray]]) -> list[FrameResult]:
    n = max(len(b) for b in boxes.values())
    return [
        FrameResult(
            Frame(f, f / FPS, np.zeros((1, 1, 3), np.uint8)),
            [TrackState(tid, b[f], 0.9, 0) for tid, b in boxes.items() if f < len(b)],
            to_first=np.eye(3),
        )
        for f in range(n)
    ]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_a_jittering_small_car_keeps_its_boxes_on_the_car():
    # a 30 x 24 px car driving right; the detector's box of it misses by a few pixels in each side now and then
    rng = np.random.default_rng(0)
    true = [_box(100 + 3 * f, 300, 30, 24) for f in range(60)]
    jitter = rng.choice([-9.0, 0.0, 0.0, 0.0, 9.0], size=(60, 2))
    seen = [_box(100 + 3 * f, 300, 30 + dw, 24 + dh) for f, (dw, dh) in enumerate(jitter)]
    results = _results({1: seen})
    before = [_iou(s, t) for s, t in zip(seen, true)]
    assert min(before) < 0.5, "the test needs frames a jittering box would miss"
    changed = steady_box_sizes(results, 1.0, W, H, 0.01)
    after = [_iou(r.tracks[0].xyxy, t) for r, t in zip(results, true)]
    assert changed > 0 and min(after) >= 0.8 and np.mean(after) > np.mean(before)
    for r, s in zip(results, seen):  # the centre (every ground position and speed) is the one measured
        np.testing.assert_allclose(r.tracks[0].xyxy.reshape(2, 2).mean(0), s.reshape(2, 2).mean(0), atol=1e-3)


def test_a_queued_cars_size_comes_from_its_measured_boxes_not_the_predictions_between():
    # a 36 x 40 px car waits in a queue, boxed by the detector on every third frame; once it was boxed together with
    # its neighbour (58 x 49), and the tracker's predictions after that carried the growth on for a few frames
    true = _box(500, 180, 36, 40)
    boxes, measured = [], []
    for f in range(45):
        if f % 3 == 0:
            boxes.append(_box(500, 180, 58, 49) if f == 21 else true)
        else:
            grow = 12.0 * (f - 21) if 21 < f < 27 else 0.0
            boxes.append(_box(500, 180, 36 + grow, 40 + grow))
        measured.append(f % 3 == 0)
    results = _results({1: boxes})
    for r, m in zip(results, measured):
        r.tracks[0].measured = m
    steady_box_sizes(results, 1.0, W, H, 0.01)
    assert all(_iou(r.tracks[0].xyxy, true) > 0.99 for r in results)


def test_a_turn_changes_the_size_within_the_window_and_edges_keep_theirs():
    # nadir: a car driving east (40 x 16) turns north (16 x 40) at frame 30; another is cut by the frame's left edge
    turning = [_box(500, 300 - f, 40, 16) if f < 30 else _box(500, 300 - f, 16, 40) for f in range(60)]
    at_edge = [_box(5 + f, 100, 10 + 2 * f, 16) for f in range(10)]
    results = _results({1: turning, 2: at_edge})
    steady_box_sizes(results, 1.0, W, H, 0.01)
    sizes = [r.tracks[0].xyxy[2:] - r.tracks[0].xyxy[:2] for r in results]
    np.testing.assert_allclose(sizes[20], [40, 16]) and np.testing.assert_allclose(sizes[40], [16, 40])
    assert all(np.allclose(s, [40, 16]) or np.allclose(s, [16, 40]) for s in sizes), "no size between the two"
    for f, r in enumerate(results[:10]):
        np.testing.assert_allclose(r.tracks[1].xyxy, at_edge[f])


def test_recorded_runs_steady_their_boxes_unless_told_not_to():
    seen = [_box(200 + 4 * f, 300, 30 + (8 if f % 4 == 0 else 0), 24) for f in range(40)]
    results = _results({1: seen})
    assert link_results(results, W, H, LinkingConfig(steady_box_s=0)).steadied_boxes == 0
    assert all(np.array_equal(r.tracks[0].xyxy, s) for r, s in zip(results, seen))
    report = link_results(results, W, H)
    assert report.steadied_boxes == 10  # the ten wide boxes took the median width
    assert all(np.isclose(r.tracks[0].xyxy[2] - r.tracks[0].xyxy[0], 30) for r in results)
