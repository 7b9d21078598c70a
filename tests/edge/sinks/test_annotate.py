"""The annotated video is readable: speed colours of the map legend, labels sized to the vehicles and off them,
violators marked, trails, one clean status line, no "parked" before a speed is measured."""

from __future__ import annotations

import numpy as np
import pytest

from edge.sinks.annotate import FrameAnnotator, label_text
from tracking import speed_classes as sc
from tracking.types import FrameResult, TrackState
from vision.types import Frame

GREY = 128


def _bgr(hex_colour: str) -> np.ndarray:
    h = hex_colour.lstrip("#")
    return np.array([int(h[4:6], 16), int(h[2:4], 16), int(h[0:2], 16)])


def _frame(w=1920, h=1080):
    return np.full((h, w, 3), GREY, np.uint8)


def _car(tid, x, y, speed, w=40, h=20, moving=True):
    return TrackState(tid, np.array([x, y, x + w, y + h], np.float32), 0.9, 0, moving=moving, speed_kmh=speed)


def test_labels_say_only_what_is_measured():
    assert label_text(_car(5, 0, 0, None, moving=False)) == "#5"  # not measured yet: never "parked"
    assert label_text(_car(5, 0, 0, 1.0, moving=False)) == "#5 parked"
    assert label_text(_car(5, 0, 0, 91.4)) == "#5 91 km/h"
    assert label_text(_car(5, 0, 0, 91.4), speed_limit_kmh=80) == "#5 91 km/h !"
    assert label_text(_car(5, 0, 0, 91.4), speed_limit_kmh=80, compact=True) == "#5 91 !"


@pytest.mark.parametrize(
    "speed,colour",
    [
        (15, sc.SPEED_COLOURS[0]),
        (50, sc.SPEED_COLOURS[2]),
        (130, sc.SPEED_COLOURS[6]),
        (None, sc.UNKNOWN_COLOUR),
        (95, sc.VIOLATION_COLOUR),
    ],
)
def test_boxes_have_the_map_legend_colours(speed, colour):
    car = _car(1, 900, 500, speed, w=80, h=40)
    limit = 90 if colour == sc.VIOLATION_COLOUR else None
    img = FrameAnnotator(speed_limit_kmh=limit, trails=False)(FrameResult(Frame(0, 0.0, _frame()), [car]))
    left_edge = img[510:530, 900]  # the box's left side, below any label
    assert (np.abs(left_edge.astype(int) - _bgr(colour)) <= 2).all(), (left_edge[0], colour)


def test_violator_gets_a_marker_above_its_label():
    cars = [_car(1, 600, 500, 70), _car(2, 1200, 500, 95)]
    img = FrameAnnotator(speed_limit_kmh=80, trails=False)(FrameResult(Frame(0, 0.0, _frame()), cars))
    red = np.all(np.abs(img.astype(int) - _bgr(sc.VIOLATION_COLOUR)) <= 2, axis=2)
    assert red[300:500, 1150:1290].sum() > 50  # label background and marker of the violator
    assert red[300:500, 550:690].sum() == 0


def _changed(img):
    return np.any(img.astype(int) != GREY, axis=2)


def test_labels_fit_the_vehicles_and_stay_off_them():
    # a 1080p nadir view: 40x20 px cars in four close lanes, 12 per lane
    cars = [
        _car(10 * lane + k, 100 + 150 * k + 37 * lane, 400 + 45 * lane, 40 + 15 * lane)
        for lane in range(4)
        for k in range(12)
    ]
    img = FrameAnnotator(trails=False)(FrameResult(Frame(0, 0.0, _frame()), cars))
    changed = _changed(img)
    for c in cars:
        x1, y1, x2, y2 = (int(v) for v in c.xyxy)
        inside = changed[y1 + 3 : y2 - 3, x1 + 3 : x2 - 3]
        assert inside.mean() < 0.05, f"car #{c.track_id} is covered by a label ({inside.mean():.0%})"
    # label height: the changed rows right above an isolated car
    lone = _car(123, 900, 800, 91)
    img = FrameAnnotator(trails=False)(FrameResult(Frame(0, 0.0, _frame()), [lone]))
    above = _changed(img)[700:800, 700:1150]
    rows, cols = np.flatnonzero(above.any(axis=1)), np.flatnonzero(above.any(axis=0))
    label_h, label_w = 100 - rows.min(), cols.max() - cols.min() + 1
    assert 8 <= label_h <= 1.2 * 20, f"label {label_h} px tall for a 20 px car"
    assert label_w <= 2.5 * 40, f"label {label_w} px wide for a 40 px car"


def test_status_line_is_drawn_once():
    img = FrameAnnotator(speed_limit_kmh=80)(
        FrameResult(Frame(0, 1.5, _frame()), [_car(1, 900, 500, 60)], metres_per_pixel=0.05, scale_source="telemetry")
    )
    band = img[0:12, 0:300]
    darkened = GREY * 35 // 100
    # white text anti-aliased onto the darkened band: nothing darker than the band (no black outline copy)
    assert band.min() >= darkened - 1 and band.max() > 200
    assert (img[0:2, 0:200] == darkened).all()


def test_trails_follow_the_vehicles():
    ann = FrameAnnotator(fps=10, trail_s=2.0)
    for i in range(10):
        img = ann(FrameResult(Frame(i, i / 10, _frame()), [_car(1, 300 + 20 * i, 600, 50)]))
    colour = _bgr(sc.SPEED_COLOURS[2])
    behind = img[605:615, 330:460]  # the centre line where the car was, behind it
    assert (np.abs(behind.astype(int) - colour) <= 2).all(axis=2).any(axis=0).mean() > 0.8


def test_speeds_carry_their_sigma_and_violators_follow_the_two_sigma_rule():
    car = _car(5, 900, 500, 91.4, w=80, h=40)
    car.speed_sigma_kmh, car.speed_flag = 4.2, "low_confidence_scale"  # a size-prior speed: counts with its sigma
    assert label_text(car) == "#5 91+-4 km/h"
    assert label_text(car, compact=True) == "#5 91+-4"
    assert label_text(car, speed_limit_kmh=80) == "#5 91+-4 km/h !"  # 91.4 - 8.4 = 83 > 80
    assert label_text(car, speed_limit_kmh=85) == "#5 91+-4 km/h"  # 83 < 85: not sure enough
    img = FrameAnnotator(speed_limit_kmh=85, trails=False)(FrameResult(Frame(0, 0.0, _frame()), [car]))
    assert (np.abs(img[510:530, 900].astype(int) - _bgr(sc.SPEED_COLOURS[sc.speed_class(91.4)])) <= 2).all()
