"""Pipeline benchmark: frames/s of detector-only, full dual-layer pipeline (auto tiling, and --tiling off) and
--baseline on the same clip, ms/frame per stage, peak RSS, and whether peak RSS stays flat on a clip 10x longer.

    python3 bench/pipeline_bench.py                       # default clip: ../shared nadir_interchange (1080p)
    python3 bench/pipeline_bench.py --clip VIDEO --frames 100 --weights W.pt

Each measurement runs in its own process so peak RSS is that mode's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CLIP = REPO.parent / "shared" / "data" / "real_video" / "nadir_interchange" / "drone.mp4"


def _child(mode: str, clip: str, frames: int | None, weights: str | None, calibration: str | None) -> dict:
    sys.path.insert(0, str(REPO))
    from tracking.config import PipelineConfig

    cfg = PipelineConfig()
    if weights:
        cfg.detector.weights = weights
    if calibration:
        from tracking.scale import load_calibration

        cfg.calibration = load_calibration(calibration)
    if mode == "detector":
        from vision.detection import VehicleDetector
        from vision.source import open_source

        det = VehicleDetector(cfg.detector, "auto")
        n, t = 0, 0.0
        for f in open_source(clip, max_frames=frames):
            t0 = time.perf_counter()
            det.detect(f.image, tiling=False)
            t += time.perf_counter() - t0
            n += 1
        out: dict[str, Any] = {"frames": n, "ms_per_frame": 1000 * t / n}
    else:
        from edge.runner import process_video

        cfg.baseline = mode == "baseline"
        if mode == "dual_untiled":
            cfg.detector.tiling = "off"  # the other layers' overhead alone, without native-resolution tiles
        with tempfile.TemporaryDirectory() as tmp:
            s = process_video(clip, Path(tmp) / "run", cfg, progress=False, max_frames=frames).summary
        out = {
            "frames": s["counts"]["frames"],
            "ms_per_frame": s["timings"]["ms_per_frame"],
            "by_stage": s["timings"]["ms_per_frame_by_stage"],
            "tracks": s["counts"]["tracks"],
            "detector_tiles": s.get("detector_tiles"),
        }
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _run(mode: str, clip: Path, frames: int | None, weights: str | None, calibration: str | None) -> dict:
    cmd = [sys.executable, __file__, "--_child", mode, "--clip", str(clip)]
    if frames:
        cmd += ["--frames", str(frames)]
    if weights:
        cmd += ["--weights", weights]
    if calibration:
        cmd += ["--calibration", calibration]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "YOLO_OFFLINE": "1"})
    if r.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _longer(clip: Path, times: int, folder: Path) -> Path:
    """The same clip looped ``times`` times (stream copy, no re-encode)."""
    out = folder / f"x{times}_{clip.name}"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-stream_loop", str(times - 1), "-i", str(clip), "-c", "copy", str(out)],
        check=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", type=Path, default=DEFAULT_CLIP)
    ap.add_argument("--frames", type=int, default=None, help="limit frames per run (default: whole clip)")
    ap.add_argument("--weights", default=None)
    ap.add_argument("--calibration", default=None)
    ap.add_argument("--skip-long", action="store_true", help="skip the 10x-longer memory check")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:
        print(json.dumps(_child(a._child, str(a.clip), a.frames, a.weights, a.calibration)))
        return
    if not a.clip.exists():
        raise SystemExit(f"{a.clip}: clip not found (pass --clip)")
    if a.calibration is None and a.clip == DEFAULT_CLIP:
        a.calibration = str(DEFAULT_CLIP.parent / "georef_corners.json")
    modes = ("detector", "dual_layer", "dual_untiled", "baseline")
    res = {m: _run(m, a.clip, a.frames, a.weights, a.calibration) for m in modes}
    print(f"clip: {a.clip} ({res['dual_layer']['frames']} frames)")
    print(f"{'mode':<12}{'fps':>8}{'ms/frame':>10}{'peak RSS MB':>13}")
    for m, r in res.items():
        print(f"{m:<12}{1000 / r['ms_per_frame']:>8.2f}{r['ms_per_frame']:>10.1f}{r['peak_rss_mb']:>13.0f}")
    ratio = res["dual_layer"]["ms_per_frame"] / res["baseline"]["ms_per_frame"]
    print(f"full pipeline / baseline time per frame: {ratio:.2f}x  (target <= 1.3x)")
    untiled = res["dual_untiled"]["ms_per_frame"] / res["baseline"]["ms_per_frame"]
    print(
        f"full pipeline with --tiling off / baseline: {untiled:.2f}x  (what the road, ego-motion and motion layers cost)"
    )
    print(
        "dual-layer ms/frame by stage: " + ", ".join(f"{k} {v:.1f}" for k, v in res["dual_layer"]["by_stage"].items())
    )
    print(
        "dual-layer --tiling off ms/frame by stage: "
        + ", ".join(f"{k} {v:.1f}" for k, v in res["dual_untiled"]["by_stage"].items())
    )
    print(
        f"detector tiles run: {res['dual_layer']['detector_tiles']} (dual-layer), "
        f"{res['dual_untiled']['detector_tiles']} (--tiling off)"
    )
    if not a.skip_long and shutil.which("ffmpeg"):
        with tempfile.TemporaryDirectory() as tmp:
            long_clip = _longer(a.clip, 10, Path(tmp))
            short = res["dual_layer"]["peak_rss_mb"]
            long = _run("dual_layer", long_clip, a.frames * 10 if a.frames else None, a.weights, a.calibration)
        growth = 100 * (long["peak_rss_mb"] - short) / short
        print(
            f"peak RSS: {short:.0f} MB on {res['dual_layer']['frames']} frames, {long['peak_rss_mb']:.0f} MB on "
            f"{long['frames']} frames (10x): {growth:+.1f}%  (target < 10%)"
        )


if __name__ == "__main__":
    main()
