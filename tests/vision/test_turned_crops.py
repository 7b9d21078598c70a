"""Looking again in a turned crop: the crop's geometry and the box mapped back to the frame (the detector is a
stand-in that boxes the bright pixels of each crop, so the test checks the geometry, not a model)."""

from __future__ import annotations

import cv2
import numpy as np

from vision.turned_crops import CAR_PX, CROP_PX, look_again
from vision.types import Detections


def _frame_with_car(center, length, width, heading_deg):
    image = np.full((400, 600, 3), 60, np.uint8)
    corners = cv2.boxPoints(((float(center[0]), float(center[1])), (float(length), float(width)), heading_deg))
    cv2.fillConvexPoly(image, corners.astype(np.int32), (255, 255, 255))
    xs, ys = corners[:, 0], corners[:, 1]
    return image, np.array([xs.min(), ys.min(), xs.max(), ys.max()])


def _bright_boxes(score):
    seen = []

    def predict(crops):
        out = []
        for crop in crops:
            seen.append(crop)
            ys, xs = np.nonzero(crop[:, :, 0] > 150)
            if not len(xs):
                out.append(Detections())
                continue
            box = np.array([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], np.float32)
            out.append(Detections(box, np.array([score], np.float32), np.zeros(1, int)))
        return out

    return predict, seen


def test_a_diagonal_car_is_seen_along_the_axes_and_its_frame_box_comes_back():
    # a 60 x 24 px car heading 40 degrees (image y down), lost a little behind where the track predicted it
    image, truth = _frame_with_car((300, 200), 60, 24, 40.0)
    predict, seen = _bright_boxes(0.8)
    heading = np.radians(40.0)
    predicted_center = np.array([[300 - 6 * np.cos(heading), 200 - 6 * np.sin(heading)]])
    found, places = look_again(predict, image, predicted_center, np.array([heading]), np.array([60.0]), 0.25)
    assert places.tolist() == [0] and len(found) == 1
    np.testing.assert_allclose(found.xyxy[0], truth, atol=3.0)
    # in the crop the car lies along x, CAR_PX long
    ys, xs = np.nonzero(seen[0][:, :, 0] > 150)
    assert abs((xs.max() - xs.min() + 1) - CAR_PX) <= 3 and (ys.max() - ys.min() + 1) < 0.5 * CAR_PX
    assert seen[0].shape[:2] == (CROP_PX, CROP_PX)


def test_nothing_there_a_weak_box_or_one_off_centre_is_not_taken():
    image, _ = _frame_with_car((450, 300), 60, 24, 0.0)
    predict, _ = _bright_boxes(0.8)
    empty = look_again(predict, image, np.array([[120.0, 100.0]]), np.zeros(1), np.array([60.0]), 0.25)[0]
    assert len(empty) == 0  # only road there
    weak_predict, _ = _bright_boxes(0.1)
    weak = look_again(weak_predict, image, np.array([[450.0, 300.0]]), np.zeros(1), np.array([60.0]), 0.25)[0]
    assert len(weak) == 0
    # the car 65 px ahead of where the track was expected (over a third of the crop at this zoom): another vehicle
    off = look_again(predict, image, np.array([[385.0, 300.0]]), np.zeros(1), np.array([60.0]), 0.25)[0]
    assert len(off) == 0
