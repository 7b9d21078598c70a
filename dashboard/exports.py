"""Downloads: a flight's log as CSV / GeoJSON / KML / GPX, a run's tracks as CSV / GeoJSON / KML / MOTChallenge.

A run's CSV, GeoJSON and KML hold its counted vehicles (:mod:`db.vehicles`), the same ones every page counts;
the MOTChallenge file is the tracker's raw output (every track id), as evaluation tools expect.

KML is written with simplekml and GPX with gpxpy (the field's usual libraries); CSV and GeoJSON with the standard
library. Large per-frame tables are streamed in chunks instead of being built in memory.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.importer import SAMPLE_FIELDS
from db.models import Flight, ProcessingRun, TelemetrySampleRow, TrackRow, TrackSpeed
from db.vehicles import counted

FLIGHT_FORMATS = ("csv", "geojson", "kml", "gpx")
RUN_FORMATS = ("csv", "geojson", "kml", "mot", "zip", "counts")
RUN_FORMAT_LABELS = {
    "csv": "CSV (per frame)",
    "geojson": "GeoJSON",
    "kml": "KML",
    "mot": "MOTChallenge",
    "zip": "violations + snapshots + clips (ZIP)",
    "counts": "counts (CSV)",
}
MEDIA_TYPES = {
    "csv": "text/csv",
    "geojson": "application/geo+json",
    "kml": "application/vnd.google-earth.kml+xml",
    "gpx": "application/gpx+xml",
    "mot": "text/plain",
    "zip": "application/zip",
}
SAMPLE_COLUMNS = SAMPLE_FIELDS  # the flight-log columns stored by db.importer, in the same order


class ExportUnavailable(ValueError):
    """The export cannot be made for this item (e.g. no positions, or the run's files are gone)."""


def _csv_line(values) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow(["" if v is None else v for v in values])
    return buf.getvalue()


def _samples(db: Session, flight_id: int):
    return db.scalars(
        select(TelemetrySampleRow)
        .where(TelemetrySampleRow.flight_id == flight_id)
        .order_by(TelemetrySampleRow.t_s)
        .execution_options(yield_per=5000)
    )


def _positioned(db: Session, flight_id: int) -> list[TelemetrySampleRow]:
    rows = [s for s in _samples(db, flight_id) if s.lat is not None and s.lon is not None]
    if not rows:
        raise ExportUnavailable(f"flight {flight_id} has no GPS positions")
    return rows


def _sample_time(flight: Flight, s: TelemetrySampleRow):
    if s.time_utc is not None:
        return s.time_utc
    return flight.start_time + timedelta(seconds=s.t_s) if flight.start_time else None


def flight_csv(db: Session, flight: Flight) -> Iterator[str]:
    yield _csv_line(SAMPLE_COLUMNS)
    for s in _samples(db, flight.id):
        yield _csv_line(
            [getattr(s, c).isoformat() if c == "time_utc" and s.time_utc else getattr(s, c) for c in SAMPLE_COLUMNS]
        )


def flight_geojson(db: Session, flight: Flight) -> str:
    rows = _positioned(db, flight.id)
    coords = [[s.lon, s.lat] + ([s.abs_alt_m] if s.abs_alt_m is not None else []) for s in rows]
    if any(len(c) == 2 for c in coords):
        coords = [c[:2] for c in coords]  # all or none with altitude
    return json.dumps(
        {
            "type": "FeatureCollection",
            "features": [
                {
                    "type": "Feature",
                    "geometry": {"type": "LineString", "coordinates": coords},
                    "properties": {
                        "flight_id": flight.id,
                        "device": flight.device.serial if flight.device else None,
                        "start_time": flight.start_time.isoformat() if flight.start_time else None,
                        "times_s": [s.t_s for s in rows],
                    },
                }
            ],
        }
    )


def flight_kml(db: Session, flight: Flight) -> str:
    import simplekml

    rows = _positioned(db, flight.id)
    kml = simplekml.Kml(name=f"AirPatrol flight {flight.id}")
    with_alt = all(s.abs_alt_m is not None for s in rows)
    line = kml.newlinestring(
        name=f"flight {flight.id}", coords=[(s.lon, s.lat, s.abs_alt_m) if with_alt else (s.lon, s.lat) for s in rows]
    )
    line.altitudemode = simplekml.AltitudeMode.absolute if with_alt else simplekml.AltitudeMode.clamptoground
    line.style.linestyle.width = 3
    line.style.linestyle.color = simplekml.Color.orange
    return kml.kml()


def flight_gpx(db: Session, flight: Flight) -> str:
    import gpxpy.gpx

    rows = _positioned(db, flight.id)
    gpx = gpxpy.gpx.GPX()
    gpx.creator = "AirPatrol"
    track = gpxpy.gpx.GPXTrack(name=f"flight {flight.id}")
    segment = gpxpy.gpx.GPXTrackSegment()
    for s in rows:
        segment.points.append(
            gpxpy.gpx.GPXTrackPoint(s.lat, s.lon, elevation=s.abs_alt_m, time=_sample_time(flight, s))
        )
    track.segments.append(segment)
    gpx.tracks.append(track)
    return gpx.to_xml()


RUN_CSV_COLUMNS = ["track_no", "class", "frame", "t_s", "speed_kmh", "sigma_kmh", "flag", "lat", "lon", "scale_source"]


def run_csv(db: Session, run: ProcessingRun) -> Iterator[str]:
    yield _csv_line(RUN_CSV_COLUMNS)
    q = (
        select(
            TrackRow.track_no,
            TrackRow.class_name,
            TrackSpeed.frame,
            TrackSpeed.t_s,
            TrackSpeed.speed_kmh,
            TrackSpeed.sigma_kmh,
            TrackSpeed.flag,
            TrackSpeed.lat,
            TrackSpeed.lon,
            TrackRow.scale_source,
        )
        .join(TrackRow, TrackRow.id == TrackSpeed.track_id)
        .where(TrackRow.run_id == run.id, counted())
        .order_by(TrackSpeed.frame, TrackRow.track_no)
        .execution_options(yield_per=5000)
    )
    for row in db.execute(q):
        yield _csv_line(row)


def _run_tracks(db: Session, run: ProcessingRun) -> list[TrackRow]:
    tracks = [
        t
        for t in db.scalars(select(TrackRow).where(TrackRow.run_id == run.id, counted()).order_by(TrackRow.track_no))
        if t.path_geojson
    ]
    if not tracks:
        raise ExportUnavailable(f"run {run.id} has no georeferenced tracks")
    return tracks


def _path(track: TrackRow) -> dict:
    assert track.path_geojson is not None  # _run_tracks keeps only tracks with a path
    return json.loads(track.path_geojson)


def run_geojson(db: Session, run: ProcessingRun) -> str:
    features = [
        {
            "type": "Feature",
            "geometry": _path(t),
            "properties": {
                "track_id": t.track_no,
                "class": t.class_name,
                "moving": t.moving,
                "median_speed_kmh": t.median_speed_kmh,
                "max_speed_kmh": t.max_speed_kmh,
                "median_sigma_kmh": t.median_sigma_kmh,
                "scale_source": t.scale_source,
                "first_t": t.first_t,
                "last_t": t.last_t,
            },
        }
        for t in _run_tracks(db, run)
    ]
    return json.dumps(
        {
            "type": "FeatureCollection",
            "features": features,
            "properties": {"run_id": run.id, "scale_source": run.scale_source},
        }
    )


def run_kml(db: Session, run: ProcessingRun) -> str:
    import simplekml

    kml = simplekml.Kml(name=f"AirPatrol run {run.id}")
    for t in _run_tracks(db, run):
        geom = _path(t)
        name = f"{t.class_name} {t.track_no}"
        desc = f"median {t.median_speed_kmh or 0:.0f} km/h, max {t.max_speed_kmh or 0:.0f} km/h"
        if geom["type"] == "LineString":
            kml.newlinestring(name=name, description=desc, coords=[tuple(c) for c in geom["coordinates"]])
        else:
            kml.newpoint(name=name, description=desc, coords=[tuple(geom["coordinates"])])
    return kml.kml()


def run_output_dir(run: ProcessingRun, db: Session | None = None) -> Path | None:
    """The run's output folder when known: runs imported with :func:`db.run_import.import_run_dir` say so in
    their summary; a batch job of the edge service keeps it in its job row."""
    folder = (run.summary_json or {}).get("output_dir")
    if folder:
        return Path(folder)
    if db is None:
        return None
    from sqlalchemy import inspect

    if not inspect(db.connection()).has_table("service_jobs"):  # a dashboard without the service
        return None
    from db.service_models import JobRow

    folder = db.scalar(
        select(JobRow.out_dir)
        .where(JobRow.run_id == run.id, JobRow.out_dir.is_not(None))
        .order_by(JobRow.id.desc())
        .limit(1)
    )
    return Path(folder) if folder else None


def run_mot_path(run: ProcessingRun, db: Session | None = None) -> Path:
    """MOTChallenge boxes are not in the database (it keeps positions, not boxes): the run folder's file."""
    folder = run_output_dir(run, db)
    path = folder / "tracks_mot.txt" if folder else None
    if path is None or not path.is_file():
        raise ExportUnavailable(f"run {run.id}: no tracks_mot.txt (the run's output folder is unknown or was removed)")
    return path


VIOLATION_COLUMNS = [
    "track_no",
    "class",
    "speed_kmh",
    "sigma_kmh",
    "lower_bound_kmh",
    "limit_kmh",
    "over_limit_s",
    "rule",
    "scale_source",
    "video_t_s",
    "when",
    "lat",
    "lon",
    "snapshot",
    "clip",
]


def _round(x: float | None, digits: int):
    return "" if x is None else round(x, digits)


def run_violations_zip(db: Session, run: ProcessingRun) -> bytes:
    """``violations.csv`` (with each violation's time as the evidence supports it) and the snapshots and clips it
    names."""
    import zipfile

    from dashboard.labels import violation_time
    from db.models import Violation
    from vision.evidence import clip_name, clip_path, snapshot_name, snapshot_path

    flight = db.get(Flight, run.flight_id) if run.flight_id else None
    folder = run_output_dir(run, db)
    rows = db.execute(
        select(Violation, TrackRow.track_no, TrackRow.class_name)
        .join(TrackRow, TrackRow.id == Violation.track_id)
        .where(Violation.run_id == run.id)
        .order_by(Violation.t_s)
    ).all()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        lines = [_csv_line(VIOLATION_COLUMNS)]
        for v, track_no, cls in rows:
            snap = snapshot_path(folder, track_no)
            if snap is not None:
                z.write(snap, f"snapshots/{snapshot_name(track_no)}")
            clip = clip_path(folder, track_no)
            if clip is not None:  # H.264 does not deflate: stored as it is
                z.write(clip, f"clips/{clip_name(track_no)}", compress_type=zipfile.ZIP_STORED)
            lines.append(
                _csv_line(
                    [
                        track_no,
                        cls,
                        round(v.speed_kmh, 1),
                        _round(v.sigma_kmh, 1),
                        _round(v.lower_bound_kmh, 1),
                        v.limit_kmh,
                        v.over_limit_s,
                        v.rule or "",
                        v.scale_source or "",
                        round(v.t_s, 2),
                        violation_time(
                            v.occurred_at,
                            v.t_s,
                            flight.clock if flight else None,
                            flight.start_time if flight else None,
                        ),
                        v.lat,
                        v.lon,
                        f"snapshots/{snapshot_name(track_no)}" if snap else "",
                        f"clips/{clip_name(track_no)}" if clip else "",
                    ]
                )
            )
        z.writestr("violations.csv", "".join(lines))
    return buf.getvalue()
