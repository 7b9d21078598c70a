"""Measure the dashboard's heavy paths on a synthetic run: importing a run folder and building the map layers.

    python3 bench/dashboard_bench.py --tracks 200 --seconds 30 --fps 25

The run folder is written by the pipeline's own file sinks (vehicles on parallel lanes at 20-140 km/h), imported
into a fresh SQLite database with :func:`db.run_import.import_run_dir`, then the map API's layers are built
the way ``GET /dashboard/api/map`` builds them. Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

# A benchmark script, not part of the dashboard package: it writes its run with edge's file sinks, which the
# dashboard (a lower layer) must not import.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def synthetic_run(
    folder: Path, tracks: int, seconds: float, fps: float, lat0: float = 48.137, lon0: float = 11.575
) -> Path:
    import numpy as np

    from edge.sinks import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
    from tracking.types import FrameResult, RunInfo, Sink, TrackState
    from vision.types import Frame

    folder.mkdir(parents=True, exist_ok=True)
    frames = int(seconds * fps)
    info = RunInfo(str(folder / "video.mp4"), 3840, 2160, fps, frames, {}, "bench", "dual_layer", "cpu")
    sinks: list[Sink] = [MOTSink(folder), TrackCSVSink(folder), TrackSummarySink(folder), GeoJSONSink(folder)]
    for s in sinks:
        s.open(info)
    rng = np.random.default_rng(0)
    speeds = rng.uniform(20, 140, tracks)
    image = np.zeros((1, 1, 3), np.uint8)
    m_per_deg_lon = 111_320.0 * math.cos(math.radians(lat0))
    for i in range(frames):
        t = i / fps
        states = []
        for k, v in enumerate(speeds):
            east, north = -500 + v / 3.6 * t, 3.5 * k
            states.append(
                TrackState(
                    k + 1,
                    np.array([i, k, i + 20, k + 10], np.float32),
                    0.9,
                    0,
                    True,
                    float(v),
                    1.0,
                    None,
                    (east, north),
                    lat0 + north / 111_320.0,
                    lon0 + east / m_per_deg_lon,
                )
            )
        result = FrameResult(Frame(i, t, image), states)
        for s in sinks:
            s.write(result)
    for s in sinks:
        s.close({"source": info.source, "mode": info.mode})
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "source": info.source,
                "mode": "dual_layer",
                "config": {},
                "weights": "bench",
                "device": "cpu",
                "video": {"width": 3840, "height": 2160, "fps": fps, "frame_count": frames},
                "counts": {"frames": frames, "tracks": tracks},
            }
        )
    )
    return folder


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tracks", type=int, default=200)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--fps", type=float, default=25.0)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)

    from dashboard.mapdata import MapFilter, map_layers
    from db.engine import session_factory
    from db.migrate import upgrade
    from db.run_import import import_run_dir

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        run_dir = synthetic_run(tmp / "run", a.tracks, a.seconds, a.fps)
        rows = a.tracks * int(a.seconds * a.fps)
        print(
            f"run folder: {a.tracks} tracks x {int(a.seconds * a.fps)} frames = {rows} rows "
            f"({time.perf_counter() - t0:.1f} s to write)"
        )
        url = f"sqlite:///{tmp / 'bench.db'}"
        upgrade(url)
        t0 = time.perf_counter()
        run = import_run_dir(run_dir, url, speed_limit_kmh=100.0)
        dt = time.perf_counter() - t0
        print(f"import_run_dir: {dt:.2f} s ({rows / dt:,.0f} rows/s), {run.tracks} tracks, {run.violations} violations")
        times, size = [], 0
        for _ in range(a.repeat):
            with session_factory(url)() as db:
                t0 = time.perf_counter()
                layers = map_layers(db, MapFilter())
                body = json.dumps(layers)
                times.append(time.perf_counter() - t0)
                size = len(body)
        n = len(layers["trajectories"]["features"])
        vertices = sum(len(f["geometry"]["coordinates"]) for f in layers["trajectories"]["features"])
        print(
            f"map layers: best {min(times) * 1000:.0f} ms of {a.repeat} (query + JSON), {n} trajectories, "
            f"{vertices} vertices, {size / 1024:.0f} KiB"
        )


if __name__ == "__main__":
    main()
