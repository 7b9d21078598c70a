"""A recorded flight at a high frame rate (tracking/frame_rate.py): which frames are analysed, and the frames between
get each track both neighbours report, interpolated where the vehicle was (the drone's motion taken out)."""

from __future__ import annotations

import numpy as np
import pytest

from tracking.frame_rate import AnalysisRateConfig, analysed, analysis_step, with_between
from tracking.types import INTERPOLATED, FrameResult, TrackState
from vision.types import Frame


@pytest.mark.parametrize(
    ("fps", "size", "step"),
    [
        (30.0, (1920, 1080), 2),
        (29.97, (1920, 1080), 2),
        (25.0, (1920, 1080), 2),  # 12.5 frames a second: a constant step, not 15 of every 25
        (60.0, (3840, 2160), 4),
        (20.0, (1920, 1080), 1),
        (15.0, (1920, 1080), 1),
        (10.0, (3840, 2160), 1),
        (30.0, (1024, 540), 1),  # UAVDT: 720p and smaller keep every frame
        (30.0, (720, 1280), 1),  # a portrait 720p clip too
    ],
)
def test_the_step_keeps_at_most_max_fps_on_frames_larger_than_720p(fps, size, step):
    assert analysis_step(fps, size[0], size[1], AnalysisRateConfig()) == step


def test_every_frame_when_asked():
    assert analysis_step(60.0, 3840, 2160, AnalysisRateConfig(max_fps=None)) == 1
    assert analysis_step(30.0, 1024, 540, AnalysisRateConfig(full_rate_up_to_px=0)) == 2


def test_analysed_frames_and_the_ones_between():
    frames = [Frame(i, i / 30, np.full((4, 4, 3), i, np.uint8)) for i in range(10)]
    between: list[Frame] = []
    kept = list(analysed(frames, 3, between))
    assert [f.index for f in kept] == [0, 3, 6, 9]
    assert kept[1].image is frames[3].image
    assert [f.index for f in between] == [1, 2, 4, 5, 7, 8]
    assert all(f.image.size == 0 and f.t == pytest.approx(f.index / 30) for f in between)


def _drift(dx: float) -> np.ndarray:
    """This frame's pixels -> the first frame's, for a drone that has drifted ``dx`` px to the right."""
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def _car(tid: int, x: float, frame: int) -> TrackState:
    return TrackState(
        tid, np.array([x, 200, x + 30, 216], np.float32), 0.9, 0, speed_kmh=50.0, ground_xy=(x / 10, 20.0)
    )


def test_between_frames_get_the_tracks_both_ends_report_where_the_vehicle_was():
    # analysed frames 0 and 3 of a 30 fps flight; the drone drifts 3 px a frame to the right (the scene moves left in
    # the image) while car 1 drives 12 px a frame to the right on the ground: 9 px a frame in the image
    a = FrameResult(
        Frame(0, 0.0, np.zeros((0, 0, 3), np.uint8)), [_car(1, 100, 0), _car(2, 500, 0)], to_first=_drift(0)
    )
    b = FrameResult(Frame(3, 0.1, np.zeros((0, 0, 3), np.uint8)), [_car(1, 127, 3)], to_first=_drift(9))
    between = [Frame(i, i / 30, np.zeros((0, 0, 3), np.uint8)) for i in (1, 2, 4)]
    out, owner = with_between([a, b], between)
    assert [r.frame.index for r in out] == [0, 1, 2, 3, 4]
    assert owner == [0, 0, 0, 1, 1]
    for k in (1, 2):
        (car,) = out[k].tracks  # car 2 was not on frame 3: it is on neither frame between
        assert car.track_id == 1
        assert float(car.xyxy[0]) == pytest.approx(100 + 9 * k, abs=1e-3)
        assert not car.measured and car.speed_kmh is None and car.speed_flag == INTERPOLATED
        assert car.ground_xy == pytest.approx(((100 + 9 * k * 1.0) / 10, 20.0), abs=1e-6)
        np.testing.assert_allclose(out[k].to_first, _drift(3 * k), atol=1e-9)
    assert out[4].tracks == []  # after the last analysed frame: nothing to interpolate towards
    assert out[0] is a and out[3] is b
