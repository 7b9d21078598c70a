import cv2
import numpy as np

from tests.conftest import textured_image
from vision.config import MotionConfig
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


def _hovering(n, w=480, h=270, jitter=0.6, seed=5, car_from=None):
    """A hovering drone over ground with lane markings and a zebra crossing: each frame the view shifts by a random
    sub-pixel jitter (the homographies between frames are exact). From frame ``car_from`` a car drives along."""
    m = 8  # the view is cut from larger ground: no invented border
    ground = cv2.cvtColor(textured_image(w + 2 * m, h + 2 * m, seed=seed), cv2.COLOR_BGR2GRAY)
    for y in (90, 180):
        cv2.line(ground, (0, y + m), (w + 2 * m, y + m), 235, 2)
    for x in range(40, 200, 12):
        cv2.rectangle(ground, (x + m, 110 + m), (x + 5 + m, 160 + m), 235, -1)
    rng = np.random.default_rng(seed)
    off = rng.uniform(-jitter, jitter, (n, 2))
    frames, Hs, cars = [], [], []
    for k in range(n):
        scene = ground.copy()
        car = None
        if car_from is not None and k >= car_from:
            x = 20 + 4 * (k - car_from)
            car = (x, 95, x + 20, 105)  # along the marking at row 90
            cv2.rectangle(scene, (car[0] + m, car[1] + m), (car[2] + m, car[3] + m), 40, -1)
        M = np.array([[1, 0, off[k, 0] - m], [0, 1, off[k, 1] - m]])
        frames.append(cv2.warpAffine(scene, M, (w, h), flags=cv2.INTER_LINEAR))
        d = off[k] - off[k - 1] if k else (0.0, 0.0)
        Hs.append(np.array([[1, 0, d[0]], [0, 1, d[1]], [0, 0, 1.0]]))
        cars.append(car)
    return frames, Hs, cars


def test_a_hovering_flight_keeps_lane_markings_out_of_the_foreground():
    """Warping the background itself into every frame blurred it: after a few hundred frames of hover jitter the
    markings' edges were foreground (8 % of this scene). Kept in an anchor frame's coordinates, it stays sharp."""
    frames, Hs, _ = _hovering(300)
    share = {}
    for coverage in (None, 0.98):
        md = MotionDetector(MotionConfig(anchored_background_coverage=coverage))
        for k, g in enumerate(frames):
            field = md.update(g, Hs[k] if k else None, 1.0)
        share[coverage] = float((field.unrestricted > 0).mean())
    assert share[0.98] < 0.002 and share[None] > 0.05, share


def test_a_car_driving_along_a_marking_is_its_own_blob():
    frames, Hs, cars = _hovering(260, car_from=200)
    md = MotionDetector()
    for k, g in enumerate(frames):
        field = md.update(g, Hs[k] if k else None, 1.0)
    blobs = md.blobs(field)
    car = np.array(cars[-1], np.float32)
    hit = [b for b in blobs if b[0] <= car[2] and b[2] >= car[0] and b[1] <= car[3] and b[3] >= car[1]]
    assert len(hit) == 1
    # the car's blob, not the marking it drives along: no longer than the car and its shadow of motion
    assert hit[0][2] - hit[0][0] < 2.5 * (car[2] - car[0]), hit


def test_the_anchor_follows_a_drifting_drone_and_a_lost_one():
    """The drone drifts 3 px a frame: the anchor moves on once less than the configured share of the frame lies in
    it, and the panning ground stays background; a frame the anchor cannot be found in starts a new one."""
    frames, Hs, _ = _frames(n=30)
    md = MotionDetector()
    moved = 0
    for k, g in enumerate(frames):
        field = md.update(g, Hs[k] if k else None, 1.0)
        moved += md.anchor.is_prev
    assert 3 <= moved <= 15  # 3 px a frame of 480: a 2 % strip every ~3 frames, not every frame
    assert field.mask[150:, :].mean() < 2
    noise = np.random.default_rng(0).integers(0, 255, frames[0].shape, dtype=np.uint8)
    md.update(noise, np.eye(3), 1.0)
    assert md.anchor.is_prev  # lost: anchored afresh on this frame
