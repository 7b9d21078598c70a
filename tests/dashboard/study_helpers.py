"""A processed run of a four-leg junction, written by the pipeline's own file sinks: vehicles drive from one leg to
another (right-hand traffic, lanes 2 m right of the road's centre line), some cars are parked, and two vehicles are
scripted to pass the same point 0.5 s apart (a post-encroachment-time conflict)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.dashboard.dash_helpers import ORIGIN, _metres_to_latlon

LEGS = {"N": (0.0, 1.0), "E": (1.0, 0.0), "S": (0.0, -1.0), "W": (-1.0, 0.0)}
LEG_M, LANE_M, SPEED_MS = 60.0, 2.0, 10.0
PX_PER_M, CENTRE_PX = 5.0, (640.0, 360.0)
# (origin leg, destination leg, start time s): every movement kind, and W->E / S->N crossing 0.5 s apart at (2, -2)
ROUTES = [
    ("W", "E", 10.0),
    ("S", "N", 10.9),
    ("W", "E", 2.0),
    ("W", "N", 4.0),
    ("E", "W", 1.0),
    ("E", "S", 6.0),
    ("N", "S", 3.0),
    ("N", "E", 14.0),
    ("S", "E", 5.0),
    ("S", "W", 18.0),
    ("E", "W", 20.0),
    ("W", "E", 22.0),
]
PARKED = [(-15.0, 15.0), (15.0, 15.0), (-15.0, -15.0), (15.0, -15.0), (-25.0, 12.0), (25.0, -12.0)]


def _right(d: np.ndarray) -> np.ndarray:
    return np.array([d[1], -d[0]])


def route_points(origin: str, destination: str) -> np.ndarray:
    """The lane centre line from the far end of ``origin``'s leg through the junction to ``destination``'s end."""
    uo, ud = np.array(LEGS[origin]), np.array(LEGS[destination])
    r_in, r_out = _right(-uo) * LANE_M, _right(ud) * LANE_M
    a, b = uo * LEG_M + r_in, uo * 8 + r_in
    c, d = ud * 8 + r_out, ud * LEG_M + r_out
    t = np.linspace(0, 1, 12)[:, None]
    mid = (1 - t) ** 2 * b + 2 * (1 - t) * t * ((b + c) / 2 if origin != destination else b) + t**2 * c
    return np.vstack([a, mid, d])


def position(points: np.ndarray, s: float) -> np.ndarray | None:
    """The point ``s`` metres along the polyline, None past its end."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    if s < 0 or s > cum[-1]:
        return None
    i = min(int(np.searchsorted(cum, s, side="right")) - 1, len(seg) - 1)
    w = (s - cum[i]) / seg[i] if seg[i] > 0 else 0.0
    return points[i] + w * (points[i + 1] - points[i])


def make_junction_run_dir(
    folder: Path,
    fps: float = 10.0,
    seconds: float = 36.0,
    routes=tuple(ROUTES),
    georeferenced: bool = True,
    video: bool = False,
    origin: tuple[float, float] = ORIGIN,
) -> Path:
    from edge.sinks import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
    from tracking.types import FrameResult, RunInfo, Sink, TrackState
    from vision.types import Frame

    folder.mkdir(parents=True, exist_ok=True)
    frames = int(round(seconds * fps))
    info = RunInfo(str(folder / "video.mp4"), 1280, 720, fps, frames, {}, "test.pt", "dual_layer", "cpu")
    summary_sink = TrackSummarySink(folder)
    sinks: list[Sink] = [MOTSink(folder), TrackCSVSink(folder), summary_sink, GeoJSONSink(folder)]
    for s in sinks:
        s.open(info)
    writer = None
    if video:
        import cv2

        writer = cv2.VideoWriter(str(folder / "video.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), fps, (1280, 720))
        background = np.full((720, 1280, 3), (60, 120, 60), np.uint8)
        cx, cy = (int(v) for v in CENTRE_PX)
        half = int((LANE_M * 2 + 1) * PX_PER_M)
        background[:, cx - half : cx + half] = (90, 90, 90)
        background[cy - half : cy + half, :] = (90, 90, 90)
    paths = [(route_points(o, d), t0) for o, d, t0 in routes]
    image = np.zeros((1, 1, 3), np.uint8)
    for i in range(frames):
        t = i / fps
        tracks = []
        placed = [
            (k + 1, p, SPEED_MS * 3.6, 0)
            for k, (pts, t0) in enumerate(paths)
            if (p := position(pts, (t - t0) * SPEED_MS)) is not None
        ]
        placed += [(100 + j, np.array(xy), 0.0, 0) for j, xy in enumerate(PARKED)]
        for tid, (east, north), speed, cls in placed:
            lat, lon = _metres_to_latlon(east, north, origin)
            x, y = CENTRE_PX[0] + east * PX_PER_M, CENTRE_PX[1] - north * PX_PER_M
            tracks.append(
                TrackState(
                    track_id=tid,
                    xyxy=np.array([x - 10, y - 5, x + 10, y + 5], np.float32),
                    score=0.9,
                    class_id=cls,
                    moving=speed > 0,
                    speed_kmh=speed,
                    speed_sigma_kmh=1.0,
                    ground_xy=(float(east), float(north)),
                    lat=lat if georeferenced else None,
                    lon=lon if georeferenced else None,
                )
            )
        result = FrameResult(Frame(i, t, image), tracks)
        for s in sinks:
            s.write(result)
        if writer is not None:
            import cv2

            img = background.copy()
            for tr in tracks:
                x1, y1, x2, y2 = (int(round(v)) for v in tr.xyxy)
                cv2.rectangle(img, (x1, y1), (x2, y2), (255, 255, 255), -1)
            writer.write(img)
    if writer is not None:
        writer.release()
    for s in sinks:
        s.close({"source": info.source, "mode": info.mode})
    summary = {
        "source": info.source,
        "mode": info.mode,
        "video": {"path": info.source, "width": 1280, "height": 720, "fps": fps, "frame_count": frames},
        "telemetry": None,
        "weights": "test.pt",
        "device": "cpu",
        "config": {},
        "counts": {
            "frames": frames,
            "tracks": summary_sink.counts["tracks"],
            "vehicles": summary_sink.counts["vehicles"],
        },
        "timings": {"fps": 12.5, "ms_per_frame": 80.0},
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder
