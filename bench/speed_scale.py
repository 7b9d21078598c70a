"""Speeds without telemetry or calibration (the vehicle-size scale), checked against truth. Prints its figures.

    python3 bench/speed_scale.py                      # every check (about 10-20 min on 2 busy CPU cores)
    python3 bench/speed_scale.py --only nadir toll    # some of them
    python3 bench/speed_scale.py --synth full         # the whole 15-clip synthetic suite instead of the quick 3

Checks (targets of issue 14):
  nadir  real 1080p nadir clip, size prior vs. the same run with its georeferenced corners: per-track speed ratio,
         median within +-10 %, 90 % of tracks within +-25 %
  toll   real oblique toll-plaza clip: median moving speed 20-130 km/h (overall and per segment), metres per
         pixel growing towards the top (the horizon) in every size-prior segment
  synth  synthetic suite (bench.accuracy's clips) with the telemetry left out: speed error (mean |error| % of true
         speeds >= 10 km/h, vehicles tracked >= 1 s) <= 5 %
  uavdt  UAVDT M1303 and M1003 (night), no telemetry: >= 90 % of moving tracks older than 1 s have a speed
Clips and ground truth come from ../shared (or $AIRPATROL_SHARED); runs go to --workdir, never into the repository.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHECKS = ("nadir", "toll", "synth", "uavdt")


def _config(calibration: str | None = None):
    from tracking.config import PipelineConfig
    from tracking.scale import load_calibration

    cfg = PipelineConfig()
    if calibration:
        cfg.calibration = load_calibration(calibration)
    return cfg


def _run(video: Path, out: Path, cfg, reuse: bool, max_frames: int | None = None, pipeline=None) -> Path:
    from edge.runner import process_video

    if reuse and (out / "tracks.csv").is_file():
        return out
    process_video(video, out, cfg, write_video=False, progress=False, max_frames=max_frames, pipeline=pipeline)
    return out


def _scale_line(run: Path) -> str:
    import json

    s = json.loads((run / "summary.json").read_text()).get("scale") or {}
    return s.get("detail") or s.get("source") or "none"


def matched_speed_ratios(run: Path, reference: Path, min_frames: int = 10) -> pd.Series:
    """Per vehicle: median speed of ``run`` over median speed of ``reference`` on the frames where both tracked it
    (boxes IoU > 0.5) and both have a speed (reference >= 10 km/h)."""
    a, b = pd.read_csv(run / "tracks.csv"), pd.read_csv(reference / "tracks.csv")
    m = a.merge(b, on="frame", suffixes=("_a", "_b"))
    iw = (np.minimum(m.x2_a, m.x2_b) - np.maximum(m.x1_a, m.x1_b)).clip(0)
    ih = (np.minimum(m.y2_a, m.y2_b) - np.maximum(m.y1_a, m.y1_b)).clip(0)
    inter = iw * ih
    union = (m.x2_a - m.x1_a) * (m.y2_a - m.y1_a) + (m.x2_b - m.x1_b) * (m.y2_b - m.y1_b) - inter
    m = m[(inter / union > 0.5) & m.speed_kmh_a.notna() & m.speed_kmh_b.notna() & (m.speed_kmh_b >= 10)]
    g = m.groupby(["track_id_a", "track_id_b"]).agg(
        n=("frame", "size"), a=("speed_kmh_a", "median"), b=("speed_kmh_b", "median")
    )
    g = g[g.n >= min_frames]
    return g.a / g.b


def coverage(run: Path, fps: float, min_age_s: float = 1.0) -> tuple[int, float, float]:
    """(moving tracks older than ``min_age_s``, share with a speed, share of their rows past that age with one)."""
    d = pd.read_csv(run / "tracks.csv")
    first = d.groupby("track_id").frame.transform("min")
    d["age_s"] = (d.frame - first) / fps
    per = d.groupby("track_id").agg(moving=("moving", "mean"), age=("age_s", "max"))
    ids = per[(per.moving >= 0.5) & (per.age > min_age_s)].index
    old = d[d.track_id.isin(ids) & (d.age_s > min_age_s)]
    with_speed = old.groupby("track_id").speed_kmh.apply(lambda s: s.notna().any())
    return (
        len(ids),
        float(with_speed.mean()) if len(ids) else math.nan,
        float(old.speed_kmh.notna().mean()) if len(old) else math.nan,
    )


def check_nadir(shared: Path, wd: Path, reuse: bool) -> bool:
    clip = shared / "data/real_video/nadir_interchange"
    size = _run(clip / "drone.mp4", wd / "nadir-size", _config(), reuse)
    ref = _run(clip / "drone.mp4", wd / "nadir-georef", _config(str(clip / "georef_corners.json")), reuse)
    r = matched_speed_ratios(size, ref)
    med, within25, within10 = float(r.median()), float((abs(r - 1) <= 0.25).mean()), float((abs(r - 1) <= 0.10).mean())
    n, cov, rows = coverage(size, 25.0)
    ok = abs(med - 1) <= 0.10 and within25 >= 0.90
    print(f"[nadir] scale: {_scale_line(size)}")
    print(
        f"[nadir] {len(r)} vehicles matched with the georeferenced run: speed ratio median {med:.3f}, "
        f"within +-10 % {100 * within10:.0f} %, within +-25 % {100 * within25:.0f} %  -> {'PASS' if ok else 'FAIL'} "
        f"(target: median within +-10 %, >= 90 % within +-25 %)"
    )
    print(
        f"[nadir] moving tracks older than 1 s: {n}, with a speed {100 * cov:.0f} % (rows past 1 s: {100 * rows:.0f} %)"
    )
    return ok


def _segment_of(t: pd.Series, starts: list[tuple[float, int]]) -> np.ndarray:
    """The size-prior segment each time falls in, from the segments' start times."""
    times = np.array([s for s, _ in starts])
    segs = np.array([g for _, g in starts])
    return segs[np.clip(np.searchsorted(times, t.to_numpy(), side="right") - 1, 0, len(segs) - 1)]


def check_toll(shared: Path, wd: Path, reuse: bool) -> bool:
    """Per size-prior segment: metres per pixel (across the frame, at the image centre column) at rows 30/50/70/90 %
    of the segment's anchor frame must grow towards the top (the horizon), and the median speed of the moving
    vehicles tracked in it (median per vehicle, then over vehicles; segments with >= 3 vehicles) must be 20-130 km/h;
    the whole clip's median too."""
    from tracking.pipeline import Pipeline
    from tracking.scale import GroundFrame
    from tracking.types import ScaleSource

    video = shared / "data/real_video/toll_plaza/247589_medium.mp4"
    cfg = _config()
    pipe = Pipeline(cfg)
    run = _run(video, wd / "toll-size", cfg, reuse=False, pipeline=pipe)
    summ = pd.read_csv(run / "tracks_summary.csv")
    moving = summ[summ.moving & summ.median_speed_kmh.notna()]
    med = float(moving.median_speed_kmh.median()) if len(moving) else math.nan
    n, cov, rows = coverage(run, 25.0)
    w, h = 720, 1280
    sizes = pipe.scale.sizes
    d = pd.read_csv(run / "tracks.csv")
    d = d[d.speed_kmh.notna() & d.track_id.isin(moving.track_id)]
    d["segment"] = _segment_of(d.t, sizes.segment_starts)
    per_seg = d.groupby(["segment", "track_id"]).speed_kmh.median().groupby("segment")
    print(f"[toll] scale: {_scale_line(run)}")
    ok = 20 <= med <= 130 and bool(sizes.models_by_segment)
    for seg, m in sorted(sizes.models_by_segment.items()):
        g = GroundFrame(m.image_to_ground(), ScaleSource.SIZE_PRIOR, None, m)
        mpp = [g.metres_per_pixel(w / 2, f * h) for f in (0.3, 0.5, 0.7, 0.9)]
        grows = all(a > b for a, b in zip(mpp, mpp[1:]))
        sig = [100 * m.rel_sigma_at(f * h) for f in (0.3, 0.9)]
        speeds = per_seg.get_group(seg) if seg in per_seg.groups else pd.Series(dtype=float)
        seg_med = float(speeds.median()) if len(speeds) else math.nan
        plausible = len(speeds) < 3 or 20 <= seg_med <= 130
        ok &= grows and plausible
        view = f"oblique, horizon at row {m.horizon_row:.0f} from {m.horizon_from}" if m.oblique else "one scale"
        print(
            f"[toll] segment {seg} ({view}, {m.n_tracks} vehicles): metres per pixel at rows 30/50/70/90 %: "
            + ", ".join(f"{v:.3f}" for v in mpp)
            + f" (+-{sig[0]:.0f} % at 30 %, +-{sig[1]:.0f} % at 90 %), "
            f"{'growing towards the horizon' if grows else 'NOT growing towards the horizon'}; {len(speeds)} moving "
            f"vehicles with a speed, median {seg_med:.1f} km/h{'' if plausible else ' (implausible)'}"
        )
    print(
        f"[toll] {len(moving)} moving tracks with a speed, median {med:.1f} km/h; moving tracks older than 1 s: {n}, "
        f"with a speed {100 * cov:.0f} %  -> {'PASS' if ok else 'FAIL'} (target: median 20-130 km/h overall and "
        f"per segment with >= 3 vehicles; metres per pixel growing towards the horizon in every segment)"
    )
    return ok


def check_synth(shared: Path, wd: Path, reuse: bool, full: bool, frames: int | None) -> bool:
    from bench.accuracy.execute import prepare
    from bench.accuracy.suite import build_suite
    from tracking.evaluation import evaluate_run

    specs = build_suite(quick=not full, frames=frames)
    pooled_abs, pooled_n, maes = 0.0, 0, []
    for spec in specs:
        prep = prepare(spec, wd / "synth")
        bare = wd / "synth-no-telemetry" / spec.name
        bare.mkdir(parents=True, exist_ok=True)
        link = bare / "video.mp4"  # the clip without its .SRT beside it: no telemetry
        if not link.exists():
            link.symlink_to(prep.video.resolve())
        run = _run(link, wd / "synth-runs" / spec.name, _config(), reuse, max_frames=spec.frames)
        ev = evaluate_run(run, prep.ground_truth, min_track_s=1.0)
        sp = ev.get("speed") or {}
        n_pct, mape = sp.get("n_pct") or 0, sp.get("mape_pct")
        if mape is not None and n_pct:
            pooled_abs += mape * n_pct
            pooled_n += n_pct
        maes.append(sp.get("mae_kmh"))
        print(
            f"[synth] {spec.name}: {_scale_line(run)}; speed MAE {sp.get('mae_kmh')} km/h, mean |error| "
            f"{mape} % over {n_pct} matches, coverage {sp.get('coverage')}"
        )
    pooled = pooled_abs / pooled_n if pooled_n else math.nan
    ok = pooled <= 5.0
    print(
        f"[synth] {len(specs)} clips, pooled mean |speed error| {pooled:.2f} % (true speeds >= 10 km/h, tracked >= 1 s)"
        f"  -> {'PASS' if ok else 'FAIL'} (target <= 5 %)"
    )
    return ok


def check_uavdt(shared: Path, wd: Path, reuse: bool, frames: int | None) -> bool:
    ok = True
    for name, src, fps in (
        ("M1303", shared / "data/mot/uavdt_M1303", 30.0),
        ("M1003-night", shared / "data/mot/uavdt_M1003_night_dev/video.mp4", 30.0),
    ):
        if not src.exists():
            print(f"[uavdt] {name}: {src} missing, skipped")
            continue
        run = _run(src, wd / f"uavdt-{name}", _config(), reuse, max_frames=frames)
        n, cov, rows = coverage(run, fps)
        passed = cov >= 0.90
        ok &= passed
        print(f"[uavdt] {name}: scale: {_scale_line(run)}")
        print(
            f"[uavdt] {name}: {n} moving tracks older than 1 s, {100 * cov:.0f} % with a speed (rows past 1 s: "
            f"{100 * rows:.0f} %)  -> {'PASS' if passed else 'FAIL'} (target >= 90 %)"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS))
    p.add_argument("--workdir", type=Path, default=Path("/tmp/airpatrol-speed-scale"))
    p.add_argument("--shared", type=Path, default=Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared")))
    p.add_argument("--synth", choices=("quick", "full"), default="quick", help="3 quick clips or the 15-clip suite")
    p.add_argument("--synth-frames", type=int, default=None, help="frames per synthetic clip (suite default)")
    p.add_argument("--uavdt-frames", type=int, default=None, help="first N frames of each UAVDT sequence")
    p.add_argument("--reuse", action="store_true", help="reuse runs already in --workdir")
    args = p.parse_args(argv)
    if not (args.shared / "data").is_dir():
        print(f"error: {args.shared}: shared data folder not found (set AIRPATROL_SHARED)", file=sys.stderr)
        return 2
    os.environ.setdefault("YOLO_OFFLINE", "1")
    args.workdir.mkdir(parents=True, exist_ok=True)
    results = {}
    if "nadir" in args.only:
        results["nadir"] = check_nadir(args.shared, args.workdir, args.reuse)
    if "toll" in args.only:
        results["toll"] = check_toll(args.shared, args.workdir, args.reuse)
    if "synth" in args.only:
        results["synth"] = check_synth(args.shared, args.workdir, args.reuse, args.synth == "full", args.synth_frames)
    if "uavdt" in args.only:
        results["uavdt"] = check_uavdt(args.shared, args.workdir, args.reuse, args.uavdt_frames)
    print("summary: " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
