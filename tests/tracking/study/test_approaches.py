"""Approaches from track ends (tracking/study/approaches.py)."""

from __future__ import annotations

import numpy as np

from tracking.study.approaches import ObservedArea, TrackEnd, cluster_approaches
from tracking.study.model import StudyConfig


def _ends_of_a_junction_whose_south_arm_the_frame_cuts_short(exits_apart_m: float):
    """Track ends of a four-arm junction: six entries and six exits on each of the north, east and west arms; the
    south arm's entries seen only as they curve in (heading 22 deg) and its exits as they curve out (their inbound
    heading 332 deg), the exits' centre ``exits_apart_m`` from the entries' (the nadir 60 m roundabout: 7 m)."""
    rng = np.random.default_rng(3)
    ends, tid = [], 0

    def add(xy, heading, is_entry):
        nonlocal tid
        h = np.radians(heading + rng.normal(0, 3))
        tid += 1
        ends.append(
            TrackEnd(
                tid, is_entry, np.array(xy, float) + rng.normal(0, 0.7, 2), np.array([np.sin(h), np.cos(h)]), float(tid)
            )
        )

    for k in range(6):
        for xy, heading in (((0.0, 39.0), 180.0), ((39.0, 0.0), 270.0), ((-39.0, 0.0), 90.0)):
            add(xy, heading, k % 2 == 0)
            add(xy, heading, k % 2 == 1)
        add((-1.5, -28.0), 22.0, True)
        south = np.array([-1.5 - exits_apart_m, -28.0])  # along the frame's bottom edge
        add(south, 332.0, False)
    return ends


def test_an_arm_cut_short_at_its_curves_in_and_out_is_one_approach():
    area = ObservedArea(np.array([[-40.0, -30.0], [40.0, -30.0], [40.0, 40.0], [-40.0, 40.0]]))
    found = cluster_approaches(_ends_of_a_junction_whose_south_arm_the_frame_cuts_short(7.0), area, StudyConfig())
    assert sorted(a.name for a in found) == ["E", "N", "S", "W"]
    (south,) = [a for a in found if a.name == "S"]
    assert np.hypot(south.x + 5.0, south.y + 28.0) < 2.0  # between the two halves
    # the ways in and out of two arms, 20 m apart: two approaches still
    apart = cluster_approaches(_ends_of_a_junction_whose_south_arm_the_frame_cuts_short(20.0), area, StudyConfig())
    assert len(apart) == 5
