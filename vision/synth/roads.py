"""Road networks on the ground plane: the paths vehicles drive (lane centre-lines) and what is painted.

A :class:`Route` is one drivable path from where vehicles appear to where they leave, resampled every 0.5 m so that
arc length along it is exactly the distance driven. Routes that share pieces (an approach lane, a roundabout ring,
the lane a ramp merges into) are recognised geometrically by :mod:`vision.synth.vehicles`.
Right-hand traffic. World axes: x east, y north (metres).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vision.synth.scene import SceneConfig

STEP_M = 0.5  # route resampling step
LAT_ACCEL = 2.2  # m/s^2 drivers accept in curves; sets curve speed limits


@dataclass
class Route:
    pts: np.ndarray  # (K, 2) metres, STEP_M apart
    kind: str  # "main", "turn", "entry", "ramp"
    main: np.ndarray  # (K,) bool: samples with right of way (ring, mainline, straight through)
    speed_limit: float  # m/s
    stop_s: float | None = None  # signal stop line, arc length
    phase: int | None = None  # signal phase that gives this route green
    spawn: int = 0  # index of the entry lane the route starts from
    vmax_ahead: np.ndarray = field(default=None, repr=False)  # type: ignore[arg-type]  # (K,) speed limit looking 40 m ahead; set by make_route

    @property
    def length(self) -> float:
        return (len(self.pts) - 1) * STEP_M

    def at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points and unit tangents at arc lengths ``s`` (clipped to the route)."""
        s = np.clip(np.asarray(s, np.float64), 0.0, self.length)
        f = s / STEP_M
        i = np.minimum(f.astype(np.int64), len(self.pts) - 2)
        a = (f - i)[..., None]
        p0, p1 = self.pts[i], self.pts[i + 1]
        d = (p1 - p0) / STEP_M
        return p0 + a * (p1 - p0), d


@dataclass
class Stroke:
    """A painted polyline: ``width_m`` wide, optionally dashed (on, off metres)."""

    pts: np.ndarray
    width_m: float
    layer: str  # "verge", "sidewalk", "asphalt", "lot", "island", "marking", "barrier"
    colour: str = "asphalt"
    dash: tuple[float, float] | None = None


@dataclass
class Polygon:
    pts: np.ndarray
    layer: str
    colour: str = "asphalt"


@dataclass
class Slot:
    """A place for a static object: centre (x, y), heading (rad, 0 = east, CCW), and whether it is on the road."""

    x: float
    y: float
    heading: float
    on_road: bool


@dataclass
class SignalPlan:
    """Fixed-time traffic lights: phases in order, each (phase id, green s, amber s, all-red s)."""

    phases: list[tuple[int, float, float, float]]
    offset_s: float = 0.0

    @property
    def cycle(self) -> float:
        return sum(g + a + r for _, g, a, r in self.phases)

    def state(self, t: float, phase: int) -> str:
        """'green', 'amber' or 'red' for ``phase`` at time t."""
        tc = (t + self.offset_s) % self.cycle
        for pid, g, a, r in self.phases:
            if tc < g + a + r:
                if pid != phase:
                    return "red"
                return "green" if tc < g else ("amber" if tc < g + a else "red")
            tc -= g + a + r
        return "red"


@dataclass
class RoadNetwork:
    routes: list[Route]
    spawn_rates: list[float]  # vehicles/s per entry lane
    spawn_choices: list[list[tuple[int, float]]]  # per entry lane: (route index, probability)
    strokes: list[Stroke]
    polygons: list[Polygon]
    parking: list[Slot]
    target: tuple[float, float]  # where the camera looks
    signals: SignalPlan | None = None
    lane_neighbours: dict[int, list[int]] = field(default_factory=dict)  # straight parallel lanes, same direction
    truck_share: float = 0.12
    bus_share: float = 0.03
    van_share: float = 0.12
    style: str = "rural"  # ground texture style: "rural", "urban", "suburban"
    long_trucks: bool = True  # semi-trailers (drawn rigid) only where curves are wide


# ----------------------------------------------------------------------------------------------- geometry helpers
def resample(pts: np.ndarray, step: float = STEP_M) -> np.ndarray:
    """Polyline resampled at exactly ``step`` arc length (the last point may be closer)."""
    pts = np.asarray(pts, np.float64)
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    keep = np.concatenate([[True], seg > 1e-9])
    pts = pts[keep]
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
    n = int(math.floor(s[-1] / step)) + 1
    q = np.arange(n) * step
    return np.column_stack([np.interp(q, s, pts[:, 0]), np.interp(q, s, pts[:, 1])])


def offset(pts: np.ndarray, d: float) -> np.ndarray:
    """Parallel polyline ``d`` metres to the left (positive) of the direction of travel."""
    t = np.gradient(pts, axis=0)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    n = np.column_stack([-t[:, 1], t[:, 0]])
    return pts + d * n


def line(a, b, step: float = 1.0) -> np.ndarray:
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = max(2, int(np.linalg.norm(b - a) / step) + 1)
    return a + (b - a) * np.linspace(0, 1, n)[:, None]


def arc(centre, radius: float, a0: float, a1: float, step: float = 0.5) -> np.ndarray:
    """Circle arc from angle a0 to a1 (rad; direction given by the sign of a1 - a0)."""
    n = max(3, int(abs(a1 - a0) * radius / step) + 1)
    a = np.linspace(a0, a1, n)
    return np.column_stack([centre[0] + radius * np.cos(a), centre[1] + radius * np.sin(a)])


def bezier(p0, t0, p3, t3, k: float | None = None, n: int = 60) -> np.ndarray:
    """Cubic Bezier from p0 leaving along t0 to p3 arriving along t3."""
    p0, p3, t0, t3 = (np.asarray(v, float) for v in (p0, p3, t0, t3))
    k = 0.4 * float(np.linalg.norm(p3 - p0)) if k is None else k
    p1, p2 = p0 + k * t0, p3 - k * t3
    u = np.linspace(0, 1, n)[:, None]
    return (1 - u) ** 3 * p0 + 3 * (1 - u) ** 2 * u * p1 + 3 * (1 - u) * u**2 * p2 + u**3 * p3


def join(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(p, float) for p in parts])


def rot(theta: float) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def curvature_speed(pts: np.ndarray, limit: float) -> np.ndarray:
    """Per-sample speed limit: the posted limit, lowered in curves, looking 40 m ahead so drivers brake early."""
    if len(pts) < 3:
        return np.full(len(pts), limit)
    h = np.unwrap(np.arctan2(*np.gradient(pts, axis=0).T[::-1]))
    kappa = np.abs(np.gradient(h)) / STEP_M
    kappa = np.convolve(kappa, np.ones(9) / 9, mode="same")  # 4 m smoothing: resampling makes kinks
    v = np.minimum(limit, np.sqrt(LAT_ACCEL / np.maximum(kappa, 1e-9)))
    ahead = int(40 / STEP_M)
    padded = np.concatenate([v, np.full(ahead, v[-1])])
    win = np.lib.stride_tricks.sliding_window_view(padded, ahead + 1)
    return win.min(axis=1)[: len(v)]


def make_route(pts, kind: str, limit: float, main=None, **kw) -> Route:
    pts = resample(pts)
    main_arr = np.full(len(pts), kind == "main") if main is None else main(pts)
    r = Route(pts=pts, kind=kind, main=main_arr, speed_limit=limit, **kw)
    r.vmax_ahead = curvature_speed(pts, limit)
    return r


def s_at_point(route: Route, xy) -> float:
    """Arc length of the route sample nearest to xy."""
    return float(np.argmin(np.linalg.norm(route.pts - np.asarray(xy, float), axis=1)) * STEP_M)


def _lanes_from_count(cfg: SceneConfig, rng: np.random.Generator, lo: int, hi: int) -> int:
    return cfg.lanes_per_direction or int(rng.integers(lo, hi + 1))


def _kmh(v: float) -> float:
    return v / 3.6


# ----------------------------------------------------------------------------------------------- scene builders
def highway(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    n = _lanes_from_count(cfg, rng, 2, 4)
    w, shoulder = 3.75, 2.5
    median = float(rng.uniform(1.5, 8.0))
    limit = _kmh(cfg.speed_limit_kmh or float(rng.choice([100, 110, 120, 130])))
    L = half_len
    routes: list[Route] = []
    strokes, parking = [], []
    neighbours: dict[int, list[int]] = {}
    for sign in (-1, 1):  # -1: eastbound (south side), +1: westbound (north side)
        first = len(routes)
        for k in range(n):
            y = sign * (median / 2 + w * (k + 0.5))
            a, b = ((-L, y), (L, y)) if sign < 0 else ((L, y), (-L, y))
            routes.append(make_route(line(a, b), "main", limit, spawn=len(routes)))
        for k in range(n):
            neighbours[first + k] = [first + j for j in (k - 1, k + 1) if 0 <= j < n]
        yc = sign * (median / 2 + n * w / 2 + shoulder / 2 - 0.25)
        strokes.append(Stroke(line((-L, yc), (L, yc), 20), n * w + shoulder + 0.5, "asphalt"))
        strokes.append(Stroke(line((-L, yc), (L, yc), 20), n * w + shoulder + 6.0, "verge", "gravel"))
        y_in, y_out = sign * (median / 2 + 0.15), sign * (median / 2 + n * w)
        for y_edge in (y_in, y_out):
            strokes.append(Stroke(line((-L, y_edge), (L, y_edge), 20), 0.25, "marking", "white"))
        for k in range(1, n):
            y = sign * (median / 2 + w * k)
            strokes.append(Stroke(line((-L, y), (L, y), 20), 0.18, "marking", "white", dash=(6.0, 12.0)))
        for x in rng.uniform(-0.5, 0.5, 3) * L * 0.6:  # broken-down vehicles on the hard shoulder
            parking.append(Slot(float(x), sign * (median / 2 + n * w + 1.3), 0.0 if sign < 0 else math.pi, True))
    strokes.append(Stroke(line((-L, 0), (L, 0), 20), median, "verge", "grass" if median > 3 else "concrete"))
    strokes.append(Stroke(line((-L, 0), (L, 0), 20), 0.6, "barrier", "concrete"))
    rate = 0.33 * cfg.traffic_density
    return RoadNetwork(
        routes=routes,
        spawn_rates=[rate * (1.2 - 0.3 * (k % n) / max(n - 1, 1)) for k in range(2 * n)],
        spawn_choices=[[(i, 1.0)] for i in range(2 * n)],
        strokes=strokes,
        polygons=[],
        parking=parking,
        target=(float(rng.uniform(-20, 20)), 0.0),
        lane_neighbours=neighbours,
        truck_share=0.18,
        bus_share=0.03,
        style="rural",
    )


def rural(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    w = 3.25
    lam = float(rng.uniform(350, 600))
    amp = float(rng.uniform(6, min(35.0, lam**2 / 3948)))
    phase = float(rng.uniform(0, 2 * math.pi))
    x = np.arange(-half_len, half_len + 1.0, 1.0)
    centre = np.column_stack([x, amp * np.sin(2 * math.pi * x / lam + phase)])
    limit = _kmh(cfg.speed_limit_kmh or float(rng.choice([70, 80, 90])))
    east = offset(centre, -w / 2)
    west = offset(centre, w / 2)[::-1]
    routes = [make_route(east, "main", limit, spawn=0), make_route(west, "main", limit, spawn=1)]
    centre_dash = (3.0, 9.0) if rng.random() < 0.7 else None
    yellow = "yellow" if rng.random() < 0.4 else "white"
    strokes = [
        Stroke(centre, 2 * w + 6.0, "verge", "gravel"),
        Stroke(centre, 2 * w + 0.6, "asphalt"),
        Stroke(centre, 0.15, "marking", yellow, dash=centre_dash),
        Stroke(offset(centre, w), 0.15, "marking", "white"),
        Stroke(offset(centre, -w), 0.15, "marking", "white"),
    ]
    parking = []
    for xs in rng.uniform(-60, 60, 4):
        i = int(np.argmin(np.abs(x - xs)))
        side = 1 if rng.random() < 0.5 else -1
        p = offset(centre, side * (w + 2.2))[i]
        t = centre[min(i + 1, len(x) - 1)] - centre[max(i - 1, 0)]
        hd = math.atan2(t[1], t[0]) + (0 if side < 0 else math.pi)
        parking.append(Slot(float(p[0]), float(p[1]), hd, False))  # on the verge: beside, not on, the road
    i0 = int(np.argmin(np.abs(x - rng.uniform(-15, 15))))
    rate = 0.12 * cfg.traffic_density
    return RoadNetwork(
        routes=routes,
        spawn_rates=[rate, rate],
        spawn_choices=[[(0, 1.0)], [(1, 1.0)]],
        strokes=strokes,
        polygons=[],
        parking=parking,
        target=(float(centre[i0, 0]), float(centre[i0, 1])),
        truck_share=0.10,
        bus_share=0.02,
        style="rural",
    )


def intersection(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    """Four-arm signalised junction. Built for the arm entering from the south, then rotated by 90 deg steps."""
    n = _lanes_from_count(cfg, rng, 1, 2)
    w = 3.3
    park = 2.3 if rng.random() < 0.75 else 0.0
    half_road = n * w + park
    b = half_road + 1.5  # half size of the junction box
    stop_y = -b - 4.5  # stop line (a zebra crossing lies between it and the box)
    L = half_len
    limit = _kmh(cfg.speed_limit_kmh or float(rng.choice([40, 50, 60])))
    routes: list[Route] = []
    choices: list[list[tuple[int, float]]] = []
    strokes: list[Stroke] = []
    polygons: list[Polygon] = []
    parking: list[Slot] = []

    for arm in range(4):
        theta = arm * math.pi / 2
        Rm = rot(theta)
        tr = lambda p: np.asarray(p, float) @ Rm.T  # noqa: E731
        axis_phase = 0 if arm % 2 == 0 else 2  # 0/1: north-south, 2/3: east-west (straight+right, then left)
        for k in range(n):
            xk = w * (k + 0.5)
            approach = line((xk, -L), (xk, stop_y), 1.0)
            turns: list[tuple[str, np.ndarray, float]] = []
            straight = join(approach, line((xk, stop_y), (xk, L), 1.0)[1:])
            p_straight = 0.6 if n == 1 else (0.6 if k == 0 else 0.65)
            turns.append(("straight", straight, p_straight))
            if k == n - 1:  # outer lane turns right
                yr = -w * (n - 0.5)
                r = b - xk
                right = join(
                    line((xk, -L), (xk, -b), 1.0),
                    arc((b, -b), r, math.pi, math.pi / 2)[1:],
                    line((b, yr), (L, yr), 1.0)[1:],
                )
                turns.append(("right", right, 0.2 if n == 1 else 0.35))
            if k == 0:  # inner lane turns left (protected phase)
                yl = w * 0.5
                left = join(
                    line((xk, -L), (xk, -b), 1.0),
                    arc((-b, -b), b + xk, 0.0, math.pi / 2)[1:],
                    line((-b, yl), (-L, yl), 1.0)[1:],
                )
                turns.append(("left", left, 0.2 if n == 1 else 0.4))
            total = sum(p for _, _, p in turns)
            lane_choice = []
            for name, pts, p in turns:
                pts = tr(pts)
                phase = axis_phase + (1 if name == "left" else 0)

                def main_mask(q, _name=name):
                    return np.full(len(q), _name == "straight")

                r_ = make_route(
                    pts,
                    "main" if name == "straight" else "turn",
                    limit,
                    main=main_mask,
                    phase=phase,
                    spawn=len(choices),
                )
                r_.stop_s = s_at_point(r_, tr((xk, stop_y)))
                lane_choice.append((len(routes), p / total))
                routes.append(r_)
            choices.append(lane_choice)
        # paint of this arm (south arm template, rotated)
        strokes.append(Stroke(tr(line((0, -b), (0, -L), 5)), 2 * half_road + 6.0, "sidewalk", "sidewalk"))
        strokes.append(Stroke(tr(line((0, -b + 1), (0, -L), 5)), 2 * half_road, "asphalt"))
        strokes.append(Stroke(tr(line((0, stop_y), (0, -L), 5)), 0.15, "marking", "white"))
        strokes.append(Stroke(tr(line((0.3, stop_y), (0.3, -L), 5)), 0.15, "marking", "white"))
        for k in range(1, n):
            for sx in (-1, 1):
                strokes.append(
                    Stroke(
                        tr(line((sx * w * k, stop_y), (sx * w * k, -L), 5)), 0.15, "marking", "white", dash=(3.0, 6.0)
                    )
                )
        if park:
            for sx in (-1, 1):
                strokes.append(Stroke(tr(line((sx * n * w, -b - 12), (sx * n * w, -L), 5)), 0.12, "marking", "white"))
        strokes.append(Stroke(tr(line((0.2, stop_y), (n * w, stop_y), 0.5)), 0.45, "marking", "white"))
        for xz in np.arange(-half_road + 0.5, half_road - 0.4, 1.0):  # zebra crossing
            polygons.append(
                Polygon(
                    tr(np.array([[xz, -b - 0.5], [xz + 0.5, -b - 0.5], [xz + 0.5, -b - 3.5], [xz, -b - 3.5]])),
                    "marking",
                    "white",
                )
            )
        if park:
            for y in np.arange(-b - 15, -L * 0.5, -6.0):
                for sx, hd in ((1, math.pi / 2), (-1, -math.pi / 2)):
                    p = tr((sx * (n * w + park / 2), y))
                    parking.append(Slot(float(p[0]), float(p[1]), hd + theta, True))
    box = np.array([[-b, -b], [b, -b], [b, b], [-b, b]], float)
    polygons.insert(0, Polygon(box, "asphalt"))
    green_main, green_left = float(rng.uniform(12, 20)), float(rng.uniform(5, 9))
    plan = SignalPlan(
        [(0, green_main, 3.0, 2.0), (1, green_left, 3.0, 2.0), (2, green_main, 3.0, 2.0), (3, green_left, 3.0, 2.0)]
    )
    plan.offset_s = float(rng.uniform(0, plan.cycle))
    rate = 0.09 * cfg.traffic_density
    return RoadNetwork(
        routes=routes,
        spawn_rates=[rate] * len(choices),
        spawn_choices=choices,
        strokes=strokes,
        polygons=polygons,
        parking=parking,
        target=(float(rng.uniform(-8, 8)), float(rng.uniform(-8, 8))),
        signals=plan,
        long_trucks=False,
        truck_share=0.05,
        bus_share=0.05,
        style="urban",
    )


def roundabout(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    """Single-lane roundabout, counter-clockwise (right-hand traffic), 3 or 4 arms; entering traffic yields."""
    ring_r = float(rng.uniform(14, 22))
    ring_w, w = 5.5, 3.5
    arms = 4 if rng.random() < 0.7 else 3
    rot0 = float(rng.uniform(0, 2 * math.pi))
    angles = [rot0 + 2 * math.pi * a / arms for a in range(arms)]
    limit = _kmh(cfg.speed_limit_kmh or 50.0)
    L = half_len
    d_e = ring_r + 14.0  # where approach lanes start to curve in
    delta = 0.35 + 3.0 / ring_r  # ring angle between an arm's axis and its merge/diverge points
    routes: list[Route] = []
    choices: list[list[tuple[int, float]]] = []
    strokes: list[Stroke] = []

    def ring_main(pts):
        return np.abs(np.linalg.norm(pts, axis=1) - ring_r) < 0.3

    for ai, a in enumerate(angles):
        u = np.array([math.cos(a), math.sin(a)])
        nrm = np.array([-u[1], u[0]])  # +90 deg: the incoming lane is on this side
        lane_choice = []
        for bi, b in enumerate(angles):
            if bi == ai:
                continue
            ub = np.array([math.cos(b), math.sin(b)])
            nb = np.array([-ub[1], ub[0]])
            p_in0 = u * L + nrm * w / 2
            p_in1 = u * d_e + nrm * w / 2
            a_in = a + delta
            a_out = b - delta
            while a_out <= a_in:
                a_out += 2 * math.pi
            p_ring_in = ring_r * np.array([math.cos(a_in), math.sin(a_in)])
            t_ring_in = np.array([-math.sin(a_in), math.cos(a_in)])
            p_ring_out = ring_r * np.array([math.cos(a_out), math.sin(a_out)])
            t_ring_out = np.array([-math.sin(a_out), math.cos(a_out)])
            p_out1 = ub * d_e - nb * w / 2
            p_out0 = ub * L - nb * w / 2
            pts = join(
                line(p_in0, p_in1, 1.0),
                bezier(p_in1, -u, p_ring_in, t_ring_in)[1:],
                arc((0, 0), ring_r, a_in, a_out)[1:],
                bezier(p_ring_out, t_ring_out, p_out1, ub)[1:],
                line(p_out1, p_out0, 1.0)[1:],
            )
            lane_choice.append((len(routes), 1.0 / (arms - 1)))
            routes.append(make_route(pts, "entry", limit, main=ring_main, spawn=len(choices)))
        choices.append(lane_choice)
        strokes.append(Stroke(line(u * (ring_r - 1), u * L, 5), 2 * w + 5.0, "verge", "sidewalk"))
        strokes.append(Stroke(line(u * (ring_r - 1), u * L, 5), 2 * w + 0.6, "asphalt"))
        strokes.append(Stroke(line(u * (d_e + 4), u * L, 5), 0.15, "marking", "white", dash=(3, 6)))
        # give-way line across the entry lane where it meets the ring
        entry = routes[lane_choice[0][0]]
        i_gw = int(np.argmax(np.linalg.norm(entry.pts, axis=1) < ring_r + ring_w / 2 + 0.6))
        p_gw, t_gw = entry.pts[i_gw], entry.pts[i_gw + 1] - entry.pts[i_gw]
        n_gw = np.array([-t_gw[1], t_gw[0]]) / np.linalg.norm(t_gw)
        strokes.append(
            Stroke(line(p_gw - n_gw * w / 2, p_gw + n_gw * w / 2, 0.2), 0.3, "marking", "white", dash=(0.6, 0.4))
        )
    ring = arc((0, 0), ring_r, 0, 2 * math.pi, 1.0)
    strokes.append(Stroke(ring, ring_w + 5.0, "verge", "sidewalk"))
    strokes.append(Stroke(ring, ring_w + 1.2, "asphalt"))
    polygons = [
        Polygon(arc((0, 0), ring_r - ring_w / 2 - 0.4, 0, 2 * math.pi, 1.0), "island", "kerb"),
        Polygon(arc((0, 0), ring_r - ring_w / 2 - 1.8, 0, 2 * math.pi, 1.0), "island", "grass"),
    ]
    parking = []
    for a in angles:  # a few cars parked along an arm beside the road
        u = np.array([math.cos(a), math.sin(a)])
        nrm = np.array([-u[1], u[0]])
        for d in rng.uniform(ring_r + 25, ring_r + 60, 1):
            p = u * d + nrm * (w + 1.8)
            parking.append(Slot(float(p[0]), float(p[1]), a + math.pi, False))
    rate = 0.11 * cfg.traffic_density
    return RoadNetwork(
        routes=routes,
        spawn_rates=[rate] * arms,
        spawn_choices=choices,
        strokes=strokes,
        polygons=polygons,
        parking=parking,
        target=(float(rng.uniform(-5, 5)), float(rng.uniform(-5, 5))),
        truck_share=0.06,
        bus_share=0.03,
        style="suburban",
        long_trucks=False,
    )


def ramp(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    """A highway with a curved on-ramp: loop curve, acceleration lane, taper, merge into the outer lane."""
    net = highway(cfg.model_copy(update={"lanes_per_direction": cfg.lanes_per_direction or 2}), rng, half_len)
    n = len(net.routes) // 2
    w = 3.75
    outer = net.routes[n - 1]  # eastbound outer lane
    y_o = float(outer.pts[0, 1])
    radius = float(rng.uniform(45, 90))
    accel_len, taper = float(rng.uniform(90, 140)), 60.0
    x_a = float(rng.uniform(-30, 10))  # where the acceleration lane begins
    y_a = y_o - w
    cx, cy = x_a, y_a - radius
    x0 = cx - radius
    start_y = min(-half_len, cy - 40.0)
    u = np.linspace(0, 1, int(taper) + 1)
    taper_pts = np.column_stack([x_a + accel_len + taper * u, y_a + w * (0.5 - 0.5 * np.cos(math.pi * u))])
    pts = join(
        line((x0, start_y), (x0, cy), 1.0),
        arc((cx, cy), radius, math.pi, math.pi / 2)[1:],
        line((x_a, y_a), (x_a + accel_len, y_a), 1.0)[1:],
        taper_pts[1:],
        line((x_a + accel_len + taper, y_o), (half_len, y_o), 1.0)[1:],
    )
    limit = outer.speed_limit

    def on_mainline(q):
        return np.abs(q[:, 1] - y_o) < 0.05

    net.routes.append(make_route(pts, "ramp", limit, main=on_mainline, spawn=len(net.spawn_rates)))
    net.spawn_rates.append(0.12 * cfg.traffic_density)
    net.spawn_choices.append([(len(net.routes) - 1, 1.0)])
    ramp_paint = join(
        line((x0, start_y), (x0, cy), 5.0),
        arc((cx, cy), radius, math.pi, math.pi / 2)[1:],
        line((x_a, y_a), (x_a + accel_len, y_a), 2.0)[1:],
        taper_pts[1:],
    )
    net.strokes.append(Stroke(ramp_paint, w + 6.0, "verge", "gravel"))
    net.strokes.append(Stroke(ramp_paint, w + 1.0, "asphalt"))
    edge = offset(resample(ramp_paint, 1.0), -(w / 2 + 0.2))
    net.strokes.append(Stroke(edge, 0.2, "marking", "white"))
    net.strokes.append(
        Stroke(line((x_a, y_o - w / 2), (x_a + accel_len, y_o - w / 2), 2), 0.3, "marking", "white", dash=(3.0, 9.0))
    )
    net.target = (x_a + float(rng.uniform(-10, 40)), y_a - float(rng.uniform(0, 20)))
    return net


BUILDERS = {"highway": highway, "rural": rural, "intersection": intersection, "roundabout": roundabout, "ramp": ramp}


def build_network(cfg: SceneConfig, rng: np.random.Generator, half_len: float) -> RoadNetwork:
    return BUILDERS[cfg.scene](cfg, rng, half_len)
