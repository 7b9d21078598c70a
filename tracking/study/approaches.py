"""Approaches (legs of the junction) from where tracks enter and leave the observed area.

Each track end gives an event: a position and the direction *into* the junction (a track's first heading, or the
reverse of its last). Events are clustered by position and heading (average-linkage on scaled coordinates, scipy);
clusters with few events or far from the edge of the observed area are dropped (parking, track fragments), and so
are clusters whose direction into the junction points away from the observed area's centre (pieces found again on
an arm's way out, heading out; pieces lost on its way in). Two clusters with the same inbound heading are merged into
one approach when they are the inbound and outbound halves of a wide road (a dual carriageway) side by side, or lie
on one line along the arm (a far arm's track ends spread along it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial import ConvexHull, QhullError

from tracking.study.model import Approach, SmoothedTrack, StudyConfig, Trajectory

END_RUN_M = 6.0  # the heading of a track end is taken over this much travel
HALF_SHARE = 0.8  # a cluster of this share of entries (or of exits) is one half of a dual carriageway
SAME_ARM_ACROSS_M = 5.0  # two clusters heading alike this close across their heading lie on one arm's lanes
# an entries-only and an exits-only cluster this close are one arm's ways in and out, a lane or a splitter island
# apart, whatever their headings (up to CUT_HALVES_DEG apart): where the frame cuts an arm short at a roundabout, its
# vehicles are seen only while they curve into the ring and out of it (the nadir 60 m roundabout: its south arm's
# entries headed 22 degrees, its exits 50 degrees off them, their centres 7 m apart, and made two approaches)
CUT_HALVES_M = 10.0
CUT_HALVES_DEG = 90.0
COMPASS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")


@dataclass
class TrackEnd:
    track_id: int
    is_entry: bool
    xy: np.ndarray  # (2,)
    inbound: np.ndarray  # unit vector into the junction: travel direction at an entry, its reverse at an exit
    t: float


def heading_deg(v: np.ndarray) -> float:
    """Direction of a ground vector, clockwise from north."""
    return math.degrees(math.atan2(float(v[0]), float(v[1]))) % 360.0


def angle_between(a_deg: float, b_deg: float) -> float:
    """Absolute difference of two headings, 0..180."""
    return abs((a_deg - b_deg + 180.0) % 360.0 - 180.0)


def end_direction(xy: np.ndarray, from_start: bool) -> np.ndarray | None:
    """Unit direction of travel over the first (or last) ``END_RUN_M`` metres; None for a track that barely moved."""
    pts = xy if from_start else xy[::-1]
    d = np.linalg.norm(pts - pts[0], axis=1)
    far = np.flatnonzero(d >= END_RUN_M)
    if len(far) == 0:
        return None
    v = pts[far[0]] - pts[0]
    v = v / np.linalg.norm(v)
    return v if from_start else -v


FLIGHT_EDGE_S = 0.5  # a track starting (ending) this close to the flight's start (end) did not enter (leave) there
# A track starting later may not have entered either: the tracker confirms a car that waits, or one the detector
# boxes now and then, seconds into the flight. It entered only where it could have driven from the edge of the view
# to where it was first seen since the flight began: at its first speed, having slowed down at most this hard (a car
# braking for a queue); the same backwards for a track's end
BRAKING_MPS2 = 3.0
FIRST_SPAN_S = 1.0  # a track's first (last) speed: its mean over this long


def _mean_speed(t: np.ndarray, xy: np.ndarray, from_start: bool) -> float:
    """Mean ground speed over the track's first (last) ``FIRST_SPAN_S``, m/s."""
    if from_start:
        i, j = 0, min(max(int(np.searchsorted(t, t[0] + FIRST_SPAN_S)), 1), len(t) - 1)
    else:
        i, j = min(int(np.searchsorted(t, t[-1] - FIRST_SPAN_S)), len(t) - 2), len(t) - 1
    dt = float(t[j] - t[i])
    return float(np.linalg.norm(xy[j] - xy[i])) / dt if dt > 0 else 0.0


def _reach_m(speed: float, dt: float) -> float:
    """How far a vehicle seen at ``speed`` can have come in ``dt`` (it slowed down at most ``BRAKING_MPS2``)."""
    return speed * dt + 0.5 * BRAKING_MPS2 * dt * dt


def at_flight_start(t: np.ndarray, xy: np.ndarray, t0: float, area: ObservedArea) -> bool:
    """The track was there when the flight began: it starts within ``FLIGHT_EDGE_S`` of ``t0``, or where it could not
    have driven to from the edge of the observed area since ``t0``."""
    dt = float(t[0]) - t0
    if dt <= FLIGHT_EDGE_S:
        return True
    return float(area.edge_distance(xy[0])[0]) > _reach_m(_mean_speed(t, xy, True), dt)


def at_flight_end(t: np.ndarray, xy: np.ndarray, t1: float, area: ObservedArea) -> bool:
    """The track was still there when the flight ended (as :func:`at_flight_start`, towards ``t1``)."""
    dt = t1 - float(t[-1])
    if dt <= FLIGHT_EDGE_S:
        return True
    return float(area.edge_distance(xy[-1])[0]) > _reach_m(_mean_speed(t, xy, False), dt)


def track_ends(tracks: list[tuple[int, np.ndarray, np.ndarray]], area: ObservedArea) -> list[TrackEnd]:
    """Entry and exit events of ``(track_id, t, xy)`` tracks that moved at least ``END_RUN_M``; a track already
    there when the flight began (still there when it ended) has no entry (exit) event: it did not cross the edge
    of the view there, the flight just started (stopped) filming it."""
    if not tracks:
        return []
    t0 = min(float(t[0]) for _, t, _ in tracks)
    t1 = max(float(t[-1]) for _, t, _ in tracks)
    out = []
    for tid, t, xy in tracks:
        d_in = end_direction(xy, True)
        if d_in is None:
            continue
        d_out = end_direction(xy, False)
        if not at_flight_start(t, xy, t0, area):
            out.append(TrackEnd(tid, True, xy[0].copy(), d_in, float(t[0])))
        if d_out is not None and not at_flight_end(t, xy, t1, area):
            out.append(TrackEnd(tid, False, xy[-1].copy(), -d_out, float(t[-1])))
    return out


class ObservedArea:
    """The convex hull of everything tracked: the part of the ground the flight saw (and tracked traffic on)."""

    def __init__(self, points: np.ndarray):
        pts = np.asarray(points, np.float64).reshape(-1, 2)
        self.points = pts
        self.hull: np.ndarray | None = None
        if len(pts) >= 3:
            try:
                self.hull = pts[ConvexHull(pts).vertices]
            except QhullError:
                self.hull = None
        self.centre = pts.mean(axis=0) if len(pts) else np.zeros(2)

    def edge_distance(self, xy: np.ndarray) -> np.ndarray:
        """Distance of points to the hull boundary (positive inside, negative outside)."""
        xy = np.asarray(xy, np.float64).reshape(-1, 2)
        if self.hull is None:
            return np.zeros(len(xy))
        a = self.hull
        b = np.roll(a, -1, axis=0)
        ab = b - a
        # signed distance to each edge line (hull vertices are counter-clockwise: inside is to the left)
        cross = ab[None, :, 0] * (xy[:, None, 1] - a[None, :, 1]) - ab[None, :, 1] * (xy[:, None, 0] - a[None, :, 0])
        side = cross / np.maximum(np.linalg.norm(ab, axis=1), 1e-9)[None, :]
        inside = (side >= 0).all(axis=1)
        ap = xy[:, None, :] - a[None, :, :]
        u = np.clip(np.einsum("nki,ki->nk", ap, ab) / np.maximum(np.einsum("ki,ki->k", ab, ab), 1e-9), 0, 1)
        d = np.linalg.norm(ap - u[..., None] * ab[None], axis=2).min(axis=1)
        return np.where(inside, d, -d)


def _compass(v: np.ndarray) -> str:
    return COMPASS[int(((heading_deg(v) + 22.5) % 360) // 45)]


def cluster_approaches(ends: list[TrackEnd], area: ObservedArea, cfg: StudyConfig) -> list[Approach]:
    """Approaches from track-end events (see the module doc)."""
    if len(ends) < max(cfg.min_approach_tracks, 2):
        return []
    pos = np.array([e.xy for e in ends])
    dirs = np.array([e.inbound for e in ends])
    chord = 2 * math.sin(math.radians(cfg.approach_heading_deg) / 2)
    feats = np.column_stack([pos / cfg.approach_cluster_m, dirs / chord])
    labels = fcluster(linkage(feats, "average"), t=1.0, criterion="distance")
    near_edge = area.edge_distance(pos) <= cfg.edge_margin_m
    groups: list[list[int]] = []
    for lab in np.unique(labels):
        in_cluster = np.flatnonzero((labels == lab) & near_edge)
        if len(in_cluster) >= cfg.min_approach_tracks:
            groups.append(in_cluster.tolist())
    groups = _merge_carriageways(groups, ends, cfg)
    approaches = []
    for members in groups:
        p = pos[members]
        d = dirs[members].mean(axis=0)
        d /= max(np.linalg.norm(d), 1e-9)
        c = p.mean(axis=0)
        if float((area.centre - c) @ d) < 0:
            # "into the junction" points away from it: pieces that start on an arm's way out and head out (a
            # vehicle found again after the tracker lost it in the junction), or end on its way in, not an arm
            continue
        lateral = (p - c) @ np.array([d[1], -d[0]])
        radius = float(np.abs(lateral).max()) + 5.0
        approaches.append((c, d, radius, len(members)))
    approaches = _drop_clusters_inside_arms(approaches)
    # order around the centre, clockwise from north, so ids read like a compass
    centre = np.mean([c for c, _, _, _ in approaches], axis=0) if approaches else area.centre
    approaches.sort(key=lambda a: heading_deg(a[0] - centre))
    out: list[Approach] = []
    used: dict[str, int] = {}
    for k, (c, d, radius, _) in enumerate(approaches):
        name = _compass(c - centre)
        used[name] = used.get(name, 0) + 1
        label = name if used[name] == 1 else f"{name}{used[name]}"
        out.append(
            Approach(chr(ord("A") + k) if k < 26 else f"A{k}", label, float(c[0]), float(c[1]), heading_deg(d), radius)
        )
    return out


def _drop_clusters_inside_arms(
    approaches: list[tuple[np.ndarray, np.ndarray, float, int]],
) -> list[tuple[np.ndarray, np.ndarray, float, int]]:
    """A cluster of track ends whose centre lies within a larger cluster's radius of its centre is no arm of its own:
    one stretch of the observed area's edge is one arm. Such a cluster has another heading than the arm because its
    vehicles are cut short in the middle of a turn (the frame's edge close to the junction: right turners leaving
    through the arm's side of the view 30-40 degrees into their turn); they end on that arm, and the study gives them
    its way out (or in) from their lane and turn (``movements.mid_turn_match``)."""
    keep = []
    for i, (c, _, _, n) in enumerate(approaches):
        inside = any(
            j != i and (m > n or (m == n and j < i)) and float(np.linalg.norm(c - cj)) < rj
            for j, (cj, _, rj, m) in enumerate(approaches)
        )
        if not inside:
            keep.append(approaches[i])
    return keep


def _mostly_entries(ends: list[TrackEnd], members: list[int]) -> bool | None:
    """True where at least ``HALF_SHARE`` of a cluster's events are entries, False where as many are exits, None for a
    mix: a carriageway's half is one or the other, but a vehicle the tracker loses mid-view ends (or starts) among the
    other half's events now and then (the 4K ramp minute: 2 exits among 20 entries)."""
    share = float(np.mean([ends[k].is_entry for k in members]))
    return True if share >= HALF_SHARE else False if share <= 1.0 - HALF_SHARE else None


def _merge_carriageways(groups: list[list[int]], ends: list[TrackEnd], cfg: StudyConfig) -> list[list[int]]:
    """Merge two clusters with the same inbound heading that are one arm: a (mostly) inbound and an outbound one
    lying side by side (a dual carriageway; up to two cluster sizes apart along it: at motorway speed the tracks of
    one carriageway begin 30-40 m into the view, the 4K ramp render), or two on one line, one further along the arm
    than the other (where the tracks of a far arm begin and end spreads along it: an oblique view's far side,
    fragments): less than a lane's offset apart across it, or within either's spread of lanes."""
    merged = True
    while merged:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                a, b = groups[i], groups[j]
                kind_a, kind_b = _mostly_entries(ends, a), _mostly_entries(ends, b)
                da = np.mean([ends[k].inbound for k in a], axis=0)
                db = np.mean([ends[k].inbound for k in b], axis=0)
                halves = kind_a is not None and kind_b is not None and kind_a != kind_b
                ca, cb = np.mean([ends[k].xy for k in a], axis=0), np.mean([ends[k].xy for k in b], axis=0)
                gap = cb - ca
                turned = angle_between(heading_deg(da), heading_deg(db))
                if turned > cfg.approach_heading_deg / 2:
                    if halves and turned <= CUT_HALVES_DEG and float(np.linalg.norm(gap)) < CUT_HALVES_M:
                        groups[i] = a + b  # one arm's ways in and out, cut short by the frame (CUT_HALVES_M)
                        del groups[j]
                        merged = True
                        break
                    continue
                d = da / np.linalg.norm(da)
                normal = np.array([d[1], -d[0]])
                along, across = abs(float(gap @ d)), abs(float(gap @ normal))
                # on one line: across less than a lane's offset, or inside the other's spread of lanes (a few
                # tracks lost mid-view on a wide road end beside its lanes' mean, within its cross-section)
                spread = max(max(abs(float((ends[k].xy - c) @ normal)) for k in g) for g, c in ((a, ca), (b, cb)))
                one_line = across < max(SAME_ARM_ACROSS_M, spread) and along < 2 * cfg.approach_cluster_m
                if (halves and along < 2 * cfg.approach_cluster_m and across < 3 * cfg.approach_cluster_m) or one_line:
                    groups[i] = a + b
                    del groups[j]
                    merged = True
                    break
            if merged:
                break
    return groups


def find_approaches(trajs: list[Trajectory], config: StudyConfig | None = None) -> list[Approach]:
    """The junction's approaches, from where ``trajs`` enter and leave the observed area (ground metres)."""
    cfg = config or StudyConfig()
    tracks = [(tr.track_id, np.asarray(tr.t, float), np.asarray(tr.xy, float)) for tr in trajs if len(tr.t) >= 2]
    if not tracks:
        return []
    area = ObservedArea(np.vstack([xy for _, _, xy in tracks]))
    return cluster_approaches(track_ends(tracks, area), area, cfg)


def moves(speed: np.ndarray, cfg: StudyConfig) -> bool:
    """Whether a track with these speeds (m/s) moved as a vehicle does: its 95th-percentile speed reaches
    ``stationary_speed_kmh``; else it is stationary and has no origin, destination or approach."""
    return bool(len(speed)) and float(np.percentile(speed, 95)) * 3.6 >= cfg.stationary_speed_kmh


def approaches_from_smoothed(
    smoothed: dict[int, SmoothedTrack], cfg: StudyConfig
) -> tuple[list[Approach], ObservedArea]:
    """Approaches from the ends of the tracks that move (:func:`moves`); the observed area from every track. A
    stationary track's position drifts by metres over a flight where the view is far (a parked car in an oblique
    view's far rows: 5-7 m in 300 s at seed 2's oblique intersection with the detector at native scale), enough for an
    entry and an exit 6 m apart: five such tracks made a fifth approach for four arms, which no vehicle used."""
    tracks = [(tid, s.t, s.xy) for tid, s in smoothed.items()]
    area = ObservedArea(np.vstack([xy for _, _, xy in tracks]) if tracks else np.zeros((0, 2)))
    moving = [(tid, s.t, s.xy) for tid, s in smoothed.items() if moves(s.speed, cfg)]
    return cluster_approaches(track_ends(moving, area), area, cfg), area
