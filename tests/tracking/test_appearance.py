"""Vehicles' colours for the whole-flight linking (tracking/appearance.py): a box's histogram, the distance of two,
and a sampler that takes each track about once a second; a recorded pipeline run carries the samples, a live one
does not."""

from __future__ import annotations

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.appearance import BINS, AppearanceSampler, box_histogram, distance
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig
from tracking.linking import LinkingConfig
from tracking.pipeline import Pipeline
from vision.config import DetectorConfig, MotionConfig
from vision.types import Frame


def _car(bgr: tuple[int, int, int], road: tuple[int, int, int] = (90, 90, 90)) -> np.ndarray:
    """A 120x80 image of grey road with a 40x20 car of colour ``bgr`` at (40, 30)-(80, 50)."""
    img = np.full((80, 120, 3), road, np.uint8)
    cv2.rectangle(img, (40, 30), (79, 49), bgr, -1)
    return img


BOX = np.array([40, 30, 80, 50], np.float32)


def test_a_box_histogram_is_its_middles_colours_normalised():
    hist = box_histogram(_car((0, 0, 200)), BOX)
    assert hist is not None and hist.shape == (int(np.prod(BINS)),) and abs(float(hist.sum()) - 1.0) < 1e-5
    # the road around the box's corners is left out: a red car's histogram is that of red alone
    assert distance(hist, box_histogram(_car((0, 0, 200), road=(200, 200, 200)), BOX)) < 0.05


def test_the_same_car_is_near_and_cars_of_other_colours_are_far():
    red = box_histogram(_car((0, 0, 200)), BOX)
    assert distance(red, box_histogram(_car((20, 20, 200)), BOX)) < 0.1
    # a little darker (lit otherwise, seen from another side) across a bin's border: near, not another vehicle
    assert distance(red, box_histogram(_car((0, 0, 170)), BOX)) < LinkingConfig().appearance_max
    blue, white = box_histogram(_car((200, 0, 0)), BOX), box_histogram(_car((240, 240, 240)), BOX)
    assert distance(red, blue) > 0.9 and distance(red, white) > 0.9 and distance(blue, white) > 0.9


def test_boxes_too_small_or_outside_the_image_give_no_histogram():
    img = _car((0, 0, 200))
    assert box_histogram(img, np.array([40, 30, 44, 33], np.float32)) is None  # a 4x3 box: its middle is 2x2 px
    assert box_histogram(img, np.array([200, 200, 240, 220], np.float32)) is None
    assert box_histogram(img[:, :, 0], BOX) is None  # not a colour image


def test_the_sampler_takes_each_track_at_most_once_per_interval():
    sampler, img = AppearanceSampler(every_s=1.0), _car((0, 0, 200))
    taken = {t: set(sampler.sample(img, t, [(1, BOX), (2, BOX)])) for t in np.arange(0, 3.05, 0.1).round(2)}
    assert [t for t, ids in taken.items() if 1 in ids] == [0.0, 1.0, 2.0, 3.0]
    later = sampler.sample(img, 3.2, [(3, BOX), (1, BOX)])  # a new track is taken at once
    assert set(later) == {3}
    sampler.reset()
    assert set(sampler.sample(img, 3.3, [(1, BOX)])) == {1}


def _appearance_samples(recorded: bool, appearance: bool = True) -> list[dict]:
    config = PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),
        detector=DetectorConfig(every_n_frames=1),
        calibration=CalibrationConfig(metres_per_pixel=0.2),
        linking=LinkingConfig(appearance=appearance),
    )
    p = Pipeline(config, detector=BrightBoxDetector())
    p.reset(W, H, FPS, recorded=recorded)
    ground = _ground()
    out = []
    for i in range(60):
        img = ground.copy()
        x = 100 + 4 * i
        cv2.rectangle(img, (x, 250), (x + 29, 264), (255, 255, 255), -1)
        out.append(p.step(Frame(i, i / FPS, img)).appearance)
    return out


def test_a_recorded_run_carries_each_tracks_colours_about_once_a_second_and_a_live_one_none():
    samples = _appearance_samples(recorded=True)
    taken = [i for i, s in enumerate(samples) if s]
    assert 2 <= len(taken) <= 3 and all(b - a >= FPS for a, b in zip(taken, taken[1:]))  # 60 frames at 25 fps
    white = box_histogram(np.full((20, 40, 3), 255, np.uint8), np.array([0, 0, 40, 20], np.float32))
    assert all(distance(h, white) < 0.1 for i in taken for h in samples[i].values())  # the white box's
    assert not any(_appearance_samples(recorded=False))
    assert not any(_appearance_samples(recorded=True, appearance=False))
