"""The horizon of an oblique view from the vanishing point of the road's lines: drawn views whose horizon is known,
a nadir view (parallel lines: no horizon), and the real toll-plaza clip (skipped without ../shared)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.conftest import shared_path
from tracking.horizon import estimate_horizon, search_in_background

W, H = 1280, 720
F_PX = max(W, H) * 24 / 34.6


def _road_lines(vp_x: float, vp_y: float, seed: int = 0) -> np.ndarray:
    """Asphalt with lane markings and road edges converging on (vp_x, vp_y), a few lines in other directions
    (a crossing road, lateral stop lines) and sensor noise."""
    rng = np.random.default_rng(seed)
    img = np.clip(rng.normal(100, 5, (H, W, 3)), 0, 255).astype(np.uint8)
    for x_bottom in np.linspace(-300, W + 300, 9):
        # from the bottom edge towards the vanishing point, stopping 40 % of the way (the far road is out of view)
        p0 = np.array([x_bottom, H + 10.0])
        p1 = p0 + 0.6 * (np.array([vp_x, vp_y]) - p0)
        cv2.line(img, tuple(np.round(p0).astype(int)), tuple(np.round(p1).astype(int)), (230, 230, 230), 3, cv2.LINE_AA)
    cv2.line(img, (0, 300), (W, 420), (220, 220, 220), 3, cv2.LINE_AA)  # crossing road
    for y in (500, 600):
        cv2.line(img, (200, y), (700, y), (220, 220, 220), 4, cv2.LINE_AA)  # lateral stop lines
    return img


@pytest.mark.parametrize("vp_x, vp_y", [(640.0, -400.0), (500.0, 150.0), (900.0, -1200.0)])
def test_horizon_row_from_converging_road_lines(vp_x, vp_y):
    hz = estimate_horizon(_road_lines(vp_x, vp_y), F_PX)
    assert hz is not None
    # a few pixels at a vanishing point near the frame, ~1 % of its distance for one far above it
    assert hz.row == pytest.approx(vp_y, abs=max(6.0, 0.015 * abs(vp_y - H / 2)))


def test_parallel_lines_of_a_nadir_view_give_no_horizon():
    rng = np.random.default_rng(1)
    img = np.clip(rng.normal(100, 5, (H, W, 3)), 0, 255).astype(np.uint8)
    for x in range(100, W, 150):  # lanes straight down the frame, a diagonal ramp, a crossing road
        cv2.line(img, (x, 0), (x + 40, H), (230, 230, 230), 3, cv2.LINE_AA)
    cv2.line(img, (0, 700), (900, 0), (220, 220, 220), 3, cv2.LINE_AA)
    cv2.line(img, (0, 200), (W, 260), (220, 220, 220), 3, cv2.LINE_AA)
    assert estimate_horizon(img, F_PX) is None
    # lines meeting below the image centre (building edges of an oblique view point at the nadir) are no horizon
    below = _road_lines(640.0, 1500.0)
    assert estimate_horizon(below, F_PX) is None


def test_real_toll_plaza_horizon_is_where_the_motorway_meets_the_sky():
    clip = shared_path("data", "real_video", "toll_plaza", "247589_medium.mp4")
    cap = cv2.VideoCapture(str(clip))
    rows = []
    for i in range(0, 250, 50):
        cap.set(cv2.CAP_PROP_POS_FRAMES, i)
        ok, frame = cap.read()
        assert ok
        hz = estimate_horizon(frame, max(frame.shape[:2]) * 24 / 34.6)
        assert search_in_background(frame, max(frame.shape[:2]) * 24 / 34.6).result(timeout=30) == hz  # same search
        if hz is not None:
            rows.append(hz.row)
    cap.release()
    assert len(rows) >= 3
    # the far end of the motorway and the distant fields meet the sky at about 13 % of the 1280-px height
    assert 120 <= float(np.median(rows)) <= 220
