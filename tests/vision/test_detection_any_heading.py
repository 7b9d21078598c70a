"""The any-heading detector beside the shipped one: it looks in crops around tracks the shipped detector has no box
for, and returns its boxes there that no box of the shipped detector overlaps, tagged."""

from __future__ import annotations

import cv2
import numpy as np

from tests.conftest import shared_path
from vision.config import DetectorConfig
from vision.detection import VehicleDetector, crop_regions
from vision.types import DetectionSource


def test_crops_are_squares_around_the_tracks_and_overlapping_ones_are_one():
    boxes = np.array([[100, 100, 140, 120], [150, 100, 190, 120], [600, 300, 610, 305], [1900, 500, 1940, 520]])
    regions = crop_regions(boxes, 2.5, 64, 1920, 1080)
    # the first two (100 px squares at x 70-170 and 120-220) overlap: one crop; a small box gets the 64 px minimum (rows 302.5 +- 32, outward to whole pixels);
    # a box at the frame's edge gets the part of its square inside the frame
    assert regions == [(70, 60, 220, 160), (573, 270, 637, 335), (1870, 460, 1920, 560)]


def _turned_truth(gt: np.ndarray, m: np.ndarray, w: int, h: int) -> np.ndarray:
    """The truth boxes (x, y, w, h) of cars turned by the affine ``m``: the bounding box of each car turned 45 degrees
    (a rounded rectangle: a little inside the turned box's corners), those whose centre stays in the frame."""
    cx, cy = gt[:, 0] + gt[:, 2] / 2, gt[:, 1] + gt[:, 3] / 2
    ux, uy = m[0, 0] * cx + m[0, 1] * cy + m[0, 2], m[1, 0] * cx + m[1, 1] * cy + m[1, 2]
    half = (gt[:, 2] + gt[:, 3]) / 2 * np.sqrt(0.5) * 0.93
    inside = (ux > 0) & (ux < w) & (uy > 0) & (uy < h)
    return np.column_stack([ux - half, uy - half, ux + half, uy + half])[inside]


def test_on_a_real_frame_turned_45_degrees_it_finds_cars_the_shipped_detector_missed():
    from supervision import box_iou_batch

    seq = shared_path("data", "mot", "uavdt_M0703_nadir_dev")
    ok, frame = cv2.VideoCapture(str(seq / "video.mp4")).read()
    assert ok
    gt = np.loadtxt(seq / "gt" / "gt_mot.txt", delimiter=",")
    h, w = frame.shape[:2]  # the nadir frame turned about its centre: every car lies diagonally
    m = cv2.getRotationMatrix2D((w / 2, h / 2), 45, 1.0)
    frame = cv2.warpAffine(frame, m, (w, h))
    truth = _turned_truth(gt[gt[:, 0] == 1][:, 2:6], m, w, h)
    det = VehicleDetector(DetectorConfig(tiling="on"), "cpu")
    shipped = det.detect(frame)
    confident = shipped[shipped.score >= 0.25]
    missed = truth[box_iou_batch(truth, confident.xyxy).max(1) < 0.4]  # as tracks there would be predicted
    assert len(missed) >= 3
    found = det.detect_any_heading(frame, missed, shipped)
    assert (found.source == DetectionSource.ANY_HEADING).all() and det.any_heading_crops >= 1
    assert box_iou_batch(found.xyxy, shipped.xyxy).max() < 0.3  # only boxes the shipped detector had none for
    found = found[found.score >= 0.25]
    hits = int((box_iou_batch(missed, found.xyxy).max(1) >= 0.4).sum()) if len(found) else 0
    assert hits >= 2  # measured: 3 of the 6 cars the shipped detector missed
