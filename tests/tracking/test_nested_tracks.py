"""Tracks inside another track's box (tracking/nested_tracks.py): a truck's cab tracked besides the truck is one
vehicle; a box of two queued cars is neither; a car passing over something the detector boxed is left alone. Two
tracks that followed one car at once are one vehicle; two cars side by side or nose to tail are not."""

from __future__ import annotations

import numpy as np

from tracking.linked_run import link_results
from tracking.linking import LinkingConfig
from tracking.nested_tracks import NestedReport, merge_twins, resolve_nested
from tracking.types import FrameResult, TrackState
from vision.types import Frame

FPS = 10.0
W, H = 1600, 900


def _results(n_frames: int, boxes: dict[int, dict[int, tuple[float, float, float, float]]]) -> list[FrameResult]:
    """``boxes``: track id -> {frame: xyxy}; a hovering drone."""
    out = []
    for f in range(n_frames):
        tracks = [TrackState(tid, np.array(path[f], np.float32), 0.8, 0) for tid, path in boxes.items() if f in path]
        out.append(FrameResult(Frame(f, f / FPS, np.zeros((1, 1, 3), np.uint8)), tracks, to_first=np.eye(3)))
    return out


def _moving(frames: range, x0: float, y0: float, length: float, width: float, px_per_frame: float) -> dict:
    return {
        f: (x0 + px_per_frame * (f - frames.start), y0, x0 + px_per_frame * (f - frames.start) + length, y0 + width)
        for f in frames
    }


def _ids(results: list[FrameResult]) -> list[set[int]]:
    return [{tr.track_id for tr in r.tracks} for r in results]


def test_a_trucks_cab_tracked_besides_the_truck_is_one_vehicle_with_the_trucks_box():
    # a 15 m truck (200 x 40 px) driving right; its cab (the front 45 px) is tracked from frame 0, the whole truck
    # from frame 10 on: the cab's track started first, so the vehicle keeps its id
    truck = _moving(range(10, 60), 100 + 6 * 10, 400, 200, 40, 6.0)
    cab = {
        f: (x2 - 45, y1 + 2, x2 - 2, y2 - 2)
        for f, (x1, y1, x2, y2) in _moving(range(0, 55), 100, 400, 200, 40, 6.0).items()
    }
    results = _results(60, {7: truck, 3: cab})
    report = resolve_nested(results, min_s=1.0)
    assert report.merged == [[3, 7]] and report.group_tracks == []
    assert all(ids == {3} for ids in _ids(results))  # one vehicle on every frame, never two boxes
    for f in (10, 30, 54):  # where both were boxed, the whole truck's box is the one reported
        np.testing.assert_allclose(results[f].tracks[0].xyxy, truck[f])
    np.testing.assert_allclose(results[5].tracks[0].xyxy, cab[5])  # before the truck was boxed whole: the cab


def test_a_box_of_two_queued_cars_is_dropped_and_the_cars_keep_their_tracks():
    left, right = (500.0, 300.0, 560.0, 330.0), (566.0, 300.0, 626.0, 330.0)
    group = (495.0, 296.0, 631.0, 334.0)
    # the group box's track also has a few boxes of its own beside the pair (frames 45-50): no vehicle either
    group_track = {**dict.fromkeys(range(20, 45), group), **dict.fromkeys(range(45, 50), (560.0, 296.0, 680.0, 334.0))}
    boxes = {1: dict.fromkeys(range(80), left), 2: dict.fromkeys(range(80), right), 9: group_track}
    results = _results(80, boxes)
    report = resolve_nested(results, min_s=1.0)
    assert report.group_tracks == [9] and report.merged == [] and report.dropped_boxes == 30
    assert all(ids == {1, 2} for ids in _ids(results))


def test_a_cars_track_that_boxes_it_and_its_neighbour_for_a_while_keeps_its_other_boxes():
    # track 9 follows a car for 6 s; where it stops beside another one, it boxes both for 2 s (each tracked): only those
    left, right = (500.0, 300.0, 560.0, 330.0), (566.0, 300.0, 626.0, 330.0)
    own = _moving(range(0, 60), 140, 300, 60, 30, 6.0)  # arrives at x=494 by frame 59
    group = dict.fromkeys(range(60, 80), (495.0, 296.0, 631.0, 334.0))
    boxes = {1: dict.fromkeys(range(60, 100), left), 2: dict.fromkeys(range(60, 100), right), 9: {**own, **group}}
    results = _results(100, boxes)
    report = resolve_nested(results, min_s=1.0)
    assert report.group_tracks == [9] and report.dropped_boxes == 20
    assert all(9 in ids for ids in _ids(results)[:60]) and not any(9 in ids for ids in _ids(results)[60:])


def test_a_car_driving_over_a_standing_box_and_short_overlaps_are_left_alone():
    car = _moving(range(0, 60), 100, 300, 60, 30, 10.0)  # 10 px a frame: over a 20 px box for ~0.6 s
    marking = dict.fromkeys(range(60), (400.0, 305.0, 420.0, 325.0))  # something on the road the detector boxed
    results = _results(60, {1: car, 2: marking})
    assert resolve_nested(results, min_s=1.0).merged == []
    assert all(len(r.tracks) == 2 for r in results)


def test_a_group_box_that_becomes_one_car_is_not_merged_with_the_other():
    # two cars queued nose to tail, only the first tracked (1); track 5 boxes both for 3 s, then (the first car gone
    # out of it) follows the second car alone for 5 s: the box halves, so 5 is not the first car's whole box
    first = dict.fromkeys(range(0, 40), (500.0, 300.0, 560.0, 330.0))
    pair = dict.fromkeys(range(10, 40), (495.0, 297.0, 630.0, 333.0))
    second = dict.fromkeys(range(40, 90), (568.0, 300.0, 628.0, 330.0))
    results = _results(90, {1: first, 5: {**pair, **second}})
    report = resolve_nested(results, min_s=1.0)
    assert report.merged == [] and report.group_tracks == []
    assert all(len(r.tracks) == 2 for r in results[10:40])


def test_link_results_reports_the_merges_and_the_option_turns_them_off():
    truck = _moving(range(0, 50), 100, 400, 200, 40, 6.0)
    cab = {f: (x2 - 45, y1 + 2, x2 - 2, y2 - 2) for f, (x1, y1, x2, y2) in truck.items() if 5 <= f < 45}
    report = link_results(_results(50, {1: truck, 2: cab}), W, H)
    assert report.nested_merged == [[1, 2]] and report.nested_dropped_boxes == 40 and report.tracks_after == 1
    kept = _results(50, {1: truck, 2: cab})
    report = link_results(kept, W, H, LinkingConfig(nested_tracks=False))
    assert report.nested_merged == [] and sum(len(r.tracks) for r in kept) == 90


def test_a_car_with_its_roof_and_windscreen_tracked_inside_it_is_not_a_group_box():
    # the car's whole box (1) holds a roof box (2), which holds a windscreen box (3): parts of one vehicle, one
    # inside the other, not two vehicles side by side; the car's own track stays
    car = dict.fromkeys(range(60), (500.0, 300.0, 546.0, 345.0))
    roof = dict.fromkeys(range(60), (504.0, 304.0, 538.0, 333.0))
    windscreen = dict.fromkeys(range(60), (506.0, 306.0, 536.0, 326.0))
    results = _results(60, {1: car, 2: roof, 3: windscreen})
    report = resolve_nested(results, min_s=1.0)
    assert report.group_tracks == []
    assert all(1 in ids for ids in _ids(results))


def test_two_tracks_that_followed_one_car_at_once_are_one_vehicle_with_the_first_ones_boxes():
    # track 4 follows a car from frame 0; from frame 20 a second track (8), its box 8 px lower and a little taller
    # (IoU ~0.6), follows the same car until frame 70, then the first is lost and 8 goes on alone
    car = _moving(range(0, 70), 100, 300, 60, 30, 5.0)
    later = _moving(range(20, 100), 200, 300, 60, 30, 5.0)  # where the car is at frame 20
    loose = {f: (x1 + 2, y1 + 8, x2 + 2, y2 + 12) for f, (x1, y1, x2, y2) in later.items()}
    results = _results(100, {4: car, 8: loose})
    report = NestedReport()
    merge_twins(results, 1.0, report)
    assert report.twins == [[4, 8]] and report.twin_dropped_boxes == 50
    assert all(ids == {4} for ids in _ids(results))  # one vehicle, one box a frame, the first track's id
    np.testing.assert_allclose(results[40].tracks[0].xyxy, car[40])  # where both reported: the first one's box
    np.testing.assert_allclose(results[90].tracks[0].xyxy, loose[90])  # after it: the second one's


def test_a_second_box_of_a_car_for_a_few_frames_is_its_twin_unless_turned_off():
    # track 4 follows a car; for 6 frames (0.6 s, under nested_min_s) the detector boxed it twice and a second track
    # (8) followed the second box, 4 px lower (IoU ~0.7), then was lost: never a vehicle of its own
    car = _moving(range(0, 80), 100, 300, 60, 30, 5.0)
    flicker = {f: (x1 + 2, y1 + 4, x2 + 2, y2 + 4) for f, (x1, y1, x2, y2) in car.items() if 40 <= f < 46}
    results = _results(80, {4: car, 8: flicker})
    report = NestedReport()
    merge_twins(results, 1.0, report)
    assert report.twins == [[4, 8]] and report.twin_dropped_boxes == 6
    assert all(ids == {4} for ids in _ids(results))
    kept = _results(80, {4: car, 8: flicker})
    merge_twins(kept, 1.0, report := NestedReport(), short_twins=False)
    assert report.twins == [] and sum(len(r.tracks) for r in kept) == 86


def test_a_short_track_that_lived_mostly_apart_from_the_car_is_not_its_twin():
    # a 6-frame track beside the car on 2 of its frames only (a car passing it, then its own way): not a twin
    car = _moving(range(0, 80), 100, 300, 60, 30, 5.0)
    passing = {
        f: (x1 + 2 + 20 * (f - 40), y1 + 4, x2 + 2 + 20 * (f - 40), y2 + 4)
        for f, (x1, y1, x2, y2) in car.items()
        if 40 <= f < 46
    }
    results = _results(80, {4: car, 8: passing})
    merge_twins(results, 1.0, report := NestedReport())
    assert report.twins == [] and sum(len(r.tracks) for r in results) == 86


def test_cars_side_by_side_or_nose_to_tail_and_a_brief_overlap_are_not_twins():
    a = _moving(range(0, 80), 100, 300, 60, 30, 5.0)
    next_lane = _moving(range(0, 80), 100, 326, 60, 30, 5.0)  # 26 px lower: IoU 0.07
    behind = _moving(range(0, 80), 50, 300, 60, 30, 5.0)  # 50 px behind, nose to tail: IoU 0.09
    passing = _moving(range(0, 80), -300, 300, 60, 30, 10.0)  # overtakes a on its own lane's line for ~0.6 s
    results = _results(80, {1: a, 2: next_lane, 3: behind, 4: passing})
    report = NestedReport()
    merge_twins(results, 1.0, report)
    assert report.twins == [] and all(len(r.tracks) == 4 for r in results)


def test_link_results_merges_twins_unless_turned_off():
    car = _moving(range(0, 60), 100, 300, 60, 30, 5.0)
    twin = {f: (x1 + 3, y1 + 5, x2 + 3, y2 + 8) for f, (x1, y1, x2, y2) in car.items() if f >= 10}
    report = link_results(_results(60, {1: car, 2: twin}), W, H)
    assert report.twins == [[1, 2]] and report.tracks_after == 1
    kept = _results(60, {1: car, 2: twin})
    report = link_results(kept, W, H, LinkingConfig(twin_tracks=False))
    assert report.twins == [] and sum(len(r.tracks) for r in kept) == 110
