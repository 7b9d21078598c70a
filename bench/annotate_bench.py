"""Time of the annotated-video drawing (edge/sinks/annotate.py) per frame, on a processed run and its video.

    python bench/annotate_bench.py RUN_DIR [--frames 100] [--speed-limit 80]

Replays the run's tracks.csv over the first frames of its source video (decoding is not timed) and prints the best
of two passes in ms/frame, with the mean number of vehicles drawn.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections import defaultdict
from pathlib import Path

import av
import numpy as np

from edge.sinks.annotate import FrameAnnotator
from tracking.types import FrameResult, TrackState
from vision.types import Frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--speed-limit", type=float, default=80.0)
    a = ap.parse_args()
    summary = json.loads((a.run_dir / "summary.json").read_text())
    fps = float(summary["video"].get("fps") or 25.0)
    tracks = defaultdict(list)
    with open(a.run_dir / "tracks.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            tracks[int(r["frame"]) - 1].append(
                TrackState(
                    int(r["track_id"]),
                    np.array([float(r[k]) for k in ("x1", "y1", "x2", "y2")], np.float32),
                    float(r["score"]),
                    0,
                    moving=r["moving"] == "1",
                    speed_kmh=float(r["speed_kmh"]) if r["speed_kmh"] else None,
                    speed_flag=r.get("speed_flag") or None,
                )
            )
    frames = []
    with av.open(summary["video"]["path"]) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i >= a.frames:
                break
            frames.append(FrameResult(Frame(i, i / fps, f.to_ndarray(format="bgr24")), tracks[i]))
    best = []
    for _ in range(2):
        annotate = FrameAnnotator(a.speed_limit, fps=fps)
        t0 = time.perf_counter()
        for f in frames:
            annotate(f)
        best.append((time.perf_counter() - t0) / len(frames) * 1000)
    h, w = frames[0].frame.image.shape[:2]
    print(
        f"annotate: {min(best):.1f} ms/frame ({w}x{h}, {len(frames)} frames, "
        f"{np.mean([len(f.tracks) for f in frames]):.0f} vehicles/frame on average)"
    )


if __name__ == "__main__":
    main()
