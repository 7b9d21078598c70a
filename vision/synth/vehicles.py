"""Vehicles and their motion: sizes and colours, and a small microscopic traffic simulation.

Car following is the Intelligent Driver Model (Treiber et al. 2000); lane changes are a MOBIL-style incentive/safety
check on parallel lanes; red lights and give-way lines are virtual standing obstacles. Each step integrates with
constant acceleration, so the position recorded at a frame time and the speed recorded with it are exactly
consistent (the recorded speed is the derivative of the recorded position).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from vision.synth.roads import STEP_M, RoadNetwork, Slot
from vision.synth.scene import SceneConfig
from vision.types import VEHICLE_CLASSES

# Body colours (BGR) with their share of traffic. Rare ones (yellow, green, purple, orange, light blue) are kept so a
# detector trained on the output sees them; "asphalt" is replaced by the road grey of the scene (low contrast).
PALETTE: list[tuple[str, tuple[int, int, int], float]] = [
    ("white", (236, 236, 232), 0.22),
    ("silver", (186, 186, 190), 0.17),
    ("grey", (120, 121, 125), 0.11),
    ("black", (32, 32, 34), 0.17),
    ("blue", (120, 55, 25), 0.07),
    ("red", (40, 38, 176), 0.07),
    ("dark_red", (35, 25, 100), 0.02),
    ("beige", (165, 196, 212), 0.02),
    ("brown", (40, 70, 105), 0.02),
    ("yellow", (30, 200, 235), 0.02),
    ("green", (55, 130, 40), 0.02),
    ("purple", (125, 40, 105), 0.015),
    ("orange", (25, 120, 240), 0.015),
    ("light_blue", (215, 170, 95), 0.01),
    ("asphalt", (0, 0, 0), 0.04),
]
NEAR_MISS_MAX_S = 10.0  # a scripted distraction that has not closed in on the vehicle ahead by then is given up
LC_FULL_RATE_SPEED = 12.0  # m/s; below it a lane change slows down proportionally
CONTAINER_COLOURS = [(40, 50, 150), (130, 70, 30), (50, 110, 50), (110, 110, 110), (30, 110, 210), (60, 80, 120)]


@dataclass
class VehicleSpec:
    vid: int
    cls: str  # one of VEHICLE_CLASSES, or "clutter"
    length: float
    width: float
    height: float
    colour: tuple[int, int, int]
    colour_name: str
    look: int  # seed of this vehicle's sprite
    kind: str = "moving"  # "moving", "parked", "clutter"

    @property
    def class_id(self) -> int:
        return VEHICLE_CLASSES.index(self.cls)


@dataclass
class StaticObject:
    spec: VehicleSpec
    x: float
    y: float
    heading: float  # rad, 0 = east, counter-clockwise


# ----------------------------------------------------------------------------------------------- appearance
def sample_colour(rng: np.random.Generator, asphalt_bgr: tuple[int, int, int]) -> tuple[str, tuple[int, int, int]]:
    probs = np.array([p for *_, p in PALETTE])
    name, bgr, _ = PALETTE[int(rng.choice(len(PALETTE), p=probs / probs.sum()))]
    if name == "asphalt":
        b, g, r = (int(np.clip(c + rng.integers(-10, 11), 0, 255)) for c in asphalt_bgr)
        bgr = (b, g, r)
    jitter = rng.integers(-8, 9, 3)
    b, g, r = (int(np.clip(c + j, 0, 255)) for c, j in zip(bgr, jitter))
    return name, (b, g, r)


def sample_spec(
    rng: np.random.Generator, vid: int, cls: str, asphalt_bgr, kind: str = "moving", long_trucks: bool = True
) -> VehicleSpec:
    if cls == "car":
        dims = (rng.uniform(3.8, 4.9), rng.uniform(1.7, 1.9), rng.uniform(1.4, 1.6))
    elif cls == "van":
        dims = (rng.uniform(4.8, 6.0), rng.uniform(1.9, 2.1), rng.uniform(1.9, 2.6))
    elif cls == "truck":
        semi = rng.random() < 0.5 and long_trucks  # no rigid 16 m boxes in tight curves
        dims = (rng.uniform(13.5, 16.5) if semi else rng.uniform(7.0, 10.0), 2.5, rng.uniform(3.2, 4.0))
    elif cls == "bus":
        dims = (rng.uniform(11.0, 13.5), 2.55, rng.uniform(3.0, 3.3))
    else:
        raise ValueError(f"unknown vehicle class {cls!r}")
    name, bgr = sample_colour(rng, asphalt_bgr)
    return VehicleSpec(
        vid, cls, float(dims[0]), float(dims[1]), float(dims[2]), bgr, name, int(rng.integers(2**31)), kind
    )


def sample_class(rng: np.random.Generator, net: RoadNetwork) -> str:
    p = np.array([1 - net.truck_share - net.bus_share - net.van_share, net.truck_share, net.bus_share, net.van_share])
    return VEHICLE_CLASSES[int(rng.choice(4, p=p))]


def clutter_spec(rng: np.random.Generator, vid: int) -> VehicleSpec:
    kind = rng.choice(["container", "container", "box", "trailer"])
    if kind == "container":
        dims = (6.06 if rng.random() < 0.7 else 12.19, 2.44, 2.59)
        colour = CONTAINER_COLOURS[int(rng.integers(len(CONTAINER_COLOURS)))]
    elif kind == "box":  # rooftop units, skips, sheds: car-sized blocks
        dims = (rng.uniform(2.0, 4.5), rng.uniform(1.4, 2.2), rng.uniform(0.8, 1.8))
        g = int(rng.integers(120, 220))
        colour = (g, g, g + int(rng.integers(-10, 10)))
    else:
        dims = (rng.uniform(3.0, 5.0), rng.uniform(1.8, 2.2), rng.uniform(0.6, 1.2))
        colour = (int(rng.integers(60, 200)),) * 3
    c0, c1, c2 = (int(np.clip(c, 0, 255)) for c in colour)
    colour = (c0, c1, c2)
    return VehicleSpec(
        vid,
        "clutter",
        float(dims[0]),
        float(dims[1]),
        float(dims[2]),
        colour,
        str(kind),
        int(rng.integers(2**31)),
        "clutter",
    )


# ----------------------------------------------------------------------------------------------- simulation
@dataclass
class FrameStates:
    """Vehicles of one frame (arrays aligned)."""

    vid: np.ndarray
    x: np.ndarray
    y: np.ndarray
    heading: np.ndarray  # rad, 0 = east, counter-clockwise
    speed: np.ndarray  # m/s, magnitude of the ground velocity
    route: np.ndarray | None = None  # index of the route (lane) each vehicle drives on now


@dataclass
class NearMiss:
    """A scripted rear-end near-miss: ``follower`` stopped keeping its distance to ``leader`` at ``t_start`` until
    the time to collision fell below the config's ``near_miss_ttc_s`` (at ``t_end``)."""

    follower: int  # simulation vehicle id
    leader: int
    t_start: float
    t_end: float | None = None
    outcome: str = "running"  # "near_miss": time to collision fell below near_miss_ttc_s; "gave_up": it did not


@dataclass
class _Yield:
    stop_s: float  # give-way line on the yielding route
    mains: np.ndarray  # routes with right of way that the minor path merges into there
    merge_s: np.ndarray  # the merge point, as arc length on each of ``mains``


def _shared_map(routes) -> np.ndarray:
    """M[a, b, k]: arc length on route b of route a's sample k where both routes are the same lane, else NaN."""
    R = len(routes)
    K = max(len(r.pts) for r in routes)
    M = np.full((R, R, K), np.nan, np.float32)
    trees = [cKDTree(r.pts) for r in routes]
    tangents = []
    for r in routes:
        t = np.gradient(r.pts, axis=0)
        tangents.append(t / np.linalg.norm(t, axis=1, keepdims=True))
    for a, ra in enumerate(routes):
        M[a, a, : len(ra.pts)] = np.arange(len(ra.pts)) * STEP_M
        for b, rb in enumerate(routes):
            if a == b:
                continue
            d, idx = trees[b].query(ra.pts, distance_upper_bound=0.6)
            ok = np.isfinite(d)
            idx = np.where(ok, idx, 0)
            ok &= np.einsum("ij,ij->i", tangents[a], tangents[b][idx]) > 0.95
            M[a, b, : len(ra.pts)] = np.where(ok, idx * STEP_M, np.nan)
    return M


def _yields(routes, M: np.ndarray) -> list[list[_Yield]]:
    """Give-way rules: where a route without right of way joins one with it (ring, mainline)."""
    out: list[list[_Yield]] = []
    for i, ri in enumerate(routes):
        found: dict[float, list[tuple[int, float]]] = {}
        for o, ro in enumerate(routes):
            if o == i:
                continue
            shared = ~np.isnan(M[i, o, : len(ri.pts)])
            if shared[0] or not shared.any():
                continue  # same entry lane (a diverge), or never meet
            k = int(np.argmax(shared))
            ko = int(M[i, o, k] / STEP_M)
            if ko < 20 or ri.main[max(k - 10, 0)] or not ro.main[max(ko - 10, 0)]:
                continue  # not a merge of a minor path into a major one
            # give-way line: where the minor path first comes within 3.5 m of the major one
            d, _ = cKDTree(ro.pts).query(ri.pts[: k + 1])
            j = k
            while j > 0 and d[j - 1] < 3.5:
                j -= 1
            found.setdefault(round(max(j * STEP_M - 1.0, 0.0), 1), []).append((o, float(M[i, o, k])))
        out.append(
            [
                _Yield(stop, np.array([o for o, _ in v]), np.array([m for _, m in v]))
                for stop, v in sorted(found.items())
            ]
        )
    return out


def _idm(v, v0, gap, dv, a, b, T, s0):
    free = 1.0 - (v / np.maximum(v0, 0.1)) ** 4
    sstar = s0 + np.maximum(0.0, v * T + v * dv / (2.0 * np.sqrt(a * b)))
    inter = np.where(np.isfinite(gap), (sstar / np.maximum(gap, 0.1)) ** 2, 0.0)
    return a * (free - inter)


class TrafficSim:
    """Vehicles driving the routes of a :class:`RoadNetwork`; call :meth:`run` to get per-frame states."""

    def __init__(self, cfg: SceneConfig, net: RoadNetwork, rng: np.random.Generator, asphalt_bgr, first_vid: int = 1):
        self.cfg, self.net, self.rng, self.asphalt = cfg, net, rng, asphalt_bgr
        self.routes = net.routes
        self.M = _shared_map(self.routes)
        self.yields = _yields(self.routes, self.M)
        self.K = self.M.shape[2]
        self.vmax = np.zeros((len(self.routes), self.K))
        for r, route in enumerate(self.routes):
            self.vmax[r, : len(route.pts)] = route.vmax_ahead
            self.vmax[r, len(route.pts) :] = route.vmax_ahead[-1]
        self.stop_s = np.array([np.nan if r.stop_s is None else r.stop_s for r in self.routes])
        self.phase = np.array([-1 if r.phase is None else r.phase for r in self.routes])
        nb = net.lane_neighbours
        # inner (leftmost) lanes of highways with 3+ lanes a direction: no trucks or buses there
        self.inner_lanes = {r for r, v in nb.items() if v == [r + 1]} if len(nb) >= 6 else set()
        self.specs: dict[int, VehicleSpec] = {}
        self.next_vid = first_vid
        cap = 512
        self.active = np.zeros(cap, bool)
        self.vid = np.zeros(cap, np.int64)
        self.route = np.zeros(cap, np.int64)
        self.prev = np.full(cap, -1, np.int64)  # route being left during a lane change
        self.s = np.zeros(cap)
        self.v = np.zeros(cap)
        self.v0 = np.zeros(cap)
        self.a = np.ones(cap)
        self.b = np.full(cap, 2.0)
        self.T = np.full(cap, 1.4)
        self.L = np.full(cap, 4.5)
        self.lc_t = np.zeros(cap)
        self.lc_dur = np.ones(cap)
        self.lc_d0 = np.zeros(cap)
        self.lc_next = np.zeros(cap)  # next time the vehicle considers a lane change
        self.distracted = np.zeros(cap, bool)  # scripted near-miss in progress: ignores the vehicle ahead
        self.script_area: np.ndarray | None = None  # polygon where scripted near-misses must happen (the view)
        self.near_miss_times: list[float] = []  # when to script the next near-misses (set by the scene)
        self.near_misses: list[NearMiss] = []
        n_spawn = len(net.spawn_rates)
        self.spawn_next = np.array([self._arrival(r) for r in net.spawn_rates])
        self.spawn_since = np.full(n_spawn, np.nan)

    def _arrival(self, rate: float) -> float:
        return float(self.rng.exponential(1.0 / rate)) if rate > 0 else math.inf

    # -- geometry -------------------------------------------------------------------------------------------------
    def _pose(self, idx: np.ndarray):
        """Positions, headings and ground speeds of vehicles ``idx``."""
        x = np.zeros(len(idx))
        y = np.zeros(len(idx))
        hd = np.zeros(len(idx))
        sp = np.zeros(len(idx))
        for r in np.unique(self.route[idx]):
            m = self.route[idx] == r
            ii = idx[m]
            p, t = self.routes[r].at(self.s[ii])
            n = np.column_stack([-t[:, 1], t[:, 0]])
            tau = np.clip(self.lc_t[ii] / self.lc_dur[ii], 0, 1)
            changing = self.prev[ii] >= 0
            d = np.where(changing, self.lc_d0[ii] * (1 - (3 * tau**2 - 2 * tau**3)), 0.0)
            rate = self._lc_rate(self.v[ii])
            dd = np.where(changing, -self.lc_d0[ii] * (6 * tau - 6 * tau**2) / self.lc_dur[ii] * rate, 0.0)
            pos = p + d[:, None] * n
            vel = self.v[ii, None] * t + dd[:, None] * n
            x[m], y[m] = pos[:, 0], pos[:, 1]
            hd[m] = np.arctan2(vel[:, 1], vel[:, 0])
            still = self.v[ii] < 1e-6
            hd[m] = np.where(still, np.arctan2(t[:, 1], t[:, 0]), hd[m])
            sp[m] = np.hypot(self.v[ii], dd)
        return x, y, hd, sp

    @staticmethod
    def _lc_rate(v: np.ndarray) -> np.ndarray:
        """Lane changes progress slower at low speed, so that the vehicle's yaw stays plausible."""
        return np.minimum(1.0, np.asarray(v) / LC_FULL_RATE_SPEED)

    def _mapped(self, idx_from: np.ndarray, onto: np.ndarray, use_prev: bool = False) -> np.ndarray:
        """Arc length of vehicles ``idx_from`` (columns) expressed on routes ``onto`` (rows); NaN if not there."""
        src = self.prev[idx_from] if use_prev else self.route[idx_from]
        k = np.clip((self.s[idx_from] / STEP_M).astype(np.int64), 0, self.K - 1)
        out = self.M[np.maximum(src, 0)[None, :], onto[:, None], k[None, :]].astype(np.float64)
        if use_prev:
            out[:, src < 0] = np.nan
        return out + (self.s[idx_from] - k * STEP_M)[None, :]

    def _leaders(self, idx: np.ndarray, onto: np.ndarray, s_self: np.ndarray, len_self: np.ndarray, exclude=None):
        """Gap and speed difference to the nearest vehicle ahead on route ``onto`` (per row)."""
        best = np.full(len(onto), np.inf)
        vlead = np.zeros(len(onto))
        for use_prev in (False, True):
            sj = self._mapped(idx, onto, use_prev)
            ds = sj - s_self[:, None]
            gap = ds - (len_self[:, None] + self.L[idx][None, :]) / 2
            bad = ~(ds > 0)
            if exclude is not None:
                bad |= idx[None, :] == exclude[:, None]
            gap = np.where(bad, np.inf, gap)
            j = np.argmin(gap, axis=1)
            g = gap[np.arange(len(onto)), j]
            better = g < best
            best = np.where(better, g, best)
            vlead = np.where(better, self.v[idx][j], vlead)
        return best, vlead

    # -- spawning -------------------------------------------------------------------------------------------------
    def _spawn(self, t: float) -> None:
        for e, t_next in enumerate(self.spawn_next):
            if t < t_next:
                continue
            choices = self.net.spawn_choices[e]
            probs = np.array([p for _, p in choices])
            r = choices[int(self.rng.choice(len(choices), p=probs / probs.sum()))][0]
            cls = sample_class(self.rng, self.net)
            if cls in ("truck", "bus") and r in self.inner_lanes:
                cls = "car"  # heavy vehicles keep off the inner lane of wide highways
            spec = sample_spec(self.rng, self.next_vid, cls, self.asphalt, long_trucks=self.net.long_trucks)
            act = np.flatnonzero(self.active)
            gap, vl = (np.array([np.inf]), np.array([0.0]))
            if len(act):
                gap, vl = self._leaders(act, np.array([r]), np.array([0.0]), np.array([spec.length]))
            route = self.routes[r]
            v0 = self._desired_speed(cls, route.speed_limit)
            need = 4.0 + 1.0 * v0
            if gap[0] < need:  # entry blocked: try again next step, give up after 20 s
                if np.isnan(self.spawn_since[e]):
                    self.spawn_since[e] = t
                if t - self.spawn_since[e] > 20.0:
                    self.spawn_since[e] = np.nan
                    self.spawn_next[e] = t + self._arrival(self.net.spawn_rates[e])
                continue
            self.spawn_since[e] = np.nan
            self.spawn_next[e] = t + self._arrival(self.net.spawn_rates[e])
            i = self._slot()
            self.specs[spec.vid] = spec
            self.next_vid += 1
            self.active[i] = True
            self.vid[i] = spec.vid
            self.route[i], self.prev[i], self.s[i] = r, -1, 0.0
            self.v0[i] = v0
            self.v[i] = min(v0, route.vmax_ahead[0], vl[0] if np.isfinite(gap[0]) and gap[0] < 80 else v0)
            self.a[i] = {"car": 1.7, "van": 1.4, "truck": 0.8, "bus": 1.0}[cls] * self.rng.uniform(0.85, 1.15)
            self.b[i] = self.rng.uniform(1.8, 2.6)
            self.T[i] = self.rng.uniform(1.0, 1.7) * (1.2 if cls in ("truck", "bus") else 1.0)
            self.L[i] = spec.length
            self.lc_next[i] = t + self.rng.uniform(1, 4)
            self.distracted[i] = False

    def _desired_speed(self, cls: str, limit: float) -> float:
        if cls == "truck":
            return min(limit, 85 / 3.6) * self.rng.uniform(0.95, 1.05)
        if cls == "bus":
            return min(limit, 95 / 3.6) * self.rng.uniform(0.95, 1.05)
        return limit * self.rng.uniform(0.88, 1.15)

    def _slot(self) -> int:
        free = np.flatnonzero(~self.active)
        if len(free):
            return int(free[0])
        n = len(self.active)
        for name in (
            "active",
            "vid",
            "route",
            "prev",
            "s",
            "v",
            "v0",
            "a",
            "b",
            "T",
            "L",
            "lc_t",
            "lc_dur",
            "lc_d0",
            "lc_next",
            "distracted",
        ):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr, np.zeros(n, arr.dtype)]))
        self.prev[n:] = -1
        self.lc_dur[n:] = 1.0
        return n

    # -- dynamics -------------------------------------------------------------------------------------------------
    def _accel(self, t: float, idx: np.ndarray, routes: np.ndarray | None = None) -> np.ndarray:
        routes = self.route[idx] if routes is None else routes
        s, v, L = self.s[idx], self.v[idx], self.L[idx]
        gap, vl = self._leaders(idx, routes, s, L, exclude=idx)
        dv = v - vl
        if self.distracted[idx].any():  # before signals and give-way lines: a distracted driver still stops at red
            gap, dv = self._distraction(t, idx, gap, dv)
        front = s + L / 2
        stop = self.stop_s[routes]
        has_stop = ~np.isnan(stop)
        if has_stop.any() and self.net.signals is not None:
            states = {p: self.net.signals.state(t, p) for p in set(self.phase[routes[has_stop]].tolist())}
            for n in np.flatnonzero(has_stop & (front < np.nan_to_num(stop) + 0.2)).tolist():
                state = states[int(self.phase[routes[n]])]
                dist = stop[n] - front[n]
                if (state == "red" or (state == "amber" and dist > v[n] ** 2 / (2 * 3.0))) and dist < gap[n]:
                    gap[n], dv[n] = dist, v[n]
        for n, (i, r) in enumerate(zip(idx, routes)):
            for y in self.yields[r]:
                dist = y.stop_s - front[n]
                if dist < -0.5 or dist > 80.0 or v[n] ** 2 / (2 * 4.0) > dist + 0.5 or dist >= gap[n]:
                    continue  # passed, far, too late to stop (committed), or something nearer already
                if self._conflict(i, y):
                    gap[n], dv[n] = dist, v[n]
        k = np.clip((s / STEP_M).astype(np.int64), 0, self.K - 1)
        v0 = np.minimum(self.v0[idx], self.vmax[routes, k])
        acc = _idm(v, v0, gap, dv, self.a[idx], self.b[idx], self.T[idx], 2.0)
        return np.clip(acc, -9.0, self.a[idx])

    def _distraction(self, t: float, idx: np.ndarray, gap: np.ndarray, dv: np.ndarray):
        """Distracted followers drive as if the road ahead were free until their time to collision with the
        vehicle ahead falls below ``near_miss_ttc_s``; then they brake as usual (IDM, up to 9 m/s^2)."""
        gap, dv = gap.copy(), dv.copy()
        for n in np.flatnonzero(self.distracted[idx]).tolist():
            i = int(idx[n])
            ttc = gap[n] / dv[n] if dv[n] > 0 and np.isfinite(gap[n]) else math.inf
            nm = next(nm for nm in self.near_misses if nm.follower == int(self.vid[i]) and nm.t_end is None)
            if ttc < self.cfg.near_miss_ttc_s or gap[n] < 2.0 or t - nm.t_start > NEAR_MISS_MAX_S:
                self.distracted[i] = False
                nm.t_end = t
                nm.outcome = "gave_up" if t - nm.t_start > NEAR_MISS_MAX_S else "near_miss"
            else:
                gap[n], dv[n] = math.inf, 0.0
        return gap, dv

    def _script_near_miss(self, t: float) -> None:
        """Start a scripted near-miss when one is due: a vehicle faster than 4 m/s closing in on a slower (or
        standing) vehicle 12-70 m ahead of it in the same lane, that vehicle inside the script area (the view)."""
        if not self.near_miss_times or t < self.near_miss_times[0]:
            return
        idx = np.flatnonzero(self.active & ~self.distracted)
        if len(idx) < 2:
            return
        gap, vl = self._leaders(idx, self.route[idx], self.s[idx], self.L[idx], exclude=idx)
        ok = (self.v[idx] > 4.0) & (gap > 12.0) & (gap < 70.0) & (self.v[idx] - vl > 1.0)
        if not ok.any():
            return
        # where the follower would reach its leader (roughly the leader's position now): inside the script area
        sj = self._mapped(idx, self.route[idx])  # rows: followers' routes, columns: every vehicle
        sj = np.where(
            (sj - self.s[idx][:, None] > 0) & (idx[None, :] != idx[:, None]), sj - self.s[idx][:, None], np.inf
        )
        lead = idx[np.argmin(sj, axis=1)]
        lx, ly, _, _ = self._pose(lead)
        if self.script_area is not None:
            import cv2

            poly = np.asarray(self.script_area, np.float32).reshape(-1, 1, 2)
            ok &= np.array([cv2.pointPolygonTest(poly, (float(a), float(b)), False) > 0 for a, b in zip(lx, ly)])
        if not ok.any():
            return
        closing = np.where(ok, (self.v[idx] - vl) / np.maximum(gap, 1.0), -np.inf)
        n = int(np.argmax(closing))  # the one closing in fastest: it reaches a near-miss before anything changes
        i = int(idx[n])
        leader = int(self.vid[lead[n]])
        self.distracted[i] = True
        self.near_misses.append(NearMiss(int(self.vid[i]), leader, t))
        self.near_miss_times.pop(0)

    def _conflict(self, i: int, y: _Yield) -> bool:
        act = np.flatnonzero(self.active)
        act = act[act != i]
        if not len(act):
            return False
        so = self._mapped(act, y.mains)
        window_up = self.v[act] * 4.0 + 8.0
        near = (so > y.merge_s[:, None] - window_up[None, :]) & (so < y.merge_s[:, None] + self.L[act] / 2 + 4.0)
        return bool(np.any(near))

    def _lane_changes(self, t: float, idx: np.ndarray, acc: np.ndarray) -> None:
        nb = self.net.lane_neighbours
        if not nb or not self.cfg.lane_changes:
            return
        for n, i in enumerate(idx):
            r = int(self.route[i])
            if self.prev[i] >= 0 or t < self.lc_next[i] or r not in nb or self.v[i] < 5.0:
                continue
            self.lc_next[i] = t + self.rng.uniform(0.8, 1.6)
            if self.s[i] < 30 or self.s[i] > self.routes[r].length - 150:
                continue
            cls = self.specs[int(self.vid[i])].cls
            best, best_gain = None, 0.0
            for target in nb[r]:
                right = target > r  # higher lane index = further right (outer)
                if cls in ("truck", "bus") and target in self.inner_lanes:
                    continue
                a_new = self._accel(t, np.array([i]), np.array([target]))[0]
                s_i = self.s[i]
                act = np.flatnonzero(self.active)
                act = act[act != i]
                sj = self._mapped(act, np.array([target]))[0]
                ahead = np.where(sj >= s_i, sj - s_i, np.inf)
                if np.isfinite(ahead).any():  # room in front in the new lane
                    ld = act[int(np.argmin(ahead))]
                    if ahead.min() - (self.L[ld] + self.L[i]) / 2 < max(5.0, 0.6 * self.v[i]):
                        continue
                behind = np.where(sj < s_i, s_i - sj, np.inf)
                a_f = 0.0
                if np.isfinite(behind).any():  # the new follower must not brake hard because of us
                    f = act[int(np.argmin(behind))]
                    gap_f = behind.min() - (self.L[f] + self.L[i]) / 2
                    a_f = _idm(
                        self.v[f], self.v0[f], gap_f, self.v[f] - self.v[i], self.a[f], self.b[f], self.T[f], 2.0
                    )
                    if gap_f < max(5.0, 0.8 * self.v[f]) or a_f < -1.5:
                        continue
                # MOBIL: own gain, minus a share of what the new follower loses, plus keep-right bias
                gain = a_new - acc[n] + 0.3 * min(a_f, 0.0) + (0.2 if right else -0.2)
                if gain > 0.5 and gain > best_gain:
                    best, best_gain = target, gain
            if best is None:
                continue
            p_old, _ = self.routes[r].at(np.array([self.s[i]]))
            p_new, t_new = self.routes[best].at(np.array([self.s[i]]))
            n_new = np.array([-t_new[0, 1], t_new[0, 0]])
            self.lc_d0[i] = float(np.dot(p_old[0] - p_new[0], n_new))
            self.prev[i], self.route[i] = r, best
            self.lc_t[i], self.lc_dur[i] = 0.0, self.rng.uniform(3.0, 5.0)
            self.lc_next[i] = t + self.lc_dur[i] + self.rng.uniform(5.0, 10.0)

    def step(self, t: float, dt: float) -> None:
        self._spawn(t)
        self._script_near_miss(t)
        idx = np.flatnonzero(self.active)
        if not len(idx):
            return
        acc = self._accel(t, idx)
        self._lane_changes(t, idx, acc)
        v = self.v[idx]
        v_new = v + acc * dt
        stopping = v_new < 0
        ds = np.where(stopping, np.where(acc < 0, v**2 / (2 * np.maximum(-acc, 1e-9)), 0.0), (v + v_new) / 2 * dt)
        self.v[idx] = np.maximum(v_new, 0.0)
        self.s[idx] += ds
        changing = self.prev[idx] >= 0
        self.lc_t[idx] += dt * changing * self._lc_rate(v)
        done = idx[changing & (self.lc_t[idx] >= self.lc_dur[idx])]
        self.prev[done] = -1
        self.lc_t[done] = 0.0
        lengths = np.array([self.routes[r].length for r in self.route[idx]])
        self.active[idx[self.s[idx] >= lengths - 1.0]] = False

    def run(self, warmup_s: float, n_frames: int, fps: float) -> list[FrameStates]:
        sub = max(1, int(math.ceil((1.0 / fps) / 0.05)))
        dt = 1.0 / fps / sub
        t = -warmup_s
        self.spawn_next = self.spawn_next + t
        frames: list[FrameStates] = []
        warm_steps = int(round(warmup_s / dt))
        for _ in range(warm_steps):
            self.step(t, dt)
            t += dt
        t = 0.0
        for f in range(n_frames):
            frames.append(self.snapshot())
            for _ in range(sub):
                self.step(t, dt)
                t += dt
            t = (f + 1) / fps  # no drift of the clock over long clips
        return frames

    def snapshot(self) -> FrameStates:
        idx = np.flatnonzero(self.active)
        x, y, hd, sp = self._pose(idx)
        return FrameStates(self.vid[idx].copy(), x, y, hd, sp, self.route[idx].copy())


def place_parked(slots: list[Slot], n: int, rng: np.random.Generator, first_vid: int, asphalt) -> list[StaticObject]:
    """Parked vehicles in ``n`` of the slots (speed 0; they are ground truth vehicles)."""
    if not slots or n <= 0:
        return []
    pick = rng.choice(len(slots), size=min(n, len(slots)), replace=False)
    out = []
    for k, si in enumerate(sorted(int(i) for i in pick)):
        slot = slots[si]
        cls = VEHICLE_CLASSES[int(rng.choice(4, p=[0.85, 0.03, 0.0, 0.12]))]
        spec = sample_spec(rng, first_vid + k, cls, asphalt, kind="parked")
        out.append(StaticObject(spec, slot.x, slot.y, slot.heading + (math.pi if rng.random() < 0.3 else 0.0)))
    return out
