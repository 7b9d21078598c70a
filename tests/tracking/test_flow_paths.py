"""Links along the flight's own traffic (tracking/flow_paths.py): a vehicle hidden for seconds on a roundabout comes
back half a turn on, where neither its line nor its arc reaches; the way the other vehicles drove there joins it, and
only a start on that way, heading along it, is joined."""

from __future__ import annotations

import numpy as np

from tracking.flow_paths import FlowSamples, along_path
from tracking.linking import LinkingConfig, Piece, link_pieces

FPS = 10.0
CAR_PX = 40.0  # 4.5 m: 0.1125 m per px
R = 300.0  # circle radius, px (34 m)
CENTRE = np.array([600.0, 500.0])
OMEGA = 0.15  # rad/s: 45 px/s = 5 m/s on the circle


def _circle_piece(tid: int, t0: float, t1: float, phase: float = 0.0, radius: float = R) -> Piece:
    """A vehicle on the circle (anticlockwise in image coordinates), seen from t0 to t1; ``phase``: its angle at t=0."""
    t = np.arange(round(t0 * FPS), round(t1 * FPS) + 1) / FPS
    a = phase + OMEGA * t
    xy = CENTRE + radius * np.column_stack([np.cos(a), np.sin(a)])
    return Piece(tid, np.round(t * FPS).astype(int), t, xy, CAR_PX)


def _others() -> list[Piece]:
    # the traffic that shows the way: three other vehicles seen going round the whole circle at the time
    return [_circle_piece(100 + k, 0.0, 45.0, phase=0.5 + 2.1 * k) for k in range(3)]


def test_a_vehicle_hidden_for_seconds_on_the_circle_is_joined_along_the_others_way():
    # hidden for 6 s: 0.9 rad of the circle (52 deg), headings 52 deg apart, 4.8 m beside its line's prediction
    a = _circle_piece(1, 10.0, 14.0, phase=2.0)
    b = _circle_piece(2, 20.0, 24.0, phase=2.0)
    pieces = [a, b, *_others()]
    # (a hidden turn, one circular arc tangent to both ends, joins it too: tests/tracking/test_linking.py)
    alone = LinkingConfig(flow_paths=False, hidden_turns=False)
    assert link_pieces(pieces, alone)[2] == 2, "the line and the arc alone do not join it"
    assert link_pieces(pieces, LinkingConfig(hidden_turns=False))[2] == 1


def test_without_traffic_showing_the_way_only_a_hidden_turn_joins_it():
    a = _circle_piece(1, 10.0, 14.0, phase=2.0)
    b = _circle_piece(2, 20.0, 24.0, phase=2.0)
    assert link_pieces([a, b], LinkingConfig(hidden_turns=False))[2] == 2
    assert link_pieces([a, b], LinkingConfig())[2] == 1  # one arc of the circle is tangent to both ends


def test_a_start_off_the_way_or_against_it_is_not_joined():
    a = _circle_piece(1, 10.0, 14.0, phase=2.0)
    outer = _circle_piece(2, 20.0, 24.0, phase=2.0, radius=R + 60)  # 6.8 m outside the others' way
    t = np.arange(200, 241) / FPS  # driving the other way round, where the vehicle would be
    ang = 2.0 + OMEGA * 20.0 - OMEGA * (t - 20.0)
    against = Piece(
        3, np.round(t * FPS).astype(int), t, CENTRE + R * np.column_stack([np.cos(ang), np.sin(ang)]), CAR_PX
    )
    for b in (outer, against):
        assert link_pieces([a, b, *_others()], LinkingConfig())[b.track_id] == b.track_id


def test_the_path_follows_the_samples_and_stops_where_no_one_drove():
    others = _others()
    scale = [4.5 / CAR_PX] * len(others)
    samples = FlowSamples.of(others, scale, moving_mps=1.0)
    a = 2.0 + OMEGA * 14.0
    start = CENTRE + R * np.array([np.cos(a), np.sin(a)])
    heading = np.array([-np.sin(a), np.cos(a)])
    path = samples.path(start, heading, CAR_PX, 2000.0, owner=-1, t0=-1e9, t1=1e9)
    radii = np.hypot(*(path - CENTRE).T)
    assert len(path) > 20 and np.all(np.abs(radii - R) < 0.25 * CAR_PX), "it keeps to the circle"
    s, off, tangent = along_path(path, CENTRE + R * np.array([np.cos(a + 0.9), np.sin(a + 0.9)]))
    assert abs(s - R * 0.9) < CAR_PX and off < 0.25 * CAR_PX
    # outside the window of the samples' times, or off the traffic: no way at all
    assert len(samples.path(start, heading, CAR_PX, 2000.0, owner=-1, t0=1e5, t1=1e6)) == 1
    assert len(samples.path(start + 500, heading, CAR_PX, 2000.0, owner=-1, t0=-1e9, t1=1e9)) == 1


def _drive(tid: int, t0: float, points: list[tuple[float, float]], speed_px: float, stand_s: float = 0.0) -> Piece:
    """A vehicle from ``points[0]`` along the polyline at ``speed_px`` px/s, standing ``stand_s`` at its first corner."""
    pts = np.array(points, np.float64)
    seg = np.hypot(*np.diff(pts, axis=0).T)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    n = int((cum[-1] / speed_px + stand_s) * FPS) + 1
    t = t0 + np.arange(n) / FPS
    travel = np.minimum(np.arange(n) / FPS * speed_px, cum[1])  # to the first corner
    after = np.clip(np.arange(n) / FPS - stand_s - cum[1] / speed_px, 0, None) * speed_px
    s = np.where(np.arange(n) / FPS * speed_px < cum[1], travel, cum[1] + after)
    xy = np.column_stack([np.interp(s, cum, pts[:, 0]), np.interp(s, cum, pts[:, 1])])
    return Piece(tid, np.round(t * FPS).astype(int), t, xy, CAR_PX)


def _cut(p: Piece, tid: int, t0: float, t1: float) -> Piece:
    keep = (p.t >= t0) & (p.t <= t1)
    return Piece(tid, p.frames[keep], p.t[keep], p.xy[keep], p.length_px)


STOP, RIGHT_OUT, EAST_OUT = (500.0, 300.0), (560.0, 700.0), (1100.0, 300.0)
RIGHT_TURN = [(100.0, 300.0), STOP, (540.0, 320.0), (560.0, 360.0), RIGHT_OUT]  # stop line, then a right turn


def test_a_car_that_waited_and_turned_off_unseen_is_joined_along_a_turning_vehicles_way():
    # a car arrives from the west, waits 10 s at the stop line (its piece ends there), turns right unseen and is
    # found 4 s after leaving, heading south: its arrival line points east, so only a way others drove explains it
    # (lost 9.2 s: a gap from standing to moving beyond linking.max_moving_gap_s is not joined at all)
    car = _drive(1, 0.0, RIGHT_TURN, 45.0, stand_s=10.0)
    arrive, off = _cut(car, 1, 0.0, 14.0), _cut(car, 2, 23.2, 40.0)
    turners = [_cut(_drive(100 + k, 20.0 + 6 * k, RIGHT_TURN, 45.0), 100 + k, 0, 99) for k in range(2)]
    through = [
        _cut(_drive(110 + k, 14.0 + 6 * k, [(100.0, 300.0), STOP, EAST_OUT], 45.0), 110 + k, 0, 99) for k in range(2)
    ]
    no_departures = LinkingConfig(departure_max_mps=0)  # a departure (one turn after the stop line) explains it too
    assert link_pieces([arrive, off, *through], no_departures)[2] == 2, "no one turned there: not joined"
    assert (
        link_pieces([arrive, off, *through, *turners], no_departures.model_copy(update={"flow_paths": False}))[2] == 2
    )
    assert link_pieces([arrive, off, *through, *turners], no_departures)[2] == 1
    assert link_pieces([arrive, off, *through], LinkingConfig())[2] == 1, "set off and turned: a departure"


def _round_then_out(tid: int, t0: float, phase: float, exit_at: float | None, t1: float) -> Piece:
    """A vehicle on the circle from angle ``phase`` at ``t0``, leaving it along its tangent at angle ``exit_at``
    (None: it goes round), seen to ``t1``."""
    t = np.arange(round(t0 * FPS), round(t1 * FPS) + 1) / FPS
    a = phase + OMEGA * (t - t0)
    xy = CENTRE + R * np.column_stack([np.cos(a), np.sin(a)])
    if exit_at is not None:
        out = a > exit_at
        tangent = np.array([-np.sin(exit_at), np.cos(exit_at)])
        xy[out] = CENTRE + R * np.array([np.cos(exit_at), np.sin(exit_at)]) + np.outer((a[out] - exit_at) * R, tangent)
    return Piece(tid, np.round(t * FPS).astype(int), t, xy, CAR_PX)


def test_a_vehicle_lost_as_it_left_the_circle_is_joined_along_the_way_of_those_that_left_there():
    # most of the traffic goes round; two vehicles left the circle at angle 3.0 on its tangent. A vehicle seen on the
    # circle up to angle 2.6, hidden 6 s (it left at 3.0), is found driving out: the traffic's mean way there keeps to
    # the circle, the way of the vehicles that left reaches the start
    exit_at = 3.0
    car = _round_then_out(1, 0.0, 2.0, exit_at, 14.0)
    a, b = _cut(car, 1, 0.0, 4.0), _cut(car, 2, 10.0, 14.0)
    leavers = [_round_then_out(100 + k, 20.0 + 8 * k, 2.0, exit_at, 34.0 + 8 * k) for k in range(2)]
    rounders = [_circle_piece(110 + k, 0.0, 45.0, phase=0.5 + 2.1 * k) for k in range(3)]
    pieces = [a, b, *leavers, *rounders]
    only = LinkingConfig(hidden_turns=False, departure_max_mps=0)  # nothing but the ways others drove
    mean_only = only.model_copy(update={"vehicle_ways": False})
    assert link_pieces([a, b, *rounders], only)[2] == 2, "no one left there: not joined"
    assert link_pieces(pieces, mean_only)[2] == 2, "the mean way keeps to the circle"
    assert link_pieces(pieces, only)[2] == 1


def test_where_the_detector_loses_every_vehicle_the_ways_of_vehicles_joined_across_that_stretch_lead_on():
    # every vehicle leaving the circle is lost on the stretch from angle 2.75 to 2.975: no piece crosses it. Two that
    # left were lost only 1.5 s there (joined in the first round); the car, lost 6 s, is found 17 m out on the exit
    exit_at = 3.0
    car = _round_then_out(1, 0.0, 2.0, exit_at, 14.0)
    a, b = _cut(car, 1, 0.0, 4.0), _cut(car, 2, 10.0, 14.0)
    leavers = []
    for k in range(2):
        t0 = 20.0 + 8 * k
        whole = _round_then_out(100 + 2 * k, t0, 2.0, exit_at, t0 + 14.0)
        leavers += [_cut(whole, 100 + 2 * k, t0, t0 + 5.0), _cut(whole, 101 + 2 * k, t0 + 6.5, t0 + 14.0)]
    rounders = [_circle_piece(110 + k, 0.0, 45.0, phase=0.5 + 2.1 * k) for k in range(3)]
    only = LinkingConfig(hidden_turns=False, departure_max_mps=0)
    one_round = link_pieces([a, b, *leavers, *rounders], only.model_copy(update={"rounds": 1}))
    assert one_round[101] == 100 and one_round[103] == 102, "the leavers' short gaps are joined at once"
    assert one_round[2] == 2, "no piece's way crosses the stretch"
    assert link_pieces([a, b, *leavers, *rounders], only)[2] == 1, "the joined leavers' ways do"
