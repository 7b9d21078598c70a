"""Traffic-study ground truth of a synthetic scene: each vehicle's entry and exit approach (arm), movement and lane,
the scene's arms, and the near-misses (time-to-collision conflicts) that really happened.

Arms: route start and end points (where the routes enter and leave the view, when given) with the same inbound
direction (a route's start direction, or its end direction reversed) and near each other; an arm's inbound heading
is the direction its routes start in (clockwise from north), its name the compass bearing of its ends from the
scene's centre (``net.target``). A route's movement is the turn from its
origin arm's inbound heading to its destination arm's outbound heading (< 45 deg through, > 135 deg U-turn, else
left/right), the definition the study uses (tracking.study.movements). Its lane is the rank of its start point's
lateral offset among the routes of its arm (1 = leftmost in the direction of travel).

Conflicts are computed from the exact simulated states (positions, headings, speeds and vehicle sizes), with the
study's definition of time to collision: constant-velocity extrapolation of the two vehicles' rectangles, first
overlap within ``ttc_s``, checked every 0.05 s; an episode of one pair (instants less than 1 s apart) is one
conflict, reported at its minimum. Independent code: the scene generator never imports the study.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vision.synth.roads import RoadNetwork
from vision.synth.vehicles import FrameStates, NearMiss, VehicleSpec

ARM_HEADING_DEG = 30.0
ARM_REACH_M = 45.0
ARM_PLACE_M = 5.0  # route ends closer than this leave (enter) the view at one place (a lane or so apart)
THROUGH_DEG, UTURN_DEG = 45.0, 135.0
COMPASS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")
TTC_STEP_S = 0.05


def bearing_deg(v) -> float:
    return math.degrees(math.atan2(float(v[0]), float(v[1]))) % 360.0


def _diff(a: float, b: float) -> float:
    return (b - a + 180.0) % 360.0 - 180.0


@dataclass
class Arm:
    name: str
    bearing_deg: float  # from the scene centre
    heading_deg: float  # inbound direction of travel
    centre: tuple[float, float]  # the scene centre
    point: tuple[float, float] = (0.0, 0.0)  # mean of the arm's route ends (in the view, when one was given)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "bearing_deg": round(self.bearing_deg, 1),
            "heading_deg": round(self.heading_deg, 1),
            "centre": [round(self.centre[0], 2), round(self.centre[1], 2)],
            "x_m": round(self.point[0], 2),
            "y_m": round(self.point[1], 2),
        }


@dataclass
class RouteTruth:
    origin: str
    destination: str
    movement: str
    lane: int


def _tangent(pts: np.ndarray, at_start: bool) -> np.ndarray:
    seg = pts[min(10, len(pts) - 1)] - pts[0] if at_start else pts[-1] - pts[max(len(pts) - 11, 0)]
    return seg / max(float(np.linalg.norm(seg)), 1e-9)


def _in_view(pts: np.ndarray, view: np.ndarray | None) -> np.ndarray:
    """The part of a route inside the view polygon (the whole route without one, or when it never enters it)."""
    if view is None:
        return pts
    import cv2

    poly = np.asarray(view, np.float32).reshape(-1, 1, 2)
    inside = np.array([cv2.pointPolygonTest(poly, (float(x), float(y)), False) >= 0 for x, y in pts[::4]])
    k = np.flatnonzero(inside) * 4
    if len(k) == 0:
        return pts
    return pts[k[0] : min(k[-1] + 1, len(pts))] if k[-1] - k[0] >= 12 else pts


def _ends(pts: np.ndarray, c: np.ndarray) -> list[tuple[bool, float, float, np.ndarray]]:
    """A route's start and end: (is_start, bearing from the centre, inbound heading, point)."""
    return [
        (True, bearing_deg(pts[0] - c), bearing_deg(_tangent(pts, True)), pts[0]),
        (False, bearing_deg(pts[-1] - c), bearing_deg(-_tangent(pts, False)), pts[-1]),
    ]


def _root(parent: list[int], a: int) -> int:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def _grouped(ends: list) -> list[int]:
    """Union-find parents of route ends: the same inbound heading (ARM_HEADING_DEG) near each other (ARM_REACH_M)."""
    parent = list(range(len(ends)))
    for a in range(len(ends)):
        for b in range(a + 1, len(ends)):
            near = float(np.linalg.norm(ends[a][4] - ends[b][4])) < ARM_REACH_M
            if near and abs(_diff(ends[a][3], ends[b][3])) < ARM_HEADING_DEG:
                parent[_root(parent, a)] = _root(parent, b)
    return parent


def route_truth(net: RoadNetwork, view: np.ndarray | None = None) -> tuple[list[Arm], list[RouteTruth]]:
    """The arms of the network and, per route, its origin, destination, movement and lane. With ``view`` (the
    ground polygon the camera sees), arms and movements are taken where the routes enter and leave it: a curved
    ramp is the approach it looks like in the view."""
    c = np.asarray(net.target, float)
    # (route, is_start, bearing, inbound heading, point): each route's start and end, in this order
    ends = [(r, *e) for r, route in enumerate(net.routes) for e in _ends(_in_view(route.pts, view), c)]
    # one arm: ends with the same inbound heading (within ARM_HEADING_DEG) near each other (ARM_REACH_M), chained
    parent = _grouped(ends)
    if view is not None:
        # A route the view cuts in the middle of a turn leaves it with a heading between its two arms' (a right turn
        # clipped by the view's corner). Where it leaves at the place another arm's routes leave (ARM_PLACE_M), and
        # both go on to the same arm beyond the view, it leaves by that arm: one road, not an arm of its own (seed 3's
        # nadir intersection: the N -> W right turners clipped 17 route points into frame 0's view, a fifth arm "NW"
        # 0.2 m from where the E -> W traffic leaves, while the video shows them leave along the W road)
        full = [
            (r, is_start, b, h, p) for r, route in enumerate(net.routes) for (is_start, b, h, p) in _ends(route.pts, c)
        ]
        beyond = _grouped(full)
        for a in range(len(ends)):
            for b in range(a + 1, len(ends)):
                same_kind = ends[a][1] == ends[b][1] and _root(beyond, a) == _root(beyond, b)
                if same_kind and float(np.linalg.norm(ends[a][4] - ends[b][4])) < ARM_PLACE_M:
                    parent[_root(parent, a)] = _root(parent, b)
    by_root: dict[int, list] = {}
    for a, e in enumerate(ends):
        by_root.setdefault(_root(parent, a), []).append(e)
    groups = sorted(by_root.values(), key=lambda g: bearing_deg(np.mean([e[4] for e in g], axis=0) - c))
    arms: list[Arm] = []
    arm_of: dict[tuple[int, bool], int] = {}
    used: dict[str, int] = {}
    for k, g in enumerate(groups):
        point = np.mean([e[4] for e in g], axis=0)
        bearing = bearing_deg(point - c)
        starts = [e for e in g if e[1]] or g
        h = (
            math.degrees(
                math.atan2(
                    *np.mean([[math.sin(math.radians(e[3])), math.cos(math.radians(e[3]))] for e in starts], axis=0)
                )
            )
            % 360
        )
        name = COMPASS[int(((bearing + 22.5) % 360) // 45)]
        used[name] = used.get(name, 0) + 1
        label = name if used[name] == 1 else f"{name}{used[name]}"
        arms.append(Arm(label, bearing, h, (float(c[0]), float(c[1])), (float(point[0]), float(point[1]))))
        for e in g:
            arm_of[(e[0], e[1])] = k
    routes = []
    for r, route in enumerate(net.routes):
        o, d = arms[arm_of[(r, True)]], arms[arm_of[(r, False)]]
        if o is d:
            movement = "u_turn"
        else:
            turn = _diff(o.heading_deg, (d.heading_deg + 180.0) % 360.0)
            movement = (
                "through"
                if abs(turn) < THROUGH_DEG
                else "u_turn"
                if abs(turn) > UTURN_DEG
                else ("right" if turn > 0 else "left")
            )
        routes.append(RouteTruth(o.name, d.name, movement, 0))
    # lanes: rank of the start offset (to the right of the inbound heading) among the routes of an arm
    for arm in arms:
        h = math.radians(arm.heading_deg)
        right = np.array([math.cos(h), -math.sin(h)])
        members = [r for r, rt in enumerate(routes) if rt.origin == arm.name]
        offs = {r: round(float((_in_view(net.routes[r].pts, view)[0] - c) @ right) * 2) / 2 for r in members}
        levels = sorted(set(offs.values()))
        merged: list[float] = []
        for v in levels:  # starts closer than 1.5 m apart are the same lane
            if not merged or v - merged[-1] > 1.5:
                merged.append(v)
        for r in members:
            routes[r].lane = 1 + int(np.argmin([abs(offs[r] - m) for m in merged]))
    return arms, routes


@dataclass
class VehicleTruth:
    origin: str
    destination: str
    movement: str
    lane: int  # of the route the vehicle drove on when first seen
    first_frame: int  # 0-based, first frame it is visible
    last_frame: int
    entered_in_view: bool  # came into view during the clip (not there at frame 1)
    left_in_view: bool  # left the view during the clip

    def as_dict(self) -> dict:
        return {
            "origin": self.origin,
            "destination": self.destination,
            "movement": self.movement,
            "lane": self.lane,
            "entered_during_clip": self.entered_in_view,
            "left_during_clip": self.left_in_view,
        }


def vehicle_truth(
    net: RoadNetwork, frames: list[FrameStates], visible: list[set[int]], routes: list[RouteTruth] | None = None
) -> dict[int, VehicleTruth]:
    """Per simulation vehicle id (only vehicles visible in some frame)."""
    if routes is None:
        routes = route_truth(net)[1]
    first: dict[int, tuple[int, int]] = {}
    last: dict[int, int] = {}
    for i, st in enumerate(frames):
        vis = visible[i]
        for v, r in zip(st.vid.tolist(), (st.route if st.route is not None else np.zeros(len(st.vid), int)).tolist()):
            if v in vis:
                first.setdefault(v, (i, int(r)))
                last[v] = i
    # a vehicle's whole route: its route at first sight may be a lane it changed to; the origin/destination/movement
    # come from the route it was spawned on and the lane from the route it drives when first seen
    spawn_route: dict[int, int] = {}
    for st in frames:
        if st.route is None:
            continue
        for v, r in zip(st.vid.tolist(), st.route.tolist()):
            spawn_route.setdefault(v, int(r))
    out = {}
    n = len(frames)
    for v, (f0, r_seen) in first.items():
        rt = routes[spawn_route.get(v, r_seen)]
        out[v] = VehicleTruth(
            rt.origin, rt.destination, rt.movement, routes[r_seen].lane, f0, last[v], f0 > 0, last[v] < n - 1
        )
    return out


def _overlap(ca, ha, la, wa, cb, hb, lb, wb) -> np.ndarray:
    """Oriented rectangles overlap (separating axis theorem), vectorised over pairs."""
    d = cb - ca
    sep = np.zeros(len(ca), bool)
    for ax in (ha, np.column_stack([-ha[:, 1], ha[:, 0]]), hb, np.column_stack([-hb[:, 1], hb[:, 0]])):
        ra = 0.5 * (la * np.abs((ha * ax).sum(1)) + wa * np.abs(ha[:, 0] * ax[:, 1] - ha[:, 1] * ax[:, 0]))
        rb = 0.5 * (lb * np.abs((hb * ax).sum(1)) + wb * np.abs(hb[:, 0] * ax[:, 1] - hb[:, 1] * ax[:, 0]))
        sep |= np.abs((d * ax).sum(1)) > ra + rb
    return ~sep


@dataclass
class TruthConflict:
    kind: str
    value_s: float
    frame: int
    t: float
    x: float
    y: float
    a: int  # simulation vehicle ids
    b: int
    scripted: bool = False
    extra: dict = field(default_factory=dict)


def ttc_conflicts(
    frames: list[FrameStates],
    specs: dict[int, VehicleSpec],
    fps: float,
    visible: list[set[int]] | None = None,
    ttc_s: float = 1.5,
    max_range_m: float = 60.0,
    near_misses: list[NearMiss] | None = None,
) -> list[TruthConflict]:
    """Time-to-collision conflicts between vehicles both visible, from the exact states (see the module doc)."""
    hits: dict[tuple[int, int], list[tuple[int, float, float, float]]] = {}
    for f, st in enumerate(frames):
        keep = (
            np.array([v in visible[f] for v in st.vid.tolist()], bool)
            if visible is not None
            else np.ones(len(st.vid), bool)
        )
        if keep.sum() < 2:
            continue
        vid = st.vid[keep]
        p = np.column_stack([st.x[keep], st.y[keep]])
        h = np.column_stack([np.cos(st.heading[keep]), np.sin(st.heading[keep])])
        vel = h * st.speed[keep][:, None]
        size = np.array([[specs[int(v)].length, specs[int(v)].width] for v in vid])
        i, j = np.triu_indices(len(vid), 1)
        rel = p[j] - p[i]
        dist = np.linalg.norm(rel, axis=1)
        rv = vel[j] - vel[i]
        closing = (rel * rv).sum(1) < 0
        reach = dist - np.linalg.norm(rv, axis=1) * ttc_s
        rad = 0.5 * np.hypot(size[:, 0], size[:, 1])
        m = (dist < max_range_m) & closing & (reach < rad[i] + rad[j])
        i, j = i[m], j[m]
        if not len(i):
            continue
        la, wa, lb, wb = size[i, 0], size[i, 1], size[j, 0], size[j, 1]
        now = _overlap(p[i], h[i], la, wa, p[j], h[j], lb, wb)
        ttc = np.full(len(i), np.inf)
        for tau in np.arange(TTC_STEP_S, ttc_s + 1e-9, TTC_STEP_S):
            todo = np.isinf(ttc) & ~now
            if not todo.any():
                break
            hit = _overlap(p[i] + vel[i] * tau, h[i], la, wa, p[j] + vel[j] * tau, h[j], lb, wb)
            ttc[todo & hit] = tau
        for n in np.flatnonzero(np.isfinite(ttc) & ~now).tolist():
            a, b = int(vid[i[n]]), int(vid[j[n]])
            c = (p[i[n]] + vel[i[n]] * ttc[n] + p[j[n]] + vel[j[n]] * ttc[n]) / 2
            hits.setdefault((min(a, b), max(a, b)), []).append((f, float(ttc[n]), float(c[0]), float(c[1])))
    scripted = {(min(nm.follower, nm.leader), max(nm.follower, nm.leader)) for nm in near_misses or []}
    out = []
    for (a, b), items in hits.items():
        episode: list[tuple[int, float, float, float]] = []
        for item in items + [(-1, 0.0, 0.0, 0.0)]:
            if episode and (item[0] < 0 or (item[0] - episode[-1][0]) / fps > 1.0):
                f, value, x, y = min(episode, key=lambda e: e[1])
                out.append(TruthConflict("ttc", value, f, f / fps, x, y, a, b, (a, b) in scripted))
                episode = []
            if item[0] >= 0:
                episode.append(item)
    return sorted(out, key=lambda c: (c.t, c.a, c.b))
