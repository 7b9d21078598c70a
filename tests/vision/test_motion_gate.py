"""The moving-blob gate: consistent motion over several frames counts, jitter, registration noise and parallax do not."""

from __future__ import annotations

import numpy as np

from vision.motion_gate import MotionGateConfig, MovingBlobGate

FPS = 25.0


def _box(cx: float, cy: float, length: float = 12.0, width: float = 6.0) -> np.ndarray:
    return np.array([[cx - length / 2, cy - width / 2, cx + length / 2, cy + width / 2]])


def _shift(dx: float, dy: float = 0.0) -> np.ndarray:
    return np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], float)


def test_a_steady_mover_is_confirmed_after_min_frames():
    gate = MovingBlobGate()
    n = gate.config.min_frames
    out = [bool(gate.update(_box(50 + 2.0 * k, 40), np.eye(3), 0.3, FPS)[0]) for k in range(n + 3)]
    assert out[: n - 1] == [False] * (n - 1)  # not before it has been seen min_frames times
    assert all(out[n - 1 :])


def test_jitter_in_place_is_never_confirmed():
    gate = MovingBlobGate()
    rng = np.random.default_rng(0)
    out = [
        gate.update(_box(50 + rng.normal(0, 1.5), 40 + rng.normal(0, 1.5)), np.eye(3), 0.3, FPS)[0] for _ in range(40)
    ]
    assert not any(out)


def test_slow_drift_below_the_speed_floor_is_not_a_mover():
    gate = MovingBlobGate()
    # 12 px blob: floor 0.6 lengths/s = 0.29 px/frame at 25 fps; this drifts 0.1 px/frame
    out = [gate.update(_box(50 + 0.1 * k, 40), np.eye(3), 0.0, FPS)[0] for k in range(30)]
    assert not any(out)


def test_registration_residual_raises_the_floor():
    quiet, noisy = MovingBlobGate(), MovingBlobGate()
    out_quiet = [quiet.update(_box(50 + 1.0 * k, 40), np.eye(3), 0.2, FPS)[0] for k in range(10)]
    out_noisy = [noisy.update(_box(50 + 1.0 * k, 40), np.eye(3), 2.0, FPS)[0] for k in range(10)]
    assert any(out_quiet) and not any(out_noisy)


def test_a_static_point_under_a_panning_drone_is_not_a_mover():
    gate = MovingBlobGate()
    # the drone pans 3 px/frame; a static ground blob moves exactly with the ego-motion
    out = [gate.update(_box(100 - 3.0 * k, 40), _shift(-3.0), 0.3, FPS)[0] for k in range(30)]
    assert not any(out)


def test_parallax_along_the_drone_motion_is_rejected_but_a_vehicle_across_it_counts():
    roof, car = MovingBlobGate(), MovingBlobGate()
    # a roof drifts 25 % faster than the ground along the pan (parallax): compensated motion 1 px/frame along it
    out_roof = [roof.update(_box(200 - 5.0 * k, 40), _shift(-4.0), 0.3, FPS)[0] for k in range(30)]
    # a car crossing the pan direction at 1 px/frame (compensated)
    out_car = [car.update(_box(200 - 4.0 * k, 40 + 1.0 * k), _shift(-4.0), 0.3, FPS)[0] for k in range(30)]
    assert not any(out_roof)
    assert any(out_car)


def test_a_lost_registration_starts_histories_afresh():
    gate = MovingBlobGate(MotionGateConfig(min_frames=4))
    for k in range(6):
        gate.update(_box(50 + 2.0 * k, 40), np.eye(3), 0.3, FPS)
    assert not gate.update(_box(62, 40), None, 0.3, FPS)[0]  # no ego-motion: no comparable history


def test_two_movers_keep_their_own_histories():
    gate = MovingBlobGate()
    for k in range(8):
        blobs = np.concatenate([_box(50 + 2.0 * k, 40), _box(150, 90 - 2.0 * k)])
        out = gate.update(blobs, np.eye(3), 0.3, FPS)
    assert out.tolist() == [True, True]
