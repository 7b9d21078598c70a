"""The matched "vehicles found" measure of the interchange benchmark (bench/real/track_match.py)."""

import numpy as np

from bench.real.track_match import match

FPS = 25.0


def _track(tid: int, frames: range, x0: float, y0: float, vx: float, size: float = 10.0) -> list[tuple]:
    return [(f, tid, x0 + vx * f, y0, x0 + vx * f + size, y0 + size / 2) for f in frames]


def test_a_track_on_a_reference_vehicle_is_found_and_an_invented_one_is_extra():
    reference = np.array(_track(1, range(1, 60), 100, 100, 2) + _track(2, range(1, 60), 500, 300, -2))
    # follows vehicle 1 a few pixels off; a second track where the reference has nothing
    candidate = np.array(_track(7, range(1, 60), 104, 102, 2) + _track(8, range(1, 60), 900, 700, 1))
    m = match(candidate, reference, FPS)
    assert m == {"tracks": 2, "reference_vehicles": 2, "found_matched": 1, "extra": 1}


def test_a_vehicle_split_into_two_tracks_is_found_once():
    reference = np.array(_track(1, range(1, 80), 100, 100, 2))
    candidate = np.array(_track(3, range(1, 40), 100, 100, 2) + _track(4, range(40, 80), 100, 100, 2))
    m = match(candidate, reference, FPS)
    assert m["found_matched"] == 1 and m["extra"] == 0 and m["tracks"] == 2


def test_tracks_shorter_than_a_second_and_tracks_that_only_cross_do_not_count():
    reference = np.array(_track(1, range(1, 60), 100, 100, 2))
    short = _track(5, range(1, 20), 100, 100, 2)  # 0.76 s at 25 fps
    # moves the other way: near the reference vehicle for a few frames only
    crossing = _track(6, range(1, 60), 220, 100, -2)
    m = match(np.array(short + crossing), reference, FPS)
    assert m["tracks"] == 1 and m["found_matched"] == 0 and m["extra"] == 1


def test_the_interchange_target_counts_matched_vehicles_not_any_track():
    """95 tracks >= 1 s against the reference's 104 would pass on the old count; only 80 of them follow a reference
    vehicle, so the 90 % target is missed."""
    from bench.real.__main__ import DUAL_CANDIDATES, leave_one_out, targets
    from tests.bench.test_real_bench import _r, _results

    res = _results(day={k: _r(64) for k in DUAL_CANDIDATES}, night={k: _r(70) for k in DUAL_CANDIDATES})
    matched = {"tracks": 95, "reference_vehicles": 104, "found_matched": 80, "extra": 15}
    res["interchange"] = {
        "plain": {"vehicles": 2, "cpu": 100.0, "matched": {**matched, "found_matched": 2}},
        "dual": {"vehicles": 95, "cpu": 240.0, "matched": matched},
        "native": {"vehicles": 104, "cpu": 900.0},
    }
    got = {what: (measured, ok) for what, measured, ok in targets(res, leave_one_out(res))}
    measured, ok = next(v for k, v in got.items() if k.startswith("1080p nadir interchange: >= 90"))
    assert ok is False and "80 of 104 found and matched" in measured and "15 extra" in measured
