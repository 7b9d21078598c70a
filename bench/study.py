"""Traffic-study benchmark: the study (tracking.study) against the scene generator's truth, and its speed.

    python3 bench/study.py                         # intersection, roundabout, ramp x nadir/oblique x 60/120 m
    python3 bench/study.py --scenes ramp --seconds 120 --altitudes 80
    python3 bench/study.py --perf                  # a 5-minute 1080p flight at 25 fps: load + study time
    python3 bench/study.py --runs /tmp/runs/nadir /tmp/runs/toll   # real runs of `airpatrol process`: what it finds
    python3 bench/study.py --e2e --quick           # end to end: rendered video -> process -> study vs truth
    python3 bench/study.py --e2e --work /tmp/study_e2e --skip-render  # cached renders, process + study again
    python3 bench/study.py --e2e --runs-dir /tmp/my_runs   # rescore run folders DIR/<case> made elsewhere
    python3 bench/study.py --e2e --seed 2 --work /tmp/e2e_seed2  # the set's cases at another seed (other scenes)
    python3 bench/study.py --e2e --quick --film-fps 30 --work /tmp/e2e_30fps  # the flights filmed at 30 fps

End to end (``--e2e``, bench/study_e2e.py): the detector and tracker *are* in that loop; see its doc.

What is scored: the generator's traffic (exact routes, vehicle sizes, scripted near-misses) seen through its camera:
a vehicle is observed while its centre projects inside the 1920x1080 frame (10 px margin), its observed ground
position carries white noise of ``--noise-px`` pixels at the local ground scale (oblique views: larger far away).
The drone hovers (``HOVER_DRIFT_MPS``, no yaw). The detector and tracker are *not* in this loop (identity switches
and missed vehicles are scored by ``airpatrol eval``); this measures the study's own logic: approaches, movements, lanes and conflicts.

Scored vehicles: the moving vehicles that entered and left the view during the flight (truth) and the study's
vehicles not present at its start or end (those at the edges of a flight are counted by the study as
present-at-start/-end, by design). Movement counts: per (origin, destination, movement) cell, study approaches
matched to the truth's arms by position and heading. Conflicts: the truth's time-to-collision
conflicts (exact states, both vehicles visible) against the study's TTC conflicts; a match is the same pair within
2 s.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from tracking.evaluation.study_score import inferred_ends
from tracking.study import StudyConfig, Trajectory, compute_study, load_run_trajectories
from vision.synth.generator import simulate_traffic
from vision.synth.scene import SceneConfig
from vision.synth.study_truth import route_truth, ttc_conflicts, vehicle_truth

MARGIN_PX = 10.0
# A study flight hovers in position hold (GNSS hold drifts well under a metre): the generator's default drift
# (0.4 m/s, for tracking tests) would move a 5-minute view by 100 m.
HOVER_DRIFT_MPS = 0.02


def observe(sim, cfg: SceneConfig, noise_px: float, seed: int):
    """Visible sets per frame and noisy observed trajectories (sim id -> list of (t, x, y))."""
    rng = np.random.default_rng(seed)
    visible: list[set[int]] = []
    obs: dict[int, list[tuple[float, float, float]]] = {}
    for i, st in enumerate(sim.frames):
        if len(st.vid) == 0:
            visible.append(set())
            continue
        pts = np.column_stack([st.x, st.y, np.zeros(len(st.x))])
        uv, depth = sim.cam.project(i, pts)
        ok = (
            (depth > 0)
            & (uv[:, 0] >= MARGIN_PX)
            & (uv[:, 0] <= cfg.width - MARGIN_PX)
            & (uv[:, 1] >= MARGIN_PX)
            & (uv[:, 1] <= cfg.height - MARGIN_PX)
        )
        visible.append({int(v) for v in st.vid[ok]})
        if not ok.any():
            continue
        # local ground scale (m per px) at each vehicle: one pixel step mapped back to the ground
        g0 = sim.cam.image_to_ground(i, uv[ok])
        g1 = sim.cam.image_to_ground(i, uv[ok] + [1.0, 0.0])
        scale = np.linalg.norm(g1 - g0, axis=1)
        noisy = (
            np.column_stack([st.x[ok], st.y[ok]]) + rng.normal(0, 1, (int(ok.sum()), 2)) * (noise_px * scale)[:, None]
        )
        for v, (x, y) in zip(st.vid[ok].tolist(), noisy.tolist()):
            obs.setdefault(int(v), []).append((i / cfg.fps, x, y))
    return visible, obs


def match_approaches(study, arms) -> dict[str, str]:
    """Study approach id -> truth arm name: the nearest arm (its ends in the view) within 60 m whose inbound
    heading agrees within 50 deg."""
    out = {}
    for a in study.approaches:
        best, best_cost = None, math.inf
        for arm in arms:
            dist = math.hypot(a.x - arm.point[0], a.y - arm.point[1])
            dh = abs((a.heading_deg - arm.heading_deg + 180) % 360 - 180)
            if dist < 60 and dh < 50 and dist + dh < best_cost:
                best, best_cost = arm.name, dist + dh
        if best is not None:
            out[a.id] = best
    return out


def score_case(scene: str, pitch: float, altitude: float, args) -> dict:
    cfg = SceneConfig(
        scene=scene,
        seed=args.seed,
        duration_s=args.seconds,
        fps=args.fps,
        width=1920,
        height=1080,
        altitude_m=altitude,
        gimbal_pitch_deg=pitch,
        near_misses=args.near_misses,
        parked_vehicles=0,
        drift_mps=HOVER_DRIFT_MPS,
        yaw_rate_dps=0.0,
    )
    t0 = time.perf_counter()
    sim = simulate_traffic(cfg)
    sim_s = time.perf_counter() - t0
    visible, obs = observe(sim, cfg, args.noise_px, args.seed)
    arms, routes = route_truth(sim.net, sim.cam.footprint(0))
    truth = vehicle_truth(sim.net, sim.frames, visible, routes)
    truth_conf = ttc_conflicts(sim.frames, sim.specs, cfg.fps, visible, ttc_s=args.ttc, near_misses=sim.near_misses)
    trajs = [
        Trajectory(v, sim.specs[v].cls, np.array([p[0] for p in pts]), np.array([[p[1], p[2]] for p in pts]))
        for v, pts in obs.items()
        if len(pts) >= 2
    ]
    t1 = time.perf_counter()
    study = compute_study(trajs, None, StudyConfig(bin_s=args.seconds, ttc_s=args.ttc))
    study_s = time.perf_counter() - t1
    amap = match_approaches(study, arms)
    # scored vehicles
    t_scored = {v: tv for v, tv in truth.items() if tv.entered_in_view and tv.left_in_view}
    s_by_id = {v.track_id: v for v in study.vehicles}
    s_scored = {
        v.track_id: v
        for v in study.vehicles
        if not v.present_at_start and not v.present_at_end and v.movement != "stationary"
    }
    t_counts = Counter((tv.origin, tv.destination, tv.movement) for tv in t_scored.values())
    s_counts = Counter(
        (amap.get(v.origin or "", "?"), amap.get(v.destination or "", "?"), v.movement) for v in s_scored.values()
    )
    cells = set(t_counts) | set(s_counts)
    within = 0
    worst = 0.0
    for c in cells:
        tr, st_ = t_counts.get(c, 0), s_counts.get(c, 0)
        ok = abs(st_ - tr) <= (1 if tr < 20 else 0.05 * tr)
        within += ok
        if tr:
            worst = max(worst, abs(st_ - tr) / tr)
    od_ok = sum(
        1
        for v, tv in t_scored.items()
        if v in s_by_id
        and amap.get(s_by_id[v].origin or "") == tv.origin
        and amap.get(s_by_id[v].destination or "") == tv.destination
    )
    lane_pairs = [
        (tv.lane, s_by_id[v].lane)
        for v, tv in truth.items()
        if v in s_by_id and s_by_id[v].lane is not None and amap.get(s_by_id[v].origin or "") == tv.origin
    ]
    lane_ok = sum(a == b for a, b in lane_pairs)
    inferred_right, inferred_wrong = inferred_ends(
        study.vehicles,
        amap,
        lambda tid: (truth[tid].origin, truth[tid].destination) if tid in truth else None,
    )
    s_ttc = [c for c in study.conflicts if c.kind == "ttc"]
    matched_truth = 0
    matched_study: set[int] = set()
    for tc in truth_conf:
        hit = [k for k, c in enumerate(s_ttc) if {c.track_a, c.track_b} == {tc.a, tc.b} and abs(c.t - tc.t) <= 2.0]
        if hit:
            matched_truth += 1
            matched_study.update(hit)
    scripted = [tc for tc in truth_conf if tc.scripted]
    scripted_hit = sum(
        1 for tc in scripted if any({c.track_a, c.track_b} == {tc.a, tc.b} and abs(c.t - tc.t) <= 2.0 for c in s_ttc)
    )
    return {
        "case": f"{scene} {'nadir' if pitch <= -89.9 else f'oblique {pitch:g}'} {altitude:g} m",
        "vehicles": len(trajs),
        "samples": int(sum(len(t.t) for t in trajs)),
        "approaches": f"{len(study.approaches)}/{len(arms)} ({len(amap)} matched)",
        "scored": len(t_scored),
        "cells_within": f"{within}/{len(cells)}",
        "worst_cell_err": worst,
        "od_correct": od_ok / max(len(t_scored), 1),
        "lane_correct": lane_ok / max(len(lane_pairs), 1),
        "lane_n": len(lane_pairs),
        "conf_truth": len(truth_conf),
        "conf_study": len(s_ttc),
        "recall": matched_truth / len(truth_conf) if truth_conf else float("nan"),
        "precision": len(matched_study) / len(s_ttc) if s_ttc else float("nan"),
        "scripted": f"{scripted_hit}/{len(scripted)} of {len(sim.near_misses)}",
        "pet": sum(c.kind == "pet" for c in study.conflicts),
        "inferred": f"{inferred_right}/{inferred_wrong}",
        "sim_s": sim_s,
        "study_s": study_s,
        "t_counts": t_counts,
        "s_counts": s_counts,
    }


def perf(args) -> None:
    """A 5-minute 1080p flight at 25 fps: tracks.csv written like `airpatrol process`, then load + study timed."""
    cfg = SceneConfig(
        scene="ramp",
        seed=args.seed,
        duration_s=300,
        fps=25,
        width=1920,
        height=1080,
        altitude_m=100,
        traffic_density=1.5,
        parked_vehicles=0,
        drift_mps=HOVER_DRIFT_MPS,
        yaw_rate_dps=0.0,
    )
    sim = simulate_traffic(cfg)
    _, obs = observe(sim, cfg, args.noise_px, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tracks.csv"
        rows = 0
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["frame", "t", "track_id", "class", "ground_x_m", "ground_y_m", "lat", "lon"])
            for v, pts in obs.items():
                for t, x, y in pts:
                    w.writerow(
                        [int(round(t * cfg.fps)) + 1, f"{t:.4f}", v, sim.specs[v].cls, f"{x:.2f}", f"{y:.2f}", "", ""]
                    )
                    rows += 1
        t0 = time.perf_counter()
        trajs = load_run_trajectories(Path(tmp))
        t1 = time.perf_counter()
        study = compute_study(trajs, None, StudyConfig())
        t2 = time.perf_counter()
    print(
        f"perf: 5-min 1080p ramp flight at 25 fps, {len(trajs)} tracks, {rows} rows: load {t1 - t0:.2f} s, "
        f"study {t2 - t1:.2f} s, total {t2 - t0:.2f} s ({len(study.conflicts)} conflicts, "
        f"{len(study.approaches)} approaches); threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )


def real_runs(paths: list[Path]) -> None:
    for run in paths:
        try:
            trajs = load_run_trajectories(run)
            t0 = time.perf_counter()
            study = compute_study(trajs, None, StudyConfig())
        except ValueError as exc:
            print(f"{run}: {exc}")
            continue
        mv = Counter(v.movement for v in study.vehicles)
        od = Counter((v.origin, v.destination) for v in study.vehicles if v.origin and v.destination)
        print(
            f"{run}: {len(trajs)} tracks, {study.t1 - study.t0:.1f} s, {len(study.approaches)} approaches "
            f"({', '.join(f'{a.id} {a.name} {a.heading_deg:.0f} deg' for a in study.approaches)}), study "
            f"{time.perf_counter() - t0:.2f} s"
        )
        print(f"  movements: {dict(mv)}")
        print(f"  O-D pairs: {dict(od)}")
        print(f"  lanes: {[(ln.approach, ln.lane, ln.vehicles) for ln in study.lanes]}")
        print(f"  conflicts: {Counter(c.kind for c in study.conflicts)}")
        for w in study.warnings:
            print(f"  note: {w}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", nargs="+", default=["intersection", "roundabout", "ramp"])
    ap.add_argument("--pitches", nargs="+", type=float, default=[-90.0, -55.0])
    ap.add_argument("--altitudes", nargs="+", type=float, default=[60.0, 120.0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--fps", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1, help="the scenes' seed (truth mode and --e2e; the sets use 1)")
    ap.add_argument("--noise-px", type=float, default=1.5)
    ap.add_argument("--near-misses", type=int, default=10)
    ap.add_argument("--ttc", type=float, default=1.5)
    ap.add_argument("--perf", action="store_true", help="only the speed test")
    ap.add_argument("--runs", nargs="*", type=Path, default=None, help="real run folders: report what the study finds")
    ap.add_argument("--verbose", action="store_true", help="print the count cells of each case")
    e2e = ap.add_argument_group("end to end (--e2e): video -> airpatrol process -> airpatrol study")
    e2e.add_argument("--e2e", action="store_true", help="render flights, process and study them, score vs truth")
    e2e.add_argument("--quick", action="store_true", help="2 one-minute 1080p cases (development)")
    e2e.add_argument("--work", default="/tmp/study_e2e", help="renders and runs, DIR/<case>/{synth,run}")
    e2e.add_argument("--skip-render", action="store_true", help="only cached renders (a missing one fails its case)")
    e2e.add_argument("--skip-process", action="store_true", help="score the runs already in --work")
    e2e.add_argument("--runs-dir", default=None, help="score existing process runs DIR/<case> (not processed here)")
    e2e.add_argument("--cases", nargs="*", default=None, help="only cases whose name contains one of these")
    e2e.add_argument(
        "--film-fps",
        type=float,
        default=None,
        help="render every case at this frame rate (a drone records 25-60 fps; the sets use 15, the 4K ramp 10)",
    )
    args = ap.parse_args(argv)
    if args.e2e:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository root
        from bench.study_e2e import main_e2e

        return main_e2e(args)
    if args.perf:
        perf(args)
        return 0
    if args.runs is not None:
        real_runs(args.runs)
        return 0
    print(
        f"{'case':28} {'veh':>4} {'appr':>12} {'scored':>6} {'cells ok':>9} {'worst':>6} {'O-D':>6} {'lane':>6} "
        f"{'conf T/S':>8} {'recall':>6} {'prec':>6} {'scripted':>10} {'pet':>4} {'infer r/w':>9} {'study s':>7}"
    )
    for scene in args.scenes:
        for pitch in args.pitches:
            for alt in args.altitudes:
                r = score_case(scene, pitch, alt, args)
                print(
                    f"{r['case']:28} {r['vehicles']:4d} {r['approaches']:>12} {r['scored']:6d} {r['cells_within']:>9} "
                    f"{100 * r['worst_cell_err']:5.1f}% {100 * r['od_correct']:5.1f}% {100 * r['lane_correct']:5.1f}% "
                    f"{r['conf_truth']:3d}/{r['conf_study']:<4d} {r['recall']:6.2f} {r['precision']:6.2f} "
                    f"{r['scripted']:>10} {r['pet']:4d} {r['inferred']:>9} {r['study_s']:7.2f}",
                    flush=True,
                )
                if args.verbose:
                    for c in sorted(set(r["t_counts"]) | set(r["s_counts"]), key=str):
                        print(f"    {c}: truth {r['t_counts'].get(c, 0)} study {r['s_counts'].get(c, 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
