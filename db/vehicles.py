"""What counts as a vehicle: the one definition behind every count the dashboard shows or exports.

The tracker's raw output holds, besides the vehicles, short fragments: a vehicle briefly lost and picked up again
under a new id, a motion blob that flickered for a few frames. Counting every track id overstates the traffic
(on the real nadir clip: 133 ids for about 120 vehicles). A track counts as a vehicle when it was followed for at
least ``MIN_VEHICLE_S`` seconds - the window the speed is measured over, so every counted vehicle can have a
speed - or when the video ended while it was tracked (a vehicle that just drove in; at least ``MIN_FRAMES_AT_END``
frames, so a one-frame blip in the last frame does not count). The run's end is its last processed frame
(``processing_runs.last_frame``: a live stream's run numbers frames from the stream's start and keeps every k-th).
``import-run``, the runs list, the run page, the map and the exports all select with :func:`counted`, and
``tests/dashboard/test_vehicle_counts.py`` checks that they agree.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from db.models import ProcessingRun, TrackRow

MIN_VEHICLE_S = 1.0
MIN_FRAMES_AT_END = 3


def is_vehicle(duration_s: float, frame_span: int, tracked_at_video_end: bool) -> bool:
    """The same rule for a track held in memory (``airpatrol process``'s summary counts); ``frame_span``: last - first."""
    return duration_s >= MIN_VEHICLE_S or (tracked_at_video_end and frame_span >= MIN_FRAMES_AT_END - 1)


def counted():
    """SQL condition on :class:`TrackRow`: the track is a counted vehicle."""
    last_frame_of_run = (
        select(func.coalesce(ProcessingRun.last_frame, ProcessingRun.frames_done - 1))
        .where(ProcessingRun.id == TrackRow.run_id)
        .scalar_subquery()
    )
    return or_(
        TrackRow.last_t - TrackRow.first_t >= MIN_VEHICLE_S,
        and_(
            TrackRow.last_frame >= last_frame_of_run,
            TrackRow.last_frame - TrackRow.first_frame >= MIN_FRAMES_AT_END - 1,
        ),
    )


def vehicle_counts(db: Session, run_ids: Iterable[int]) -> dict[int, int]:
    """Counted vehicles per run (runs without any are absent)."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = db.execute(
        select(TrackRow.run_id, func.count()).where(TrackRow.run_id.in_(ids), counted()).group_by(TrackRow.run_id)
    ).all()
    return {run_id: n for run_id, n in rows}


def track_counts(db: Session, run_id: int) -> tuple[int, int]:
    """(counted vehicles, track ids the tracker reported) of one run."""
    total = db.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run_id)) or 0
    return vehicle_counts(db, [run_id]).get(run_id, 0), total
