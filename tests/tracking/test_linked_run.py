"""HeldResults keeps each frame's road mask, compressed, until the linked tracks are written; a track the tracker
lost and found again is reported on the frames between."""

from __future__ import annotations

import cv2
import numpy as np

from tracking.linked_run import HeldResults, link_results
from tracking.linking import LinkingConfig
from tracking.types import INTERPOLATED, FrameResult, TrackState
from vision.types import Frame


def _result(i: int, mask: np.ndarray | None) -> FrameResult:
    return FrameResult(frame=Frame(i, i / 25, np.zeros((4, 4, 3), np.uint8)), tracks=[], road_mask=mask)


def test_masks_come_back_exactly_and_small():
    road = np.zeros((1080, 1920), np.uint8)
    cv2.fillPoly(road, [np.array([[0, 300], [1920, 500], [1920, 800], [0, 700]])], 255)
    grey = (np.arange(1080 * 1920) % 251).astype(np.uint8).reshape(1080, 1920)  # not a 0/255 mask: kept as PNG
    held = HeldResults()
    for i, m in enumerate([road, road, np.roll(road, 3, axis=0), grey, None]):
        held.add(_result(i, m))
    assert np.array_equal(held.mask(0), road) and np.array_equal(held.mask(1), road)
    assert np.array_equal(held.mask(2), np.roll(road, 3, axis=0))
    assert np.array_equal(held.mask(3), grey)
    assert held.mask(4) is None
    assert held._masks[1] is held._masks[0]  # the same mask object: stored once
    assert len(held._masks[0]) < road.size // 50  # a road mask packs to a few kB, not megabytes
    assert all(r.road_mask is None for r in held.results)  # the results themselves hold no pixels


FPS = 10.0


def _lost_and_found(gap: range, px_per_frame: float, n: int = 60) -> list[FrameResult]:
    """One car (track 1, 40 x 20 px) driving right, which the tracker lost on the frames of ``gap`` and found again."""
    out = []
    for f in range(n):
        box = np.array([100 + px_per_frame * f, 300, 140 + px_per_frame * f, 320], np.float32)
        tracks = [] if f in gap else [TrackState(1, box, 0.8, 0, moving=px_per_frame > 0)]
        lost = frozenset({1}) if f in gap else frozenset()
        frame = Frame(f, f / FPS, np.zeros((1, 1, 3), np.uint8))
        out.append(FrameResult(frame, tracks, to_first=np.eye(3), lost_ids=lost))
    return out


def _reported(results: list[FrameResult], frames: range) -> list[TrackState]:
    return [tr for r in results[frames.start : frames.stop] for tr in r.tracks if tr.track_id == 1]


def test_a_moving_car_the_tracker_lost_for_a_second_and_a_half_is_reported_between():
    # found again under its id 1.5 s later (the tracker's own hold-back fills only a second): on its way between
    results = _lost_and_found(range(20, 35), 4.0)
    report = link_results(results, 1600, 900)
    between = _reported(results, range(20, 35))
    assert report.filled_boxes == 15 and len(between) == 15
    assert all(tr.speed_flag == INTERPOLATED and tr.speed_kmh is None for tr in between)
    for f, tr in zip(range(20, 35), between):  # on the car's straight way, where it was on that frame
        np.testing.assert_allclose(tr.center, (120 + 4.0 * f, 310), atol=0.5)


def test_a_moving_gap_longer_than_fill_moving_s_or_with_the_option_off_stays_empty():
    long_gap = _lost_and_found(range(20, 45), 4.0)  # 2.5 s: a straight line between the ends is a guess
    assert link_results(long_gap, 1600, 900).filled_boxes == 0 and not _reported(long_gap, range(20, 45))
    off = _lost_and_found(range(20, 35), 4.0)
    assert link_results(off, 1600, 900, LinkingConfig(fill_moving_lost=False)).filled_boxes == 0
    # where it stood, the gap is filled either way (fill_standing_lost), however long
    standing = _lost_and_found(range(10, 50), 0.0)
    assert link_results(standing, 1600, 900, LinkingConfig(fill_moving_lost=False)).filled_boxes == 40
