import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracking.study.smoothing import rts_smooth, thin


@settings(max_examples=25, deadline=None)
@given(
    speed=st.floats(2.0, 35.0),
    heading=st.floats(0.0, 2 * np.pi),
    accel=st.floats(-2.5, 2.5),
    noise=st.floats(0.05, 0.8),
    seed=st.integers(0, 2**16),
)
def test_rts_recovers_speed_and_acceleration_on_a_straight_path(speed, heading, accel, noise, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(0, 12, 0.1)
    along = speed * t + 0.5 * accel * t**2
    u = np.array([np.cos(heading), np.sin(heading)])
    truth = along[:, None] * u
    (pos, vel, acc) = rts_smooth([(t, truth + rng.normal(0, noise, truth.shape))], sigma_m=noise)[0]
    inner = slice(10, -10)  # the ends have only one side of data
    v_true = (speed + accel * t)[:, None] * u
    assert np.sqrt(np.mean((pos[inner] - truth[inner]) ** 2)) < noise
    assert np.median(np.linalg.norm(vel[inner] - v_true[inner], axis=1)) < 0.4 + 0.6 * noise
    assert abs(np.median(acc[inner] @ u) - accel) < 0.3 + 0.6 * noise


@settings(max_examples=20, deadline=None)
@given(radius=st.floats(12.0, 60.0), speed=st.floats(4.0, 15.0), seed=st.integers(0, 2**16))
def test_rts_keeps_speed_through_a_turn(radius, speed, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(0, 10, 0.1)
    ang = speed * t / radius
    truth = radius * np.column_stack([np.cos(ang), np.sin(ang)])
    pos, vel, acc = rts_smooth([(t, truth + rng.normal(0, 0.3, truth.shape))], sigma_m=0.3)[0]
    inner = slice(10, -10)
    assert np.median(np.abs(np.linalg.norm(vel[inner], axis=1) - speed)) < 0.5
    # centripetal acceleration v^2 / r, pointing at the centre
    a_c = np.linalg.norm(acc[inner], axis=1)
    assert abs(np.median(a_c) - speed**2 / radius) < 0.35 + 0.1 * speed**2 / radius


def test_tracks_of_different_lengths_are_smoothed_independently():
    t = np.arange(0, 5, 0.1)
    a = (t, np.column_stack([10 * t, np.zeros_like(t)]))
    b = (t[:7], np.column_stack([np.zeros(7), -5 * t[:7]]))
    out_ab = rts_smooth([a, b])
    out_a = rts_smooth([a])
    np.testing.assert_allclose(out_ab[0][0], out_a[0][0])
    assert out_ab[1][0].shape == (7, 2) and np.all(out_ab[1][1][:, 1] < 0)


def test_thin_keeps_samples_apart_and_drops_bad_ones():
    t = np.array([0.0, 0.04, 0.1, 0.1, np.nan, 0.25, 0.3])
    xy = np.zeros((7, 2))
    xy[6, 0] = np.nan
    tt, _ = thin(t, xy, 0.1)
    assert tt.tolist() == [0.0, 0.1, 0.25]
