"""db.vehicles: which tracks count as vehicles, for a recorded run (frames from 0) and a live stream's run (frames
numbered from the stream's start and paced: every k-th kept)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from db.engine import session_scope
from db.models import ProcessingRun, TrackRow
from db.sink import DatabaseSink
from db.vehicles import MIN_VEHICLE_S, counted, track_counts
from tracking.types import FrameResult, RunInfo, TrackState
from vision.types import Frame

FPS = 30.0
IMAGE = np.zeros((4, 4, 3), np.uint8)


def _track(no: int) -> TrackState:
    return TrackState(no, np.array([0, 0, 10, 10]), 0.9, 0, True, 50.0, 1.0, None, None, 46.5, 6.6)


def _write_run(db_url: str, first: int, step: int, n: int) -> int:
    """A car tracked all along (track 1), a 3-frame blip mid-run (track 2) and a car that drove in over the last
    3 frames (track 3), on ``n`` frames numbered ``first``, ``first + step``, ..."""
    sink = DatabaseSink(db_url, batch_rows=10)
    sink.open(RunInfo("rtsp://cam/1", 1280, 720, FPS, None, {}, None, "dual_layer", "cpu"))
    for i in range(n):
        index = first + i * step
        tracks = [_track(1)]
        if n // 2 <= i < n // 2 + 3:
            tracks.append(_track(2))
        if i >= n - 3:
            tracks.append(_track(3))
        sink.write(FrameResult(Frame(index, index / FPS, IMAGE), tracks))
    sink.close({"mode": "dual_layer"})
    return sink.run_id


def _counted_track_nos(db_url: str, run_id: int) -> set[int]:
    with session_scope(db_url) as s:
        return set(s.scalars(select(TrackRow.track_no).where(TrackRow.run_id == run_id, counted())))


def test_a_recorded_run_counts_the_vehicle_at_the_end_and_not_the_blip(db_url):
    run_id = _write_run(db_url, first=0, step=1, n=60)  # 2 s from frame 0
    assert _counted_track_nos(db_url, run_id) == {1, 3}
    assert track_counts_of(db_url, run_id) == (2, 3)


def test_a_paced_live_run_counts_the_same_vehicles(db_url):
    """Frames 9000, 9004, ... (a stream running for 5 minutes, every 4th frame kept): 60 processed frames, so
    ``frames_done - 1`` = 59 lies before every frame; the blip mid-run (0.27 s < MIN_VEHICLE_S) must not count as a
    vehicle "still tracked at the end"."""
    assert 3 * 4 / FPS < MIN_VEHICLE_S
    run_id = _write_run(db_url, first=9000, step=4, n=60)
    with session_scope(db_url) as s:
        run = s.get(ProcessingRun, run_id)
        assert (run.frames_done, run.last_frame) == (60, 9000 + 59 * 4)
    assert _counted_track_nos(db_url, run_id) == {1, 3}


def track_counts_of(db_url: str, run_id: int) -> tuple[int, int]:
    with session_scope(db_url) as s:
        return track_counts(s, run_id)


def test_the_migration_gives_existing_runs_their_last_frame(empty_db_url):
    """Revision 0006 on runs written before it: a recorded run gets ``frames_done - 1`` (its last tracked frame may
    be earlier), a live run its last tracked frame (later than ``frames_done - 1``)."""
    from sqlalchemy import text

    from db.engine import dispose_engines, make_db_engine
    from db.migrate import upgrade

    upgrade(empty_db_url, "0005")
    engine = make_db_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            for run_id, frames_done, track_last in ((1, 100, 80), (2, 60, 9236), (3, 0, None)):
                conn.execute(
                    text(
                        "INSERT INTO processing_runs (id, status, baseline, progress, frames_done, created_at, "
                        "completeness) VALUES (:id, 'complete', 0, 1.0, :n, '2026-11-28 04:00:00', 'complete')"
                    ),
                    {"id": run_id, "n": frames_done},
                )
                if track_last is not None:
                    conn.execute(
                        text(
                            "INSERT INTO tracks (run_id, track_no, class_name, first_t, last_t, first_frame, last_frame, moving) "
                            "VALUES (:id, 1, 'car', 0, 1, 0, :last, 1)"
                        ),
                        {"id": run_id, "last": track_last},
                    )
    finally:
        engine.dispose()
    upgrade(empty_db_url)
    with session_scope(empty_db_url) as s:
        got = {r.id: r.last_frame for r in s.scalars(select(ProcessingRun))}
    dispose_engines()
    assert got == {1: 99, 2: 9236, 3: None}
