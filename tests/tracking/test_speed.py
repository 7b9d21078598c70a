import numpy as np
import pytest

from tracking.config import SpeedConfig
from tracking.scale import GroundFrame
from tracking.speed import SpeedEstimator
from tracking.types import ScaleSource


def _ground(mpp: float, source=ScaleSource.CALIBRATION) -> GroundFrame:
    return GroundFrame(np.array([[mpp, 0, 0], [0, -mpp, 0], [0, 0, 1.0]]), source, None)


def _run(est, positions_px, fps, ground, H_per_frame=None):
    out = None
    for k, p in enumerate(positions_px):
        out = est.update(k / fps, {1: tuple(p)}, ground, H_per_frame)
    return out[1]


def test_constant_speed_is_recovered():
    fps, mpp, v_kmh = 25.0, 0.1, 72.0  # 20 m/s = 200 px/s = 8 px/frame
    px_per_frame = v_kmh / 3.6 / mpp / fps
    pos = [(100 + k * px_per_frame, 300) for k in range(40)]
    r = _run(SpeedEstimator(SpeedConfig()), pos, fps, _ground(mpp))
    assert r.speed_kmh == pytest.approx(v_kmh, rel=1e-6)
    assert r.sigma_kmh == pytest.approx(0.03 * v_kmh, rel=0.05)  # only the calibration's scale uncertainty
    assert r.flag is None


def test_drone_drift_is_removed_by_ego_motion():
    """The camera pans 5 px/frame; in the image the car appears to move 8 - 5 px/frame, but the truth is 8."""
    fps, mpp = 25.0, 0.1
    H = np.array([[1, 0, -5.0], [0, 1, 0], [0, 0, 1]])  # previous frame -> current: content moves left 5 px
    pos = [(100 + k * (8 - 5), 300) for k in range(40)]
    r = _run(SpeedEstimator(SpeedConfig()), pos, fps, _ground(mpp), H)
    assert r.speed_kmh == pytest.approx(8 * mpp * fps * 3.6, rel=1e-6)


def test_noise_and_an_outlier_are_smoothed():
    rng = np.random.default_rng(0)
    fps, mpp = 30.0, 0.05
    px = 15 / mpp / fps  # 15 m/s
    pos = [(50 + k * px + rng.normal(0, 0.7), 200 + rng.normal(0, 0.7)) for k in range(45)]
    pos[-5] = (pos[-5][0] + 25, pos[-5][1])  # a box jump
    r = _run(SpeedEstimator(SpeedConfig()), pos, fps, _ground(mpp))
    assert abs(r.speed_kmh - 54.0) < 1.5
    assert r.sigma_kmh < 3.0


def test_short_track_has_no_speed_yet_and_stationary_is_zero():
    est = SpeedEstimator(SpeedConfig(min_track_s=0.4))
    r = _run(est, [(10, 10)] * 5, 25.0, _ground(0.1))
    assert r.speed_kmh is None and r.ground_xy is not None
    r = _run(SpeedEstimator(SpeedConfig()), [(10, 10)] * 30, 25.0, _ground(0.1))
    assert r.speed_kmh == pytest.approx(0.0, abs=1e-9)


def test_implausible_speed_is_flagged_and_size_prior_is_low_confidence():
    r = _run(SpeedEstimator(SpeedConfig()), [(k * 200.0, 0) for k in range(30)], 25.0, _ground(0.1))
    assert r.flag == "implausible_speed"  # 500 m/s
    r = _run(
        SpeedEstimator(SpeedConfig()), [(k * 2.0, 0) for k in range(30)], 25.0, _ground(0.1, ScaleSource.SIZE_PRIOR)
    )
    assert r.flag == "low_confidence_scale" and r.sigma_kmh > 0.1 * r.speed_kmh


def test_no_scale_no_speed():
    est = SpeedEstimator(SpeedConfig())
    r = None
    for k in range(30):
        r = est.update(k / 25, {3: (k * 2.0, 0)}, None)[3]
    assert r.speed_kmh is None and r.ground_xy is None


def test_histories_are_forgotten():
    est = SpeedEstimator(SpeedConfig())
    for k in range(10):
        est.update(k / 25, {k: (0, 0)}, _ground(0.1))
    est.update(10.0, {}, _ground(0.1))
    assert not est._hist


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_gives_the_same_numbers():
    pos = [(100 + k * 6.3 + (k % 3) * 0.4, 300 + k * 0.2) for k in range(40)]
    a = _run(SpeedEstimator(SpeedConfig(), "cpu"), pos, 25.0, _ground(0.08))
    b = _run(SpeedEstimator(SpeedConfig(), "cuda"), pos, 25.0, _ground(0.08))
    assert a.speed_kmh == pytest.approx(b.speed_kmh, abs=1e-9)
