"""bench/study.py: the study scored against the generator's truth on a short hovering intersection flight."""

from __future__ import annotations

import argparse

import pytest

from bench.study import score_case


@pytest.mark.slow
def test_short_intersection_flight_scores_against_truth():
    args = argparse.Namespace(seconds=100.0, fps=10.0, seed=1, noise_px=1.5, near_misses=3, ttc=1.5)
    r = score_case("intersection", -90.0, 60.0, args)
    assert r["vehicles"] > 10 and r["scored"] >= 5
    assert r["approaches"].startswith("4/4")
    # every scored count cell within the tolerance, every scored vehicle's O-D and lane right
    ok, total = (int(x) for x in r["cells_within"].split("/"))
    assert ok == total and total > 0
    assert r["od_correct"] == 1.0 and r["lane_correct"] == 1.0
