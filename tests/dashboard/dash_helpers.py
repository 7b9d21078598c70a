"""Helpers of the dashboard tests: a processed run folder written by the pipeline's own file sinks, a GPX flight
log, and form login for TestClients."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

ORIGIN = (48.137, 11.575)  # lat, lon of the synthetic road
X0 = 300  # image column of east = 0 m (5 px per metre): the vehicles are in the frame from east = -40 m on
PASSWORDS = {"admin": "admin-pass-123", "operator": "operator-pass-123", "viewer": "viewer-pass-123"}


def _metres_to_latlon(east: float, north: float, origin: tuple[float, float] = ORIGIN) -> tuple[float, float]:
    lat = origin[0] + north / 111_320.0
    lon = origin[1] + east / (111_320.0 * math.cos(math.radians(origin[0])))
    return lat, lon


def write_gpx(path: Path, start: datetime, seconds: int = 12) -> Path:
    """A flight log (GPX written with gpxpy) hovering along the road."""
    import gpxpy.gpx

    gpx = gpxpy.gpx.GPX()
    track, seg = gpxpy.gpx.GPXTrack(), gpxpy.gpx.GPXTrackSegment()
    for i in range(seconds + 1):
        lat, lon = _metres_to_latlon(-30 + 5 * i, 25)
        seg.points.append(gpxpy.gpx.GPXTrackPoint(lat, lon, elevation=520 + i, time=start + timedelta(seconds=i)))
    track.segments.append(seg)
    gpx.tracks.append(track)
    path.write_text(gpx.to_xml(), encoding="utf-8")
    return path


def make_run_dir(
    folder: Path,
    speeds_kmh=(30.0, 55.0, 75.0, 95.0, 120.0),
    fps: float = 10.0,
    frames: int = 60,
    telemetry: Path | None = None,
    origin: tuple[float, float] = ORIGIN,
    fragments: tuple = (),
    video: bool = False,
    scale_source: str | None = None,
) -> Path:
    """A processed-run folder written by the pipeline's own file sinks (MOT, tracks.csv, summary, GeoJSON).

    Vehicles drive east along one road at the given speeds, each in its own lane; plus one parked car. Each entry of
    ``fragments`` adds a short-lived track next to the road: that many frames from frame 10 (the kind of fragment a
    tracker leaves when it briefly loses a vehicle), or a (first frame, frames) pair. ``video``: also write the
    run's source video (:class:`RoadVideo`), so the run can have an orthophoto. ``scale_source``: what every frame's
    scale came from (``tracks.csv`` column ``scale_source``).
    """
    from edge.sinks import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
    from tracking.types import FrameResult, RunInfo, Sink, TrackState
    from vision.types import Frame

    folder.mkdir(parents=True, exist_ok=True)
    writer = RoadVideo(folder / "video.mp4", fps) if video else None
    info = RunInfo(str(folder / "video.mp4"), 1280, 720, fps, frames, {}, "test.pt", "dual_layer", "cpu")
    summary_sink = TrackSummarySink(folder)
    sinks: list[Sink] = [MOTSink(folder), TrackCSVSink(folder), summary_sink, GeoJSONSink(folder)]
    for s in sinks:
        s.open(info)
    image = np.zeros((1, 1, 3), np.uint8)
    for i in range(frames):
        t = i / fps
        tracks = []
        for k, v in enumerate(list(speeds_kmh) + [0.0]):
            east, north = -40 + v / 3.6 * t, 4.0 * k
            lat, lon = _metres_to_latlon(east, north, origin)
            x, y = X0 + east * 5, 100 + north * 5
            tracks.append(
                TrackState(
                    track_id=k + 1,
                    xyxy=np.array([x, y, x + 20, y + 10], np.float32),
                    score=0.9,
                    class_id=0 if k % 2 == 0 else 1,
                    moving=v > 0,
                    speed_kmh=v if i >= 3 else None,
                    speed_sigma_kmh=1.5,
                    ground_xy=(east, north),
                    lat=lat,
                    lon=lon,
                )
            )
        for j, frag in enumerate(fragments):
            first, length = frag if isinstance(frag, tuple) else (10, frag)
            if first <= i < first + length:
                east, north = -20 + 2.0 * (i - first), -6.0 - 3 * j
                lat, lon = _metres_to_latlon(east, north, origin)
                x, y = X0 + east * 5, 100 + north * 5
                tracks.append(
                    TrackState(
                        track_id=100 + j,
                        xyxy=np.array([x, y, x + 20, y + 10], np.float32),
                        score=0.5,
                        class_id=0,
                        moving=True,
                        speed_kmh=None,
                        speed_sigma_kmh=None,
                        ground_xy=(east, north),
                        lat=lat,
                        lon=lon,
                    )
                )
        result = FrameResult(Frame(i, t, image), tracks, scale_source=scale_source)
        for s in sinks:
            s.write(result)
        if writer is not None:
            writer.write(tracks)
    if writer is not None:
        writer.close()
    for s in sinks:
        s.close({"source": info.source, "mode": info.mode})
    summary = {
        "source": info.source,
        "mode": info.mode,
        "video": {
            "path": info.source,
            "width": 1280,
            "height": 720,
            "fps": fps,
            "frame_count": frames,
            "duration_s": frames / fps,
            "codec": "h264",
        },
        "telemetry": str(telemetry) if telemetry else None,
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


ROAD_BGR, FIELD_BGR, VEHICLE_BGR = (0, 0, 220), (200, 80, 0), (255, 255, 255)
ROAD_ROWS = (95, 215)  # image rows of the lanes (north 0 to 20 m: box centres at rows 105 to 205)


class RoadVideo:
    """The source video of :func:`make_run_dir`: a red road band (the lanes' rows) across a blue field, 1280x720,
    with every vehicle drawn as a white box where its track says it is."""

    def __init__(self, path: Path, fps: float):
        import cv2

        self.background = np.empty((720, 1280, 3), np.uint8)
        self.background[:] = FIELD_BGR
        self.background[ROAD_ROWS[0] : ROAD_ROWS[1]] = ROAD_BGR
        self.out = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (1280, 720))

    def write(self, tracks) -> None:
        import cv2

        img = self.background.copy()
        for tr in tracks:
            x1, y1, x2, y2 = (int(round(v)) for v in tr.xyxy)
            cv2.rectangle(img, (x1, y1), (x2 - 1, y2 - 1), VEHICLE_BGR, -1)
        self.out.write(img)

    def close(self) -> None:
        self.out.release()


def login(client, username: str, password: str):
    page = client.get("/dashboard/login")
    assert page.status_code == 200
    token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    return client.post(
        "/dashboard/login",
        data={"username": username, "password": password, "csrf_token": token, "next": ""},
        follow_redirects=False,
    )


def csrf_of(client) -> str:
    page = client.get("/dashboard/map")
    return page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
