"""A live stream's own calibration (the scale its speeds are measured with), set when the stream is added or later
from the Live page.

Kept in ``service_streams.calibration_json`` (``CalibrationConfig`` fields; revision 0004), so it is read back when a
stream is resumed after a restart, seen by every service worker and carried by ``airpatrol db backup``. Before 0004
it lived in ``<data_dir>/stream_calibrations.json``; ``db/json_import.py`` moves that file's entries in once.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from edge.service.models import StreamRow
from tracking.config import CalibrationConfig


def load(session: Session, stream_id: int) -> CalibrationConfig | None:
    raw = session.scalar(select(StreamRow.calibration_json).where(StreamRow.id == stream_id))
    if not raw:
        return None
    try:
        return CalibrationConfig(**raw)
    except (TypeError, ValueError):  # not one any more (a field renamed): the stream runs with the service's scale
        return None


def save(session: Session, stream_id: int, calibration: CalibrationConfig | None) -> None:
    """Store (or clear, with None) the stream's calibration; the caller commits."""
    value = None if calibration is None or not calibration.is_set else calibration.model_dump(exclude_none=True)
    session.execute(update(StreamRow).where(StreamRow.id == stream_id).values(calibration_json=value))


def describe(calibration: CalibrationConfig | None) -> str | None:
    """In words, for the stream's status and the Live page."""
    if calibration is None or not calibration.is_set:
        return None
    if calibration.metres_per_pixel:
        return f"{calibration.metres_per_pixel:g} m per pixel"
    if calibration.lonlat_points:
        return f"{len(calibration.lonlat_points)} georeferenced points"
    return f"{len(calibration.ground_points_m or [])} ground points"
