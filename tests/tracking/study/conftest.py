"""A hand-built four-arm junction with known movements and lanes, for the study tests.

Right-hand traffic, arms along the axes, centre (0, 0); each arm has two inbound lanes (1.75 m and 5.25 m right of
the arm's axis) and two outbound ones; the observed area is the square |x|, |y| <= 60 m. Paths are built in the
frame of the south arm (inbound heading north) and rotated for the others.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracking.study import Trajectory

ARMS = {"S": 0.0, "E": 90.0, "N": 180.0, "W": 270.0}  # counter-clockwise rotation of the south-arm template
LANE_X = {1: 1.75, 2: 5.25}
VIEW = 60.0


def _bezier(p0, p1, p2, n=30):
    u = np.linspace(0, 1, n)[:, None]
    return (1 - u) ** 2 * np.asarray(p0) + 2 * (1 - u) * u * np.asarray(p1) + u**2 * np.asarray(p2)


def template(movement: str, lane: int) -> np.ndarray:
    """Waypoints of a vehicle entering from the south arm, in that arm's frame."""
    x = LANE_X[lane]
    if movement == "through":
        return np.array([[x, -90.0], [x, 90.0]])
    if movement == "right":  # to the east arm's outbound lane 2 (y = -5.25)
        return np.vstack([[[x, -90.0]], _bezier([x, -12.0], [x, -5.25], [12.0, -5.25]), [[90.0, -5.25]]])
    if movement == "left":  # to the west arm's outbound lane 1 (y = +1.75)
        return np.vstack([[[x, -90.0]], _bezier([x, -10.0], [x, 1.75], [-10.0, 1.75]), [[-90.0, 1.75]]])
    raise ValueError(movement)


def destination(origin: str, movement: str) -> str:
    order = ["S", "E", "N", "W"]  # counter-clockwise
    k = order.index(origin)
    return {"through": order[(k + 2) % 4], "right": order[(k + 1) % 4], "left": order[(k + 3) % 4]}[movement]


def drive(waypoints: np.ndarray, speed: float, t_start: float, dt: float = 0.1):
    """Constant-speed samples along the polyline, cut to the observed square."""
    seg = np.linalg.norm(np.diff(waypoints, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    q = np.arange(0.0, s[-1], speed * dt)
    xy = np.column_stack([np.interp(q, s, waypoints[:, 0]), np.interp(q, s, waypoints[:, 1])])
    t = t_start + np.arange(len(q)) * dt
    inside = (np.abs(xy) <= VIEW).all(axis=1)
    return t[inside], xy[inside]


def rotate(xy: np.ndarray, deg: float) -> np.ndarray:
    a = math.radians(deg)
    R = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return xy @ R.T


@pytest.fixture
def junction():
    """(trajectories, truth): 24 vehicles, every arm x {through lane 1, through lane 2, right lane 2, left lane 1}
    twice over, 8 s apart (no conflicts among them), 0.2 m position noise; truth[track_id] = (origin, destination,
    movement, lane)."""
    rng = np.random.default_rng(7)
    trajs, truth = [], {}
    plan = [("through", 1), ("through", 2), ("right", 2), ("left", 1)]
    tid = 1
    for rep in range(2):
        for arm, rot in ARMS.items():
            for movement, lane in plan:
                t, xy = drive(rotate(template(movement, lane), rot), 10.0, 8.0 * (tid - 1))
                xy = xy + rng.normal(0, 0.2, xy.shape)
                trajs.append(Trajectory(tid, "car", t, xy))
                truth[tid] = (arm, destination(arm, movement), movement, lane)
                tid += 1
    return trajs, truth
