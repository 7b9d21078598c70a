"""A live stream's own calibration (the scale its speeds are measured with), set when the stream is added or later
from the Live page.

The service's ``service_streams`` table has no column for it (no schema change this time), so it is kept in
``<data_dir>/stream_calibrations.json`` (``{"<stream id>": {CalibrationConfig fields}}``), written atomically, and
read back when a stream is resumed after a restart. Wanted instead: a JSON column ``calibration_json`` on
``service_streams``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from tracking.config import CalibrationConfig

FILE_NAME = "stream_calibrations.json"
_lock = threading.Lock()


def _path(data_dir: Path) -> Path:
    return Path(data_dir) / FILE_NAME


def _read(data_dir: Path) -> dict:
    try:
        data = json.loads(_path(data_dir).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # unreadable: the streams run without their own calibration (logged by the caller)
        return {}
    return data if isinstance(data, dict) else {}


def load(data_dir: Path, stream_id: int) -> CalibrationConfig | None:
    with _lock:
        raw = _read(data_dir).get(str(stream_id))
    if not raw:
        return None
    try:
        return CalibrationConfig(**raw)
    except ValueError:
        return None


def save(data_dir: Path, stream_id: int, calibration: CalibrationConfig | None) -> None:
    with _lock:
        data = _read(data_dir)
        if calibration is None or not calibration.is_set:
            data.pop(str(stream_id), None)
        else:
            data[str(stream_id)] = calibration.model_dump(exclude_none=True)
        path = _path(data_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def describe(calibration: CalibrationConfig | None) -> str | None:
    """In words, for the stream's status and the Live page."""
    if calibration is None or not calibration.is_set:
        return None
    if calibration.metres_per_pixel:
        return f"{calibration.metres_per_pixel:g} m per pixel"
    if calibration.lonlat_points:
        return f"{len(calibration.lonlat_points)} georeferenced points"
    return f"{len(calibration.ground_points_m or [])} ground points"
