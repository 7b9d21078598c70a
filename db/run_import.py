"""Store a processed run folder (written by `airpatrol process`) in the database, so the dashboard can show it.

The folder's per-frame ``tracks.csv`` is replayed through :class:`db.sink.DatabaseSink`, the same sink a live run
writes through, so an imported run gets exactly what a run processed with the database attached would: track rows
with their map paths, per-frame speeds with lat/lon, speed violations, and the supersede rule (importing a newer
run of the same video replaces the older result set). The run's flight log (``summary.json`` -> ``telemetry``)
becomes a flight with its GPS track unless ``flight_id`` names an existing flight.

What the pages show besides the rows is made here too and kept in the run folder: the counted vehicles
(:mod:`db.vehicles`), the violations' snapshots and clips (:mod:`vision.evidence`) and the orthophoto
(:mod:`vision.orthophoto`). The import calls them, not the web layer, so the service, the CLI and the tests import
a run without loading the dashboard; the image work itself lives in ``vision`` with the rest of the frame handling.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker
from tqdm import tqdm

from db.models import ProcessingRun, TrackRow, Violation
from tracking.types import FrameResult, RunInfo, TrackState
from vision.evidence import Wanted
from vision.run_inputs import run_telemetry, run_video
from vision.types import VEHICLE_CLASSES, Frame

FALLBACK_DEVICE_SERIAL = "unregistered-drone"  # flight logs that do not name their aircraft (e.g. DJI SRT)
_NO_IMAGE = np.zeros((0, 0, 3), np.uint8)  # the database sink reads frame index and time only


class RunImportError(ValueError):
    pass


@dataclass
class ImportedRun:
    run_id: int
    flight_id: int | None
    video_id: int | None
    tracks: int  # counted vehicles (db.vehicles), the number every page shows
    violations: int
    fragments: int = 0  # track ids left out as too short to be a vehicle
    orthophoto: str | None = None  # what became of the run's orthophoto (made, or why not)
    snapshots: int = 0  # violation snapshots written into the run folder (vision.evidence)
    clips: int = 0  # short clips of the violations written into the run folder


def _maker(target) -> sessionmaker:
    if isinstance(target, Session):
        target.commit()  # the sink writes on its own connections; an open write transaction would block it
        return sessionmaker(target.get_bind(), expire_on_commit=False)
    if isinstance(target, Engine):
        return sessionmaker(target, expire_on_commit=False)
    if isinstance(target, sessionmaker):
        return target
    from db.engine import session_factory

    return session_factory(target)


def _load_summary(run_dir: Path) -> dict:
    path = run_dir / "summary.json"
    if not run_dir.is_dir():
        raise RunImportError(f"{run_dir}: not a folder (expected the output folder of `airpatrol process`)")
    if not path.is_file():
        raise RunImportError(f"{path}: missing; {run_dir} is not a complete processed run")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunImportError(f"{path}: cannot parse ({str(exc).splitlines()[0]})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("video"), dict):
        raise RunImportError(f"{path}: not a run summary (no 'video' section)")
    return summary


def _float(value: str) -> float | None:
    if value in ("", None):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _class_id(name: str) -> int:
    if name in VEHICLE_CLASSES:
        return VEHICLE_CLASSES.index(name)
    return int(name) if name.lstrip("-").isdigit() else -1


def _track_state(row: dict) -> TrackState:
    gx, gy = _float(row.get("ground_x_m", "")), _float(row.get("ground_y_m", ""))
    return TrackState(
        track_id=int(row["track_id"]),
        xyxy=np.array([float(row[k]) for k in ("x1", "y1", "x2", "y2")], np.float32),
        score=float(row["score"]),
        class_id=_class_id(row["class"]),
        moving=row["moving"] == "1",
        speed_kmh=_float(row["speed_kmh"]),
        speed_sigma_kmh=_float(row.get("speed_sigma_kmh", "")),
        speed_flag=row.get("speed_flag") or None,
        ground_xy=(gx, gy) if gx is not None and gy is not None else None,
        lat=_float(row.get("lat", "")),
        lon=_float(row.get("lon", "")),
    )


def _frame_results(csv_path: Path, fps: float, total_frames: int):
    """FrameResults in frame order, including the frames without any vehicle (the sink counts frames)."""
    next_index = 0
    current, t, source = None, 0.0, None
    tracks: list[TrackState] = []
    with open(csv_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"frame", "t", "track_id", "class", "x1", "y1", "x2", "y2", "score", "moving", "speed_kmh"} - set(
            reader.fieldnames or []
        )
        if missing:
            raise RunImportError(f"{csv_path}: not a tracks.csv (missing columns {', '.join(sorted(missing))})")
        for line_no, row in enumerate(reader, start=2):
            try:
                index, state = int(row["frame"]) - 1, _track_state(row)
                row_t = float(row["t"])
            except (TypeError, ValueError) as exc:
                raise RunImportError(f"{csv_path}: line {line_no}: bad value ({exc})") from None
            if index != current:
                if current is not None:
                    yield FrameResult(Frame(current, t, _NO_IMAGE), tracks, scale_source=source)
                    next_index = current + 1
                if index < next_index:
                    raise RunImportError(f"{csv_path}: line {line_no}: frame {index + 1} out of order")
                for empty in range(next_index, index):
                    yield FrameResult(Frame(empty, empty / fps, _NO_IMAGE), [])
                current, tracks, t = index, [], row_t
                source = row.get("scale_source") or None  # the frame's scale source (the same on all its rows)
            tracks.append(state)
    if current is not None:
        yield FrameResult(Frame(current, t, _NO_IMAGE), tracks, scale_source=source)
        next_index = current + 1
    for empty in range(next_index, total_frames):
        yield FrameResult(Frame(empty, empty / fps, _NO_IMAGE), [])


def _import_flight(maker: sessionmaker, log_path: Path, device_serial: str | None) -> int:
    from db.importer import import_flight_log
    from vision.telemetry import load_flight_log

    log = load_flight_log(log_path)
    serial = device_serial or log.device.get("serial") or FALLBACK_DEVICE_SERIAL
    with maker() as s, s.begin():
        return import_flight_log(
            s, log_path, device_serial=serial, create_device=True, progress=False, log=log
        ).flight_id


def import_run_dir(
    run_dir: str | Path,
    target=None,
    flight_id: int | None = None,
    *,
    import_telemetry: bool = True,
    device_serial: str | None = None,
    speed_limit_kmh: float | None = None,
    task_round_id: int | None = None,
    progress: bool = False,
    orthophoto: bool = True,
) -> ImportedRun:
    """Store the results of a processed run folder; returns the new run's ids and counts.

    ``target``: an Engine, a sessionmaker, a database URL, None (the configured database) or a Session (its
    pending changes are committed first: the sink writes through its own connections).
    ``speed_limit_kmh`` (or the task of ``task_round_id``) turns speeds above it into violations.
    ``orthophoto``: also project the run's video onto the ground (``vision.orthophoto``) unless the folder has one.
    """
    from db.sink import DatabaseSink

    run_dir = Path(run_dir).resolve()
    summary = _load_summary(run_dir)
    tracks_csv = run_dir / "tracks.csv"
    if not tracks_csv.is_file():
        raise RunImportError(f"{tracks_csv}: missing; {run_dir} is not a complete processed run")
    maker = _maker(target)
    video = summary["video"]
    fps = float(video.get("fps") or 25.0)
    frames = int((summary.get("counts") or {}).get("frames") or 0)
    # the inputs where they are now, whatever folder the run was processed or is imported from (vision/run_inputs.py)
    log_path, video_path = run_telemetry(run_dir, summary), run_video(run_dir, summary)
    if flight_id is None and import_telemetry and log_path is not None and log_path.is_file():
        flight_id = _import_flight(maker, log_path, device_serial)

    sink = DatabaseSink(
        session_maker=maker, flight_id=flight_id, task_round_id=task_round_id, speed_limit_kmh=speed_limit_kmh
    )
    info = RunInfo(
        str(video_path or summary.get("source") or run_dir),  # the video's row: the same one from any folder
        int(video.get("width") or 0),
        int(video.get("height") or 0),
        fps,
        video.get("frame_count") or frames or None,
        summary.get("config") or {},
        str(summary.get("weights") or ""),
        str(summary.get("mode") or "dual_layer"),
        str(summary.get("device") or ""),
    )
    sink.open(info)
    try:
        with tqdm(total=frames or None, unit="frame", desc=f"import {run_dir.name}"[:24], disable=not progress) as bar:
            for result in _frame_results(tracks_csv, fps, frames):
                sink.write(result)
                bar.update(1)
        sink.close({**summary, "output_dir": str(run_dir)})
    except BaseException as exc:
        sink.abort(exc)
        raise
    from db.vehicles import track_counts

    ortho_note = _orthophoto(run_dir) if orthophoto else None
    with maker() as s:
        run = s.get(ProcessingRun, sink.run_id)
        vehicles, all_tracks = track_counts(s, run.id)
        wanted = [
            Wanted(no, t)
            for no, t in s.execute(
                select(TrackRow.track_no, Violation.t_s)
                .join(TrackRow, TrackRow.id == Violation.track_id)
                .where(Violation.run_id == run.id)
            )
        ]
        snapshots = _snapshots(run_dir, wanted, fps)
        clips = _clips(run_dir, wanted, fps)
        return ImportedRun(
            run.id, flight_id, run.video_id, vehicles, len(wanted), all_tracks - vehicles, ortho_note, snapshots, clips
        )


def _snapshots(run_dir: Path, wanted: list, fps: float) -> int:
    """Evidence images of the violations; a run whose video is unreadable is still imported without them."""
    from vision.evidence import make_snapshots

    try:
        return len(make_snapshots(run_dir, wanted, fps))
    except (OSError, ValueError, cv2.error) as exc:  # av errors are OSError / ValueError subclasses
        logging.getLogger(__name__).warning(
            "%s: no violation snapshots (%s: %s)", run_dir, type(exc).__name__, str(exc).splitlines()[0][:200]
        )
        return 0


def _clips(run_dir: Path, wanted: list, fps: float) -> int:
    """Short clips of the violations; a run whose video is unreadable is still imported without them."""
    from vision.evidence import make_clips

    try:
        return len(make_clips(run_dir, wanted, fps))
    except (OSError, ValueError, cv2.error) as exc:
        logging.getLogger(__name__).warning(
            "%s: no violation clips (%s: %s)", run_dir, type(exc).__name__, str(exc).splitlines()[0][:200]
        )
        return 0


def _orthophoto(run_dir: Path) -> str:
    """Make the run's orthophoto when it has none; a run without one is still imported (the note says why)."""
    from vision.orthophoto import OrthophotoError, make_orthophoto, read_orthophoto

    if (meta := read_orthophoto(run_dir)) is not None:
        return f"orthophoto kept ({len(meta.get('frames', []))} frames)"
    try:
        o = make_orthophoto(run_dir)
    except OrthophotoError as exc:
        return f"no orthophoto: {exc}"
    except (OSError, cv2.error) as exc:
        return f"no orthophoto: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return f"orthophoto of {o.frames} frames at {o.metres_per_pixel:.2f} m/px"
