"""The matched "vehicles found" measure of the interchange benchmark (tracking/evaluation/track_match.py), and the
per-sequence scoring the real-footage benchmarks share (tracking/evaluation/scoring.py)."""

import numpy as np

from tracking.evaluation.io import Boxes
from tracking.evaluation.scoring import boxes_from_rows, score, touches_border
from tracking.evaluation.track_match import match, vehicles_found

FPS = 25.0


def _track(tid: int, frames: range, x0: float, y0: float, vx: float, size: float = 10.0) -> list[tuple]:
    return [(f, tid, x0 + vx * f, y0, x0 + vx * f + size, y0 + size / 2) for f in frames]


def test_a_track_on_a_reference_vehicle_is_found_and_an_invented_one_is_extra():
    reference = np.array(_track(1, range(1, 60), 100, 100, 2) + _track(2, range(1, 60), 500, 300, -2))
    # follows vehicle 1 a few pixels off; a second track where the reference has nothing
    candidate = np.array(_track(7, range(1, 60), 104, 102, 2) + _track(8, range(1, 60), 900, 700, 1))
    m = match(candidate, reference, FPS)
    assert m == {"tracks": 2, "reference_vehicles": 2, "found_matched": 1, "extra": 1}


def test_a_vehicle_split_into_two_tracks_is_found_once():
    reference = np.array(_track(1, range(1, 80), 100, 100, 2))
    candidate = np.array(_track(3, range(1, 40), 100, 100, 2) + _track(4, range(40, 80), 100, 100, 2))
    m = match(candidate, reference, FPS)
    assert m["found_matched"] == 1 and m["extra"] == 0 and m["tracks"] == 2


def test_tracks_shorter_than_a_second_and_tracks_that_only_cross_do_not_count():
    reference = np.array(_track(1, range(1, 60), 100, 100, 2))
    short = _track(5, range(1, 20), 100, 100, 2)  # 0.76 s at 25 fps
    # moves the other way: near the reference vehicle for a few frames only
    crossing = _track(6, range(1, 60), 220, 100, -2)
    m = match(np.array(short + crossing), reference, FPS)
    assert m["tracks"] == 1 and m["found_matched"] == 0 and m["extra"] == 1


def test_border_boxes_and_vehicles_found():
    assert touches_border(
        np.array([[0, 10, 5, 5], [10, 10, 5, 5], [95, 10, 5, 5], [10, 48, 5, 2]]), (100, 50)
    ).tolist() == [
        True,
        False,
        True,
        True,
    ]
    rows = [(f, 1, 0, 0, 0, 0) for f in range(1, 31)] + [(f, 2, 0, 0, 0, 0) for f in range(1, 10)]
    assert vehicles_found(np.array(rows), 25.0) == 1 and vehicles_found(np.array(rows), 5.0) == 2


def test_score_drops_ignored_boxes_keeps_the_frame_window_and_counts_border_false_positives():
    gt = boxes_from_rows([(1, 1, 10, 10, 10, 10), (2, 1, 12, 10, 10, 10), (2, 2, 60, 30, 10, 10)])
    ignore = boxes_from_rows([(2, 0, 55, 25, 20, 20)])  # covers gt 2 in frame 2: neither side counts there
    pred = boxes_from_rows(
        [
            (1, 7, 10, 10, 10, 10),
            (2, 7, 12, 10, 10, 10),
            (2, 8, 0, 40, 8, 8),  # touches the left edge, matches nothing
            (2, 9, 61, 30, 10, 10),  # inside the ignore region
            (3, 7, 14, 10, 10, 10),  # outside the scored frames
        ]
    )
    s = score(gt, ignore, pred, (1, 2), size=(100, 50))
    assert (s["gt_boxes"], s["fp"], s["fn"], s["idsw"], s["border_fp"]) == (2, 1, 0, 0, 1)
    assert s["mota"] == 50.0
    assert score(gt, ignore, pred, (1, 2))["border_fp"] is None
    assert len(boxes_from_rows([])) == 0 and isinstance(boxes_from_rows([]), Boxes)
