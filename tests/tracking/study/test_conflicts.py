import numpy as np

from tracking.study.conflicts import ttc_conflicts
from tracking.study.model import SmoothedTrack, StudyConfig


def _queued(tid: int, y_stop: float, t: np.ndarray, creep: np.ndarray) -> SmoothedTrack:
    """A car that drove north up to ``y_stop`` by t = 5 s (10 m/s) and then stands there, its smoothed velocity after
    that ``creep`` (m/s, northwards): what a queued car's jittering boxes give it."""
    drove = t < 5.0
    y = np.where(drove, y_stop - 10.0 * (5.0 - t), y_stop)
    vy = np.where(drove, 10.0, creep)
    xy = np.column_stack([np.full_like(t, 1.75), y])
    return SmoothedTrack(tid, t, xy, np.column_stack([np.zeros_like(t), vy]), np.zeros((len(t), 2)))


def test_queued_cars_closer_than_their_positions_noise_have_no_ttc_but_a_car_closing_on_one_from_metres_back_has():
    """Two cars of a queue, their rectangles 0.4 m apart (closer than the tracked positions' noise, 0.5 m each), the
    rear one's smoothed velocity creeping at 0.8 m/s towards the front one for a few seconds (box jitter: seed 3's
    oblique intersection had 57 such false conflicts between vehicles under 10 km/h, TTCs of 0.05-0.15 s): no
    conflict, as for rectangles that overlap already. The same creep from 3 m back is one (TTC under 1.5 s at the
    instant it is 1.2 m away)."""
    t = np.arange(0.0, 20.0, 0.1)
    creep = np.where((t > 10.0) & (t < 13.0), 0.8, 0.0)
    front = _queued(1, 0.0, t, np.zeros_like(t))
    close = _queued(2, -(4.5 + 0.4), t, creep)
    cfg = StudyConfig(ttc_s=1.5)
    classes = {1: "car", 2: "car", 3: "car"}
    assert [c for c in ttc_conflicts({1: front, 2: close}, classes, 0.0, cfg) if c.kind == "ttc"] == []
    # from 3 m back, moving up 2.4 m at 0.8 m/s: the gap closes to 0.6 m, its TTC falls under 1.5 s on the way
    t_up = np.clip(t - 10.0, 0.0, 3.0)
    far = _queued(3, -(4.5 + 3.0), t, creep)
    far.xy[:, 1] += 0.8 * t_up
    found = ttc_conflicts({1: front, 3: far}, classes, 0.0, cfg)
    assert [(c.track_a, c.track_b) for c in found] == [(1, 3)]
    assert 0.5 < found[0].value_s <= 1.5
