"""Origin, destination and movement of each vehicle.

A vehicle's origin is the approach whose inbound corridor holds the start of its track, heading into the junction
(so a vehicle already queued on an approach when the flight began still gets its origin); its destination is the
approach whose outbound corridor holds the end of its track, heading out. The movement follows from the two
approaches' headings (the turn a driver makes between them), not from the track's own wiggles: left / through /
right / U-turn. Tracks without an origin or a destination are counted as ``entered_mid_view`` /
``left_mid_view`` / ``mid_view_only`` (parking manoeuvres, track fragments, the edges of the flight); vehicles that
never moved as ``stationary``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np

from tracking.study.approaches import (
    END_RUN_M,
    ObservedArea,
    angle_between,
    at_flight_end,
    at_flight_start,
    end_direction,
    heading_deg,
    moves,
)
from tracking.study.model import Approach, SmoothedTrack, StudyConfig, VehicleMovement

PARALLEL_EIGEN = 0.1  # per approach: below it the approach axes are too parallel to cross at a junction centre
# A vehicle that enters or leaves the view in the middle of a turn (an arm cut short by the frame) heads up to this
# far off its arm's heading where the view ends; it has turned at least MID_TURN_MIN_DEG within the view
MID_TURN_LAG_DEG = 90.0
MID_TURN_MIN_DEG = 20.0
# A vehicle in view at the flight's end before the junction's centre (a queue at a red light) has not made its turn,
# and one in view at its start past the centre may have turned there from any arm: the arm ahead of (behind) it is
# inferred only where at least this share of the flight's complete movements from (to) its known arm went that way,
# or none was seen. At the rendered junctions, where every arm's traffic divides, inferring it regardless named the
# wrong arm for a third of such vehicles (`bench/study.py`, `infer r/w`); on a motorway's carriageway it is the way on
INFER_MIN_SHARE = 0.9


def mid_turn_match(
    xy: np.ndarray,
    travel_deg: float,
    turn_deg: float,
    leaving: bool,
    approaches: list[Approach],
    centre: np.ndarray,
    cfg: StudyConfig,
) -> Approach | None:
    """For a track that starts (ends) at the edge of the view while turning: the approach whose corridor holds its
    start (end) and whose heading the turn comes from (goes on to), by less than ``MID_TURN_LAG_DEG``; the vehicle
    turns by ``turn_deg`` in view and heads ``travel_deg`` there. None unless exactly one approach fits."""
    if abs(turn_deg) < MID_TURN_MIN_DEG:
        return None

    def turning_towards(a: Approach) -> bool:
        # the rest of the turn: from the arm's inbound heading to the vehicle's, or from the vehicle's to the arm's
        # outbound heading; the same way round as the turn seen, and not more than the lag
        rest = signed_turn(travel_deg, a.heading_deg + 180.0) if leaving else signed_turn(a.heading_deg, travel_deg)
        return abs(rest) <= MID_TURN_LAG_DEG and rest * turn_deg > 0

    fits = [a for a in approaches if turning_towards(a) and corridor_across(xy, a, centre, cfg) is not None]
    return fits[0] if len(fits) == 1 else None


def _past(xy: np.ndarray, travel: np.ndarray, centre: np.ndarray) -> bool:
    """Whether ``xy`` lies beyond the junction's centre for a vehicle travelling along ``travel``."""
    return float((np.asarray(xy, float) - centre) @ travel) > 0.0


def _unambiguous(seen: Counter, known: str, guess: str, side: int) -> bool:
    """Whether the complete movements ``seen`` ((origin, destination) -> vehicles) leave ``guess`` as the approach
    paired with ``known`` (``side`` 0: ``known`` is the origin, the guess a destination; 1: the reverse): at least
    ``INFER_MIN_SHARE`` of those that share ``known`` pair it with ``guess``; true where none does (nothing says the
    traffic divides there)."""
    pairs = {k: n for k, n in seen.items() if k[side] == known}
    total = sum(pairs.values())
    hits = sum(n for k, n in pairs.items() if k[1 - side] == guess)
    return hits >= INFER_MIN_SHARE * total


def _travel_m(xy: np.ndarray) -> float:
    return float(np.sum(np.linalg.norm(np.diff(xy, axis=0), axis=1))) if len(xy) > 1 else 0.0


def signed_turn(from_deg: float, to_deg: float) -> float:
    """Heading change from ``from_deg`` to ``to_deg`` in (-180, 180]; positive = clockwise (a right turn)."""
    d = (to_deg - from_deg + 180.0) % 360.0 - 180.0
    return 180.0 if d == -180.0 else d


def classify_turn(turn_deg: float, cfg: StudyConfig) -> str:
    a = abs(turn_deg)
    if a < cfg.turn_through_deg:
        return "through"
    if a > cfg.turn_uturn_deg:
        return "u_turn"
    return "right" if turn_deg > 0 else "left"


def movement_between(origin: Approach, destination: Approach, cfg: StudyConfig) -> tuple[str, float]:
    """The movement from one approach to another and the heading change it implies."""
    if origin.id == destination.id:
        return "u_turn", 180.0
    turn = signed_turn(origin.heading_deg, (destination.heading_deg + 180.0) % 360.0)
    return classify_turn(turn, cfg), turn


def corridor_across(xy: np.ndarray, a: Approach, centre: np.ndarray, cfg: StudyConfig) -> float | None:
    """How far ``xy`` lies across approach ``a``'s corridor (from its point towards the centre of the junction,
    ``radius_m`` either side); None outside it."""
    axis = a.inbound
    rel = np.asarray(xy, float) - np.array([a.x, a.y])
    along = float(rel @ axis)
    across = abs(float(rel @ np.array([axis[1], -axis[0]])))
    reach = max(float((centre - np.array([a.x, a.y])) @ axis), 0.0)
    if across > a.radius_m or along < -2 * cfg.edge_margin_m or along > reach:
        return None
    return across


def corridor_match(
    xy: np.ndarray, inbound: np.ndarray, approaches: list[Approach], centre: np.ndarray, cfg: StudyConfig
) -> Approach | None:
    """The approach whose corridor holds ``xy`` and whose inbound heading agrees with ``inbound``; the nearest such
    one."""
    best, best_d = None, math.inf
    h = heading_deg(inbound)
    for a in approaches:
        if angle_between(h, a.heading_deg) > cfg.approach_heading_deg:
            continue
        across = corridor_across(xy, a, centre, cfg)
        if across is not None and across < best_d:
            best, best_d = a, across
    return best


def along_heading(xy: np.ndarray, inbound: np.ndarray, approaches: list[Approach], cfg: StudyConfig) -> Approach | None:
    """The one approach whose inbound heading agrees with ``inbound`` and whose point lies behind ``xy`` along it
    (against ``inbound``), within its ``radius_m`` of the line: for a vehicle travelling along ``inbound`` the
    approach it came from; for one travelling against it (``inbound`` = minus its travel direction), the approach it
    is heading out on. None where none or several qualify (ambiguous)."""
    h = heading_deg(inbound)
    found = []
    for a in approaches:
        if angle_between(h, a.heading_deg) > cfg.approach_heading_deg:
            continue
        rel = np.array([a.x, a.y]) - np.asarray(xy, float)  # from the vehicle to the approach point
        along = float(rel @ inbound)
        if along > 0:  # the approach lies upstream of the vehicle's inbound direction: it is behind (or ahead) it
            continue
        across = abs(float(rel @ np.array([inbound[1], -inbound[0]])))
        if across <= a.radius_m:
            found.append(a)
    return found[0] if len(found) == 1 else None


def junction_centre(approaches: list[Approach], area: ObservedArea) -> np.ndarray:
    """Where the approaches meet: the point nearest to all approach axes (least squares), else the area's centre."""
    if len(approaches) < 2:
        return area.centre
    A = np.zeros((2, 2))
    b = np.zeros(2)
    for a in approaches:
        n = np.array([a.inbound[1], -a.inbound[0]])[:, None]
        P = n @ n.T
        A += P
        b += P @ np.array([a.x, a.y])
    # (nearly) parallel axes, a straight road: no crossing point; the middle of the approaches
    if np.linalg.eigvalsh(A)[0] < PARALLEL_EIGEN * len(approaches):
        return np.mean([[a.x, a.y] for a in approaches], axis=0)
    c = np.linalg.solve(A, b)
    hull_c = area.centre
    return c if np.linalg.norm(c - hull_c) < 2 * max(np.ptp(area.points, axis=0).max(), 1.0) else hull_c


def assign_movements(
    smoothed: dict[int, SmoothedTrack],
    classes: dict[int, str],
    approaches: list[Approach],
    area: ObservedArea,
    t0: float,
    t1: float,
    cfg: StudyConfig,
) -> list[VehicleMovement]:
    """One :class:`VehicleMovement` per smoothed track (none is dropped)."""
    centre = junction_centre(approaches, area)
    out: list[VehicleMovement] = []
    guesses: dict[int, tuple[Approach | None, Approach | None]] = {}  # index in out -> (origin, destination) guessed
    for tid, s in smoothed.items():
        speed = s.speed
        mean_kmh = float(np.mean(speed) * 3.6) if len(speed) else 0.0
        start_edge = at_flight_start(s.t, s.xy, t0, area)
        end_edge = at_flight_end(s.t, s.xy, t1, area)
        origin = destination = None
        d_in = end_direction(s.xy, True)
        d_out = end_direction(s.xy, False)
        moving = moves(speed, cfg)
        if moving and d_in is not None:
            origin = corridor_match(s.xy[0], d_in, approaches, centre, cfg)
        if moving and d_out is not None:
            destination = corridor_match(s.xy[-1], -d_out, approaches, centre, cfg)
        origin_inferred = destination_inferred = False
        # already past its origin's corridor when the flight began (not yet in its destination's when it ended):
        # the one approach behind (ahead of) it by heading and lane, flagged as inferred; past the junction's centre
        # at the start (before it at the end) only where the flight's complete movements leave no doubt (below)
        guess: tuple[Approach | None, Approach | None] = (None, None)
        if moving and origin is None and start_edge and d_in is not None:
            origin = along_heading(s.xy[0], d_in, approaches, cfg)
            origin_inferred = origin is not None
            if origin is not None and _past(s.xy[0], d_in, centre):
                guess, origin, origin_inferred = (origin, None), None, False
        if moving and destination is None and end_edge and d_out is not None:
            destination = along_heading(s.xy[-1], -d_out, approaches, cfg)
            destination_inferred = destination is not None
            if destination is not None and not _past(s.xy[-1], d_out, centre):
                guess, destination, destination_inferred = (guess[0], destination), None, False
        if guess != (None, None):
            guesses[len(out)] = guess
        turn = 0.0
        if d_in is not None and d_out is not None:
            turn = signed_turn(heading_deg(d_in), heading_deg(d_out))
            if _travel_m(s.xy) < 2 * END_RUN_M:
                # the two ends' directions are taken over overlapping stretches of a short track and hide its turn
                # (seed 3's nadir intersection: right turners in view for 7-9 m, turning 30 degrees there, measured
                # 0-5): the smoothed headings at its two ends
                h = s.heading_deg
                turn = signed_turn(float(h[0]), float(h[-1]))
            # entered (left) the view at its edge in the middle of a turn: the arm the turn comes from (goes to),
            # flagged as inferred
            at_edge = area.edge_distance(np.stack([s.xy[0], s.xy[-1]])) < cfg.edge_margin_m
            if moving and origin is None and not start_edge and at_edge[0]:
                origin = mid_turn_match(s.xy[0], heading_deg(d_in), turn, False, approaches, centre, cfg)
                origin_inferred = origin is not None
            if moving and destination is None and not end_edge and at_edge[1]:
                destination = mid_turn_match(s.xy[-1], heading_deg(d_out), turn, True, approaches, centre, cfg)
                destination_inferred = destination is not None
        if not moving:
            movement = "stationary"
        elif origin is not None and destination is not None:
            movement, turn = movement_between(origin, destination, cfg)
        elif origin is not None:
            movement = "left_mid_view"
        elif destination is not None:
            movement = "entered_mid_view"
        else:
            movement = "mid_view_only"
        out.append(
            VehicleMovement(
                track_id=tid,
                vehicle_class=classes.get(tid, "car"),
                origin=origin.id if origin else None,
                destination=destination.id if destination else None,
                movement=movement,
                lane=None,
                entry_t=float(s.t[0]),
                exit_t=float(s.t[-1]),
                heading_change_deg=float(turn),
                mean_speed_kmh=mean_kmh,
                present_at_start=start_edge,
                present_at_end=end_edge,
                origin_inferred=origin_inferred,
                destination_inferred=destination_inferred,
                entry_xy=(float(s.xy[0, 0]), float(s.xy[0, 1])),
                exit_xy=(float(s.xy[-1, 0]), float(s.xy[-1, 1])),
            )
        )
    by_id = {a.id: a for a in approaches}
    seen = Counter((v.origin, v.destination) for v in out if v.origin is not None and v.destination is not None)
    for k, (origin_guess, destination_guess) in guesses.items():
        v = out[k]
        if (
            destination_guess is not None
            and v.origin is not None
            and _unambiguous(seen, v.origin, destination_guess.id, 0)
        ):
            v = dataclasses.replace(v, destination=destination_guess.id, destination_inferred=True)
        if (
            origin_guess is not None
            and v.destination is not None
            and _unambiguous(seen, v.destination, origin_guess.id, 1)
        ):
            v = dataclasses.replace(v, origin=origin_guess.id, origin_inferred=True)
        if v.origin is not None and v.destination is not None:
            movement, turn = movement_between(by_id[v.origin], by_id[v.destination], cfg)
            v = dataclasses.replace(v, movement=movement, heading_change_deg=float(turn))
        out[k] = v
    out.sort(key=lambda v: (v.entry_t, v.track_id))
    return out
