"""DatabaseSink: batched writes, complete/failed/killed runs, re-runs, violations."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from sqlalchemy import func, select, update

from db.crud import create_device, create_task
from db.engine import session_scope
from db.models import Flight, ProcessingRun, TaskRound, TrackRow, TrackSpeed, Video, Violation
from db.queries import complete_run_of_video, tracks_of_run, violations_in_bbox
from db.sink import DatabaseSink, fail_stale_runs
from tracking.types import FrameResult, RunInfo, TrackState
from vision.types import Frame

FPS = 10.0
IMAGE = np.zeros((4, 4, 3), np.uint8)


def info(source="/videos/DJI_0001.MP4", mode="dual_layer", frames=50):
    return RunInfo(source, 1920, 1080, FPS, frames, {"detector": {"conf": 0.25}}, "airpatrol.pt", mode, "cpu")


def frames(n=50, fast_kmh=72.0):
    """Track 1: a car at ``fast_kmh`` all along; track 2: a truck at 30 km/h appearing at frame 10 (parked later)."""
    for i in range(n):
        t = i / FPS
        tracks = [
            TrackState(1, np.array([0, 0, 10, 10]), 0.9, 0, True, fast_kmh, 2.0, None, None, 46.5 + i * 1e-5, 6.6)
        ]
        if i >= 10:
            tracks.append(
                TrackState(
                    2,
                    np.array([5, 5, 20, 20]),
                    0.8,
                    1,
                    i < 30,
                    30.0 if i < 30 else 0.0,
                    1.5,
                    "implausible" if i == 20 else None,
                    None,
                    46.6,
                    6.7,
                )
            )
        yield FrameResult(Frame(i, t, IMAGE), tracks)


def run_sink(sink, n=50, fast_kmh=72.0, info_=None):
    sink.open(info_ or info(frames=n))
    for r in frames(n, fast_kmh):
        sink.write(r)
    sink.close({"mode": "dual_layer", "timings": {"fps": 12.5}})
    return sink.run_id


def test_complete_run_with_batches_and_violations(db_url):
    with session_scope(db_url) as s:
        d = create_device(s, "M3-1")
        flight = Flight(device_id=d.id, start_time=datetime(2024, 6, 1, 8, 0, 0), clock="utc", status="complete")
        s.add(flight)
        task = create_task(s, "A1 km 12", speed_limit_kmh=60, area=[(6.5, 46.4), (6.8, 46.4), (6.8, 46.7)])
        rnd = TaskRound(task_id=task.id, round_no=1)
        s.add(rnd)
        s.flush()
        fid, rid, tid = flight.id, rnd.id, task.id
    sink = DatabaseSink(db_url, flight_id=fid, task_round_id=rid, batch_rows=7)  # many small batches
    run_id = run_sink(sink)
    with session_scope(db_url) as s:
        run = s.get(ProcessingRun, run_id)
        assert run.status == "complete" and run.progress == 1.0 and run.frames_done == 50
        assert run.timings_json == {"fps": 12.5} and run.summary_json["violations"] == 1
        tracks = tracks_of_run(s, run_id, with_paths=True)
        assert [(t.track_no, t.class_name) for t in tracks] == [(1, "car"), (2, "truck")]
        car, truck = tracks
        assert (car.first_frame, car.last_frame, car.max_speed_kmh, car.moving) == (0, 49, 72.0, True)
        assert truck.first_t == pytest.approx(1.0) and truck.moving is True  # 20 of 40 frames moving
        assert truck.max_speed_kmh == 30.0  # the 'implausible' frame is left out of the aggregates
        assert '"LineString"' in car.path_geojson
        assert s.scalar(select(func.count(TrackSpeed.id))) == 50 + 40
        v = s.scalar(select(Violation))
        assert (v.track_id, v.task_id, v.speed_kmh, v.limit_kmh) == (car.id, tid, 72.0, 60.0)
        assert v.occurred_at == datetime(2024, 6, 1, 8, 0, 0) and v.time_is_estimate is False
        assert [x.id for x in violations_in_bbox(s, 46.0, 6.0, 47.0, 7.0)] == [v.id]
        assert violations_in_bbox(s, 10.0, 10.0, 11.0, 11.0) == []


def test_abort_marks_failed_and_a_killed_run_is_never_complete(db_url):
    sink = DatabaseSink(db_url, batch_rows=5)
    sink.open(info())
    for r in frames(20):
        sink.write(r)
    sink.abort(RuntimeError("decoder died"))
    killed = DatabaseSink(db_url, batch_rows=5)
    killed.open(info(source="/videos/other.MP4"))
    for r in frames(20):
        killed.write(r)  # process killed here: neither close() nor abort() runs
    with session_scope(db_url) as s:
        failed = s.get(ProcessingRun, sink.run_id)
        assert failed.status == "failed" and failed.error == "RuntimeError: decoder died"
        assert s.get(ProcessingRun, killed.run_id).status == "running"
        assert s.scalar(select(func.count(ProcessingRun.id)).where(ProcessingRun.status == "complete")) == 0
        assert fail_stale_runs(s, max_silence_s=3600) == 0  # still beating
        s.execute(
            update(ProcessingRun).where(ProcessingRun.id == killed.run_id).values(heartbeat_at=datetime(2000, 1, 1))
        )
        assert fail_stale_runs(s, max_silence_s=3600) == 1
    with session_scope(db_url) as s:
        assert s.get(ProcessingRun, killed.run_id).status == "failed"


def test_rerun_replaces_results_and_keeps_history(db_url):
    first = run_sink(DatabaseSink(db_url, speed_limit_kmh=50), fast_kmh=72.0)
    # a re-run that dies does not touch the complete one
    dying = DatabaseSink(db_url, speed_limit_kmh=50, batch_rows=5)
    dying.open(info())
    for r in frames(10):
        dying.write(r)
    dying.abort(KeyboardInterrupt())
    with session_scope(db_url) as s:
        video_id = s.get(ProcessingRun, first).video_id
        assert complete_run_of_video(s, video_id).id == first
    second = run_sink(DatabaseSink(db_url, speed_limit_kmh=50), fast_kmh=55.0)
    baseline = run_sink(DatabaseSink(db_url), info_=info(mode="baseline"))
    with session_scope(db_url) as s:
        statuses = dict(s.execute(select(ProcessingRun.id, ProcessingRun.status)).all())
        assert statuses == {first: "superseded", dying.run_id: "failed", second: "complete", baseline: "complete"}
        assert s.scalar(select(func.count(Video.id))) == 1  # same file = same video row
        assert complete_run_of_video(s, video_id).id == second
        assert s.scalar(select(func.count(TrackRow.id)).where(TrackRow.run_id == first)) == 0
        assert s.scalar(select(func.count(Violation.id))) == 1  # only the second run's (55 > 50)
        assert s.scalar(select(Violation.speed_kmh)) == 55.0
        assert s.scalar(select(func.count(TrackSpeed.id)).join(TrackRow).where(TrackRow.run_id == second)) == 90


def test_speed_rows_round_trip_odd_values(db_url):
    """Flags with quotes, % and backslashes, NaN/None speeds: stored exactly (MariaDB uses a literal bulk path)."""
    sink = DatabaseSink(db_url, batch_rows=3)
    sink.open(info(frames=6))
    odd = ["50% o'clock", 'say "hi"', "back\\slash", None, "x" * 40, "ünï 🚗"]
    for i, flag in enumerate(odd):
        speed = float("nan") if i == 3 else (None if i == 4 else 10.0 + i)
        sink.write(
            FrameResult(
                Frame(i, i / FPS, IMAGE),
                [TrackState(7, np.array([0, 0, 1, 1]), 0.5, 0, True, speed, None, flag, None, None, None)],
            )
        )
    sink.close({})
    with session_scope(db_url) as s:
        rows = s.execute(
            select(TrackSpeed.frame, TrackSpeed.speed_kmh, TrackSpeed.flag, TrackSpeed.lat).order_by(TrackSpeed.frame)
        ).all()
    assert [r.flag for r in rows] == ["50% o'clock", 'say "hi"', "back\\slash", None, "x" * 32, "ünï 🚗"]
    assert [r.speed_kmh for r in rows] == [10.0, 11.0, 12.0, None, None, 15.0]
    assert all(r.lat is None for r in rows)


def test_violation_needs_speed_minus_two_sigma_above_the_limit(db_url):
    """Size-prior speeds (flagged low_confidence_scale, with their sigma) count; a vehicle is a violation only when
    even speed - 2 sigma is over the limit, and the run states that rule."""
    sink = DatabaseSink(db_url, speed_limit_kmh=60)
    sink.open(info(source="/videos/sigma.MP4", frames=20))
    for i in range(20):
        tracks = [
            TrackState(1, np.array([0, 0, 10, 10]), 0.9, 0, True, 90.0, 10.0, "low_confidence_scale"),  # 70 > 60
            TrackState(2, np.array([20, 0, 30, 10]), 0.9, 0, True, 78.0, 10.0, "low_confidence_scale"),  # 58
            TrackState(3, np.array([40, 0, 50, 10]), 0.9, 0, True, 95.0, None, "low_confidence_scale"),
        ]  # no sigma
        sink.write(FrameResult(Frame(i, i / FPS, IMAGE), tracks, scale_source="size_prior"))
    sink.close({"mode": "dual_layer", "scale": {"source": "size_prior", "detail": "size_prior (nadir, 9 vehicles)"}})
    with session_scope(db_url) as s:
        rows = s.execute(
            select(TrackRow.track_no, Violation.speed_kmh)
            .join(Violation, Violation.track_id == TrackRow.id)
            .where(Violation.run_id == sink.run_id)
        ).all()
        assert [tuple(r) for r in rows] == [(1, 90.0)]
        # the record states its evidence: sigma, speed - 2 sigma, how long, by which rule, on which scale
        v = s.scalar(select(Violation).where(Violation.run_id == sink.run_id))
        assert (v.sigma_kmh, v.lower_bound_kmh, v.limit_kmh) == (10.0, 70.0, 60.0)
        assert v.over_limit_s == pytest.approx(2.0)  # 20 frames at 10 fps
        assert v.rule == "speed - 2 sigma > limit for at least 1 s" and v.scale_source == "size_prior"
        rows_by_no = {r.track_no: r for r in s.scalars(select(TrackRow).where(TrackRow.run_id == sink.run_id))}
        assert rows_by_no[1].median_sigma_kmh == 10.0 and rows_by_no[1].scale_source == "size_prior"
        assert rows_by_no[3].median_sigma_kmh is None and rows_by_no[3].scale_source is None  # no trusted speed at all
        run = s.get(ProcessingRun, sink.run_id)
        assert run.summary_json["violation_rule"] == "speed - 2 sigma > limit for at least 1 s"
        assert run.scale_source == "size_prior"
        medians = dict(
            s.execute(select(TrackRow.track_no, TrackRow.median_speed_kmh).where(TrackRow.run_id == sink.run_id)).all()
        )
        assert medians == {1: 90.0, 2: 78.0, 3: None}  # size-prior speeds are the track's speeds; no sigma, no trust


def test_violation_minimum_time_over_the_limit_is_stored(db_url):
    """A vehicle over the limit (by speed - 2 sigma) for less than the minimum time is no violation; the stored
    rule and time over the limit follow the sink's setting."""
    sink = DatabaseSink(db_url, speed_limit_kmh=60, min_over_limit_s=0.5)
    sink.open(info(source="/videos/short-over.MP4", frames=12))
    for i in range(12):
        tracks = [
            TrackState(1, np.array([0, 0, 10, 10]), 0.9, 0, True, 80.0 if i < 6 else 50.0, 2.0, None),  # 0.6 s
            TrackState(2, np.array([20, 0, 30, 10]), 0.9, 0, True, 80.0 if i < 4 else 50.0, 2.0, None),
        ]  # 0.4 s
        sink.write(FrameResult(Frame(i, i / FPS, IMAGE), tracks, scale_source="telemetry"))
    sink.close({"mode": "dual_layer"})
    with session_scope(db_url) as s:
        rows = s.execute(
            select(
                TrackRow.track_no,
                Violation.over_limit_s,
                Violation.rule,
                Violation.scale_source,
                Violation.lower_bound_kmh,
            )
            .join(Violation, Violation.track_id == TrackRow.id)
            .where(Violation.run_id == sink.run_id)
        ).all()
        assert [tuple(r) for r in rows] == [
            (1, pytest.approx(0.6), "speed - 2 sigma > limit for at least 0.5 s", "telemetry", 76.0)
        ]
        assert s.get(ProcessingRun, sink.run_id).scale_source == "telemetry"  # from the frames: no summary scale
