"""HeldResults keeps each frame's road mask, compressed, until the linked tracks are written."""

from __future__ import annotations

import cv2
import numpy as np

from tracking.linked_run import HeldResults
from tracking.types import FrameResult
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
