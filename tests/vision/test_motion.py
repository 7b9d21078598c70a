import cv2
import numpy as np

from tests.conftest import textured_image
from vision.motion import MotionDetector


def _frames(n=4, w=480, h=270, pan=3, car_speed=6):
    ground = textured_image(w + 100, h, seed=3)
    frames, Hs, car_boxes = [], [], []
    for k in range(n):
        off = k * pan
        img = ground[:, off : off + w].copy()
        x = 100 + k * car_speed - off  # car moves in the world; the camera pans
        cv2.rectangle(img, (x, 120), (x + 18, 129), (30, 30, 220), -1)
        parked_x = 300 - off
        cv2.rectangle(img, (parked_x, 60), (parked_x + 18, 69), (220, 220, 30), -1)
        frames.append(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))
        Hs.append(np.array([[1, 0, -pan], [0, 1, 0], [0, 0, 1.0]]))
        car_boxes.append(((x, 120, x + 18, 129), (parked_x, 60, parked_x + 18, 69)))
    return frames, Hs, car_boxes


def test_moving_car_found_parked_car_and_panning_ground_ignored():
    frames, Hs, boxes = _frames()
    md = MotionDetector()
    field = None
    for k, g in enumerate(frames):
        field = md.update(g, Hs[k] if k else None, 1.0)
    moving_box, parked_box = boxes[-1]
    frac = field.moving_fraction(np.array([moving_box, parked_box], np.float32))
    assert frac[0] > 0.3 and frac[1] < 0.05
    blobs = md.blobs(field, min_area_px=20)
    assert len(blobs) >= 1
    cx = (blobs[:, 0] + blobs[:, 2]) / 2
    assert np.any(np.abs(cx - (moving_box[0] + moving_box[2]) / 2) < 12)
    # away from the cars, the compensated background is quiet
    assert field.mask[150:, :].mean() < 2


def test_road_mask_limits_motion():
    frames, Hs, _ = _frames()
    md = MotionDetector()
    road = np.zeros_like(frames[0])
    field = None
    for k, g in enumerate(frames):
        field = md.update(g, Hs[k] if k else None, 1.0, road)
    assert not field.mask.any()
