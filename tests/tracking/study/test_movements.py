"""The arm of a vehicle that enters or leaves the view in the middle of a turn (tracking/study/movements.py)."""

from __future__ import annotations

import numpy as np

from tracking.study.approaches import ObservedArea
from tracking.study.model import Approach, SmoothedTrack, StudyConfig
from tracking.study.movements import assign_movements, mid_turn_match

# a four-arm junction centred on (0, 0) whose south arm the view cuts short: its approach point lies 12 m south
ARMS = [
    Approach("a", "S", 0.0, -12.0, 0.0, 8.0),
    Approach("b", "E", 40.0, 0.0, 270.0, 8.0),
    Approach("c", "N", 0.0, 40.0, 180.0, 8.0),
    Approach("d", "W", -40.0, 0.0, 90.0, 8.0),
]
CENTRE = np.zeros(2)


def _leaving(xy, heading, turn):
    return mid_turn_match(np.array(xy, float), heading, turn, True, ARMS, CENTRE, StudyConfig())


def test_a_car_leaving_the_view_halfway_through_a_right_turn_gets_the_arm_it_turns_into():
    # from the west arm (heading east, 90 deg) turning right towards the south (180 deg): 60 deg turned when the
    # view ends at the south arm; the south arm's outbound heading is 30 deg further round, the same way
    found = _leaving((-3.0, -11.0), 150.0, 60.0)
    assert found is not None and found.name == "S"


def test_no_arm_for_a_car_not_turning_or_turning_away_from_it():
    assert _leaving((-3.0, -11.0), 150.0, 10.0) is None  # hardly turned in view: not a turn cut by the view
    assert _leaving((-3.0, -11.0), 150.0, -60.0) is None  # turning left: the south arm is not where it turns to
    assert _leaving((-3.0, -11.0), 60.0, 60.0) is None  # heading away from the south arm's way out by 120 deg
    assert _leaving((20.0, 20.0), 150.0, 60.0) is None  # in no arm's corridor


def test_a_car_entering_the_view_halfway_through_a_turn_gets_the_arm_it_came_from():
    # from the south arm (heading north, 0 deg) turning right towards the east: 40 deg turned where it is first seen
    found = mid_turn_match(np.array([3.0, -11.0]), 40.0, 50.0, False, ARMS, CENTRE, StudyConfig())
    assert found is not None and found.name == "S"
    assert mid_turn_match(np.array([3.0, -11.0]), 40.0, -50.0, False, ARMS, CENTRE, StudyConfig()) is None


def test_a_short_track_leaving_the_view_mid_turn_gets_the_arm_it_turns_into():
    # seed 3's nadir intersection: right turners tracked only for their last 7-9 m before the view's edge cut their
    # turn. Each end's direction is taken over 6 m of travel: on such a track the two stretches overlap and showed no
    # turn (0-5 degrees against 30 seen); the smoothed headings at its ends show it. Here: the last 11 m of an arc of
    # 20 m radius from the west arm towards the south, cut 38 degrees into the turn at the south arm's edge (y = -12)
    theta = np.radians(np.linspace(6.5, 38.0, 12))
    xy = np.column_stack([-15.0 + 20 * np.sin(theta), -27.76 + 20 * np.cos(theta)])
    velocity = 10.0 * np.column_stack([np.cos(theta), -np.sin(theta)])  # 10 m/s along the arc, heading 90 + theta
    track = SmoothedTrack(1, 50.0 + np.arange(12) * 0.1, xy, velocity, np.zeros_like(xy))
    area = ObservedArea(np.array([[-40.0, -12.0], [40.0, -12.0], [40.0, 40.0], [-40.0, 40.0]]))
    (vehicle,) = assign_movements({1: track}, {1: "car"}, ARMS, area, 0.0, 100.0, StudyConfig())
    assert vehicle.destination == "a" and vehicle.destination_inferred
    assert vehicle.origin == "d" and vehicle.movement == "right"  # it had come from the west arm
