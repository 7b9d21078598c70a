"""What a run reports as lost from its flight log: the damaged tail, and gaps in the samples during the video."""

from __future__ import annotations

from pathlib import Path

from edge.completeness import completeness, describe, telemetry_losses
from vision.telemetry.poses import PoseTrack
from vision.telemetry.types import FlightLog, TelemetrySample


def _log(times, complete=True, stopped_at=None):
    samples = [TelemetrySample(t_s=t, lat=47.0 + t * 1e-5, lon=8.0, rel_alt_m=80.0) for t in times]
    return FlightLog(samples, Path("DJI_0001.SRT"), "dji_srt", "0" * 64, complete=complete, stopped_at=stopped_at)


def test_intact_log_loses_nothing():
    log = _log([i / 10 for i in range(101)])
    assert telemetry_losses(log, PoseTrack.from_flight_log(log), 10.0, 25.0) == []
    assert completeness([]) == {"status": "complete", "losses": []}


def test_gap_during_the_video_is_reported_in_video_frames():
    times = [i / 10 for i in range(31)] + [6.0 + i / 10 for i in range(41)]  # nothing from 3.0 s to 6.0 s
    log = _log(times)
    [loss] = telemetry_losses(log, PoseTrack.from_flight_log(log), 10.0, 25.0)
    assert loss["input"] == "telemetry" and "3.0 s" in loss["reason"]
    assert loss["t_s"] == [3.0, 6.0] and loss["frames"] == [76, 151]


def test_damaged_log_is_reported_with_where_it_stopped():
    log = _log([i / 10 for i in range(101)], complete=False, stopped_at="line 404: truncated entry (no position)")
    [loss] = telemetry_losses(log, PoseTrack.from_flight_log(log), 10.0, 25.0)
    assert "line 404" in loss["reason"] and "DJI_0001.SRT" in loss["reason"]
    summary = {"video": {"frame_count": 250}, **completeness([loss])}
    assert summary["status"] == "incomplete" and "line 404" in describe(summary)


def test_gaps_outside_the_video_are_not_losses():
    times = [i / 10 for i in range(101)] + [30.0 + i / 10 for i in range(10)]  # gap after the 10 s video
    log = _log(times)
    assert telemetry_losses(log, PoseTrack.from_flight_log(log), 10.0, 25.0) == []
