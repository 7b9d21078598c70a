"""File sinks: MOTChallenge text, per-frame and per-track CSV, GeoJSON trajectories."""

from __future__ import annotations

import csv
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from db.vehicles import is_vehicle
from edge.sinks.tracks import TrackAccumulator, TrackRecord
from tracking.types import INTERPOLATED, FrameResult, RunInfo
from vision.detection import class_name

MIN_TRACK_FRAMES = 3  # shorter tracks are noise, left out of the per-track outputs


def _fmt(v: float | None, nd: int = 3) -> str:
    return "" if v is None else f"{v:.{nd}f}"


class MOTSink:
    """``tracks_mot.txt`` in MOTChallenge layout: frame (1-based), id, left, top, width, height, conf, -1, -1, -1."""

    def __init__(self, folder: Path, name: str = "tracks_mot.txt"):
        self.path = Path(folder) / name

    def open(self, info: RunInfo) -> None:
        self._f = open(self.path, "w", encoding="utf-8")

    def write(self, result: FrameResult) -> None:
        n = result.frame.index + 1
        for tr in result.tracks:
            x1, y1, x2, y2 = (float(v) for v in tr.xyxy)
            self._f.write(f"{n},{tr.track_id},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{tr.score:.3f},-1,-1,-1\n")

    def close(self, summary: dict[str, Any]) -> None:
        self._f.close()

    def abort(self, error: BaseException | None) -> None:
        self._f.close()


class TrackCSVSink:
    """``tracks.csv``: one row per track per frame, with speed, its uncertainty, ground position and lat/lon."""

    COLUMNS = [
        "frame",
        "t",
        "track_id",
        "class",
        "x1",
        "y1",
        "x2",
        "y2",
        "score",
        "moving",
        "speed_kmh",
        "speed_sigma_kmh",
        "speed_flag",
        "ground_x_m",
        "ground_y_m",
        "lat",
        "lon",
        "scale_source",
    ]

    def __init__(self, folder: Path, name: str = "tracks.csv"):
        self.path = Path(folder) / name
        self.interpolated = 0  # rows of boxes filled on frames a track was lost on (speed_flag "interpolated")

    def open(self, info: RunInfo) -> None:
        self._f = open(self.path, "w", newline="", encoding="utf-8")
        self._w = csv.writer(self._f)
        self._w.writerow(self.COLUMNS)

    def write(self, result: FrameResult) -> None:
        f = result.frame
        for tr in result.tracks:
            gx, gy = tr.ground_xy if tr.ground_xy else (None, None)
            self.interpolated += tr.speed_flag == INTERPOLATED
            self._w.writerow(
                [
                    f.index + 1,
                    f"{f.t:.4f}",
                    tr.track_id,
                    class_name(tr.class_id),
                    *(f"{v:.1f}" for v in tr.xyxy),
                    f"{tr.score:.3f}",
                    int(tr.moving),
                    _fmt(tr.speed_kmh, 2),
                    _fmt(tr.speed_sigma_kmh, 2),
                    tr.speed_flag or "",
                    _fmt(gx, 2),
                    _fmt(gy, 2),
                    _fmt(tr.lat, 7),
                    _fmt(tr.lon, 7),
                    result.scale_source or "",
                ]
            )

    def close(self, summary: dict[str, Any]) -> None:
        self._f.close()

    def abort(self, error: BaseException | None) -> None:
        self._f.close()


def track_summary(rec: TrackRecord) -> dict[str, Any]:
    sp = rec.speeds
    sig = [p.sigma_kmh for p in rec.points if p.speed_kmh is not None and p.sigma_kmh is not None]
    sources = [p.scale_source for p in rec.points if p.speed_kmh is not None and p.scale_source]
    first, last = rec.points[0], rec.points[-1]
    moving_share = sum(p.moving for p in rec.points) / len(rec.points)
    return {
        "track_id": rec.track_id,
        "class": class_name(rec.class_id),
        "first_frame": first.frame + 1,
        "last_frame": last.frame + 1,
        "first_t": round(first.t, 3),
        "last_t": round(last.t, 3),
        "duration_s": round(last.t - first.t, 3),
        "frames": len(rec.points),
        "moving": moving_share >= 0.5,
        "median_speed_kmh": round(statistics.median(sp), 2) if sp else None,
        "max_speed_kmh": round(max(sp), 2) if sp else None,
        "median_sigma_kmh": round(statistics.median(sig), 2) if sig else None,
        "scale_source": Counter(sources).most_common(1)[0][0] if sources else None,
        "start_lat": first.lat,
        "start_lon": first.lon,
        "end_lat": last.lat,
        "end_lon": last.lon,
    }


class TrackSummarySink:
    """``tracks_summary.csv``: one row per track (class, time span, moving or parked, median/max speed, the median
    sigma of its speeds, the scale source, lat/lon)."""

    COLUMNS = [
        "track_id",
        "class",
        "first_frame",
        "last_frame",
        "first_t",
        "last_t",
        "duration_s",
        "frames",
        "moving",
        "median_speed_kmh",
        "max_speed_kmh",
        "median_sigma_kmh",
        "scale_source",
        "start_lat",
        "start_lon",
        "end_lat",
        "end_lon",
    ]

    def __init__(self, folder: Path, name: str = "tracks_summary.csv", gap_frames: int = 60):
        self.path = Path(folder) / name
        self.gap = gap_frames
        self.counts = {"tracks": 0, "moving": 0, "stationary": 0, "vehicles": 0}
        self.speeds: list[float] = []
        self.scale = ScaleLog()
        self._last_frame = -1

    def open(self, info: RunInfo) -> None:
        self._f = open(self.path, "w", newline="", encoding="utf-8")
        self._w = csv.DictWriter(self._f, self.COLUMNS)
        self._w.writeheader()
        self._acc = TrackAccumulator(self._emit, self.gap)

    def _emit(self, rec: TrackRecord) -> None:
        first, last = rec.points[0], rec.points[-1]
        # counted vehicles: the dashboard's definition, so `process` prints the number every page shows
        self.counts["vehicles"] += is_vehicle(
            last.t - first.t, last.frame - first.frame, last.frame == self._last_frame
        )
        if len(rec.points) < MIN_TRACK_FRAMES:
            return
        row = track_summary(rec)
        self._w.writerow(row)
        self.counts["tracks"] += 1
        self.counts["moving" if row["moving"] else "stationary"] += 1
        if row["moving"] and row["median_speed_kmh"] is not None:
            self.speeds.append(row["median_speed_kmh"])

    def write(self, result: FrameResult) -> None:
        self._last_frame = result.frame.index
        self._acc.add(result)
        self.scale.add(result)

    def close(self, summary: dict[str, Any]) -> None:
        self._acc.flush()
        self._f.close()

    def abort(self, error: BaseException | None) -> None:
        self._f.close()


class ScaleLog:
    """Where the run's scale came from, for ``summary.json``: frames by source, the size prior's segments (each
    with its last description), the metres per pixel at the image centre."""

    def __init__(self) -> None:
        self.frames_by_source: dict[str, int] = {}
        self.segments: dict[str, str] = {}
        self.last_detail: str | None = None
        self.mpp: list[float] = []

    def add(self, result: FrameResult) -> None:
        src = result.scale_source or "none"
        self.frames_by_source[src] = self.frames_by_source.get(src, 0) + 1
        if result.scale_detail:
            self.last_detail = result.scale_detail
            seg = result.scale_detail.split("segment ")[-1].split(",")[0] if "segment " in result.scale_detail else "0"
            self.segments[seg] = result.scale_detail
        if result.metres_per_pixel and len(self.mpp) < 100000:
            self.mpp.append(result.metres_per_pixel)

    def summary(self) -> dict[str, Any]:
        by_source = self.frames_by_source
        src = max(by_source, key=lambda name: by_source[name]) if by_source else None
        return {
            "source": src,
            "detail": self.last_detail,
            "frames_by_source": self.frames_by_source,
            "segments": list(self.segments.values()),
            "metres_per_pixel_centre_median": round(statistics.median(self.mpp), 4) if self.mpp else None,
            "low_confidence": src == "size_prior",
        }


class GeoJSONSink:
    """``trajectories.geojson``: a LineString per track, in WGS84 when the run is georeferenced.

    Without georeference the coordinates are local ground metres (east, north) or, with no scale at all, pixels;
    the collection's ``coordinate_system`` property says which. Features are streamed as tracks end.
    """

    def __init__(self, folder: Path, name: str = "trajectories.geojson", gap_frames: int = 60):
        self.path = Path(folder) / name
        self.gap = gap_frames
        self.coordinate_system: str | None = None

    def open(self, info: RunInfo) -> None:
        self._f = open(self.path, "w", encoding="utf-8")
        self._f.write('{"type": "FeatureCollection", "features": [\n')
        self._first = True
        self._acc = TrackAccumulator(self._emit, self.gap)

    def _emit(self, rec: TrackRecord) -> None:
        if len(rec.points) < MIN_TRACK_FRAMES:
            return
        pts = rec.points
        wgs84 = [(p.lon, p.lat) for p in pts if p.lon is not None and p.lat is not None]
        ground = [p.ground_xy for p in pts if p.ground_xy is not None]
        if len(wgs84) == len(pts):
            coords, system = [[round(lon, 7), round(lat, 7)] for lon, lat in wgs84], "wgs84"
        elif len(ground) == len(pts):
            coords, system = [[round(x, 2), round(y, 2)] for x, y in ground], "local_metres"
        else:
            coords, system = [[round(p.x, 1), round(p.y, 1)] for p in pts], "pixels"
        self.coordinate_system = self.coordinate_system or system
        props = track_summary(rec)
        props.update(
            coordinate_system=system,
            times=[round(p.t, 3) for p in pts],
            speeds_kmh=[None if p.speed_kmh is None else round(p.speed_kmh, 1) for p in pts],
        )
        feat = {"type": "Feature", "geometry": {"type": "LineString", "coordinates": coords}, "properties": props}
        self._f.write(("" if self._first else ",\n") + json.dumps(feat))
        self._first = False

    def write(self, result: FrameResult) -> None:
        self._acc.add(result)

    def close(self, summary: dict[str, Any]) -> None:
        self._acc.flush()
        meta = json.dumps({"coordinate_system": self.coordinate_system or "none", "source": summary.get("source")})
        self._f.write(f'\n], "properties": {meta}}}\n')
        self._f.close()

    def abort(self, error: BaseException | None) -> None:
        self._f.close()
