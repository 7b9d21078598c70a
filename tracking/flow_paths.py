"""Where the flight's vehicles drove: a path followed from a piece's end along the other vehicles' paths.

A vehicle hidden for several seconds on a roundabout or in a turn comes back half a circle on: neither a straight line
nor the arc it was turning on reaches there. The other vehicles of the same flight drove that way, though: from where
a piece ended, heading its way, the path goes where the vehicles near there, heading about the same way, went next
(a streamline of the flight's own traffic, the way offline trackers use a scene's flow as a motion prior). The linking
(tracking/linking.py) then asks of a later piece whether it starts on that path, heading along it, as far along as
the time allows, instead of on the straight or curved line alone.

Samples are the pieces' positions every ``SAMPLE_S`` with their heading, in the first frame's pixels, kept while the
piece moves; a path uses only samples of other pieces within ``WINDOW_S`` of the gap (the chained ego-motion drifts
over a long hover, and a path learnt minutes away would be off by that drift).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

SAMPLE_S = 0.25  # a sample of each moving piece this often
VELOCITY_S = 0.5  # heading from the positions this far either side
NEIGHBOUR_LENGTHS = 0.75  # samples this many vehicle lengths around the path's head steer it
STEP_LENGTHS = 0.5  # the path advances this many vehicle lengths a step
MAX_TURN_DEG = 45.0  # samples heading more than this away from the path's heading are other traffic (a cross flow)
WINDOW_S = 60.0  # samples this far before the piece's end or after the longest gap count


@dataclass
class FlowSamples:
    """Positions (first-frame px), unit headings, times and the piece (index) each sample came from."""

    xy: np.ndarray
    heading: np.ndarray
    t: np.ndarray
    owner: np.ndarray  # (samples of one piece are contiguous, in time order)
    tree: cKDTree | None
    # the vehicle (the piece index passed as ``owner`` to :meth:`path` / :meth:`witnesses`) each sample's piece is part
    # of, where linking has joined pieces into vehicles; None: each piece is its own
    vehicle: np.ndarray | None = None

    def _others(self, near: np.ndarray, owner: int) -> np.ndarray:
        return self._vehicles[near] != owner

    @property
    def _vehicles(self) -> np.ndarray:
        return self.owner if self.vehicle is None else self.vehicle

    def _onward(self, k: int) -> np.ndarray:
        """Sample ``k`` and its vehicle's later samples in time order: its piece's, or where linking has joined
        pieces into vehicles, every piece's of its vehicle, across the gaps between them."""
        if self.vehicle is None:
            hi = k + int(np.searchsorted(self.owner[k:] != self.owner[k], True))  # the end of this piece's samples
            return np.arange(k, hi)
        later = np.flatnonzero((self.vehicle == self.vehicle[k]) & (self.t >= self.t[k]))
        return later[np.argsort(self.t[later], kind="stable")]

    @classmethod
    def of(cls, pieces: list, metres_per_px: list[float], moving_mps: float) -> FlowSamples:
        xs, hs, ts, os_ = [], [], [], []
        for k, (p, m) in enumerate(zip(pieces, metres_per_px)):
            if len(p.t) < 3 or p.t[-1] - p.t[0] < 2 * VELOCITY_S:
                continue
            at = np.arange(p.t[0] + VELOCITY_S, p.t[-1] - VELOCITY_S + 1e-9, SAMPLE_S)
            x = np.column_stack([np.interp(at, p.t, p.xy[:, 0]), np.interp(at, p.t, p.xy[:, 1])])
            ahead = np.column_stack([np.interp(at + VELOCITY_S, p.t, p.xy[:, c]) for c in (0, 1)])
            behind = np.column_stack([np.interp(at - VELOCITY_S, p.t, p.xy[:, c]) for c in (0, 1)])
            v = (ahead - behind) / (2 * VELOCITY_S)
            speed = np.hypot(v[:, 0], v[:, 1])
            keep = speed * m >= moving_mps
            xs.append(x[keep])
            hs.append(v[keep] / speed[keep, None])
            ts.append(at[keep])
            os_.append(np.full(int(keep.sum()), k))
        if not xs or not sum(len(x) for x in xs):
            return cls(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0), np.zeros(0, int), None)
        xy = np.concatenate(xs)
        return cls(xy, np.concatenate(hs), np.concatenate(ts), np.concatenate(os_), cKDTree(xy))

    def path(
        self, start: np.ndarray, heading: np.ndarray, length_px: float, max_px: float, owner: int, t0: float, t1: float
    ) -> np.ndarray:
        """The path (polyline, first-frame px) from ``start`` heading ``heading`` along the samples of other pieces
        seen between ``t0`` and ``t1``, up to ``max_px`` long; it ends where no such sample heads its way."""
        n = float(np.hypot(*heading))
        if self.tree is None or n < 1e-9:
            return start[None].astype(np.float64)
        h = heading / n
        p = start.astype(np.float64)
        pts = [p]
        radius, step = NEIGHBOUR_LENGTHS * length_px, STEP_LENGTHS * length_px
        cos_max = np.cos(np.radians(MAX_TURN_DEG))
        for _ in range(int(max_px / max(step, 1e-6))):
            near = np.asarray(self.tree.query_ball_point(p, radius), int)
            if len(near):
                near = near[self._others(near, owner) & (self.t[near] >= t0) & (self.t[near] <= t1)]
                near = near[self.heading[near] @ h >= cos_max]
            if not len(near):
                break
            mean = self.heading[near].mean(0)
            h = mean / max(float(np.hypot(*mean)), 1e-9)
            # steer toward the samples' centre line too, so the path does not drift off the lane it follows
            centre = self.xy[near].mean(0)
            side = (centre - p) - ((centre - p) @ h) * h
            p = p + step * h + 0.5 * side
            pts.append(p)
        return np.array(pts)

    def witnesses(
        self,
        start: np.ndarray,
        heading: np.ndarray,
        length_px: float,
        max_px: float,
        owner: int,
        t0: float,
        t1: float,
        most: int = 12,
    ) -> list[np.ndarray]:
        """The ways other vehicles went on from ``start``: each vehicle seen between ``t0`` and ``t1`` that passed
        within ``NEIGHBOUR_LENGTHS`` of it heading about ``heading``, followed from there as it drove (its turn too,
        where a streamline keeps to the mean of the traffic), up to ``max_px``; the nearest ``most`` vehicles, each a
        polyline from ``start``. Where linking has joined pieces into vehicles (``vehicle``), a way goes on across the
        gaps between a vehicle's pieces: where the detector loses every vehicle (a stretch it sees them badly on),
        no single piece's way crosses the stretch, a joined vehicle's does."""
        n = float(np.hypot(*heading))
        if self.tree is None or n < 1e-9:
            return []
        h = heading / n
        near = np.asarray(self.tree.query_ball_point(start, NEIGHBOUR_LENGTHS * length_px), int)
        if not len(near):
            return []
        near = near[self._others(near, owner) & (self.t[near] >= t0) & (self.t[near] <= t1)]
        near = near[self.heading[near] @ h >= np.cos(np.radians(MAX_TURN_DEG))]
        if not len(near):
            return []
        dist = np.hypot(*(self.xy[near] - start).T)
        closest: dict[int, tuple[float, int]] = {}
        for k, d in zip(near.tolist(), dist.tolist()):
            o = int(self._vehicles[k])
            if o not in closest or d < closest[o][0]:
                closest[o] = (d, k)
        out = []
        for _, k in sorted(closest.values())[:most]:
            way = np.vstack([start[None].astype(np.float64), self.xy[self._onward(k)]])
            steps = np.hypot(*np.diff(way, axis=0).T)
            keep = int(np.searchsorted(np.cumsum(steps), max_px)) + 1
            if keep >= 2:
                out.append(way[: keep + 1])
        return out


def along_path(path: np.ndarray, q: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Distance along ``path`` to the point nearest ``q``, the distance from it, and the path's unit direction there."""
    if len(path) < 2:
        return 0.0, float(np.hypot(*(q - path[0]))), np.zeros(2)
    a, b = path[:-1], path[1:]
    seg = b - a
    ln = np.hypot(seg[:, 0], seg[:, 1])
    u = np.clip(((q - a) * seg).sum(1) / np.maximum(ln**2, 1e-12), 0.0, 1.0)
    foot = a + u[:, None] * seg
    d = np.hypot(*(q - foot).T)
    k = int(np.argmin(d))
    s = float(ln[:k].sum() + u[k] * ln[k])
    return s, float(d[k]), seg[k] / max(float(ln[k]), 1e-12)
