"""PoseTrack interpolation, coverage errors, sidecar lookup, to_pose."""

from __future__ import annotations

from pathlib import Path

import pytest

from vision.telemetry import PoseTrack, TelemetryCoverageError, TelemetrySample, find_sidecar_srt, to_pose
from vision.types import CameraModel

CAM = CameraModel("test 1-inch", sensor_width_mm=13.2, sensor_height_mm=8.8, focal_length_mm=10.26)


def samples():
    return [
        TelemetrySample(
            t_s=0.0,
            lat=45.0,
            lon=179.9,
            rel_alt_m=100.0,
            heading_deg=350.0,
            gimbal_pitch_deg=-90.0,
            gimbal_yaw_deg=-170.0,
            focal_len_mm=24.0,
        ),
        TelemetrySample(
            t_s=2.0,
            lat=45.002,
            lon=-179.9,
            rel_alt_m=110.0,
            heading_deg=10.0,
            gimbal_pitch_deg=-80.0,
            gimbal_yaw_deg=170.0,
            focal_len_mm=24.0,
        ),
        TelemetrySample(t_s=4.0, lat=45.004, lon=-179.8, rel_alt_m=None, heading_deg=30.0),
    ]


def test_linear_and_circular_interpolation():
    track = PoseTrack.from_samples(samples())
    p = track.pose_at(1.0)
    assert p.lat == pytest.approx(45.001) and p.altitude_m == pytest.approx(105.0)
    assert p.lon == pytest.approx(180.0) or p.lon == pytest.approx(-180.0)  # across the antimeridian, not via 0
    # camera yaw = gimbal yaw: -170 -> 170 passes through 180, not 0
    assert p.heading_deg == pytest.approx(180.0)
    assert p.gimbal_pitch_deg == pytest.approx(-85.0)
    assert track.pose_at(3.0).lon == pytest.approx(-179.85)


def test_heading_wraps_through_north_when_no_gimbal_yaw():
    track = PoseTrack.from_samples([TelemetrySample(0.0, heading_deg=350.0), TelemetrySample(2.0, heading_deg=10.0)])
    assert track.pose_at(1.0).heading_deg == pytest.approx(0.0, abs=1e-9) or track.pose_at(
        1.0
    ).heading_deg == pytest.approx(360.0)
    assert track.pose_at(0.5).heading_deg == pytest.approx(355.0)


def test_field_missing_at_the_end_is_none_beyond_tolerance():
    track = PoseTrack.from_samples(samples())
    assert track.pose_at(2.5).altitude_m == pytest.approx(110.0)  # within 1 s of the last altitude: held
    assert track.pose_at(3.5).altitude_m is None


def test_time_offset_and_coverage():
    track = PoseTrack.from_samples(samples(), time_offset_s=1.0)  # log time = video time + 1
    assert track.pose_at(0.0).lat == pytest.approx(45.001)
    assert track.covers(3.0) and track.covers(3.9) and not track.covers(10.0)
    with pytest.raises(TelemetryCoverageError, match="video runs 0..10.0 s"):
        track.require_covers(10.0)
    with pytest.raises(TelemetryCoverageError, match="no telemetry at video time 9.00 s"):
        track.pose_at(9.0)
    late = PoseTrack.from_samples(samples(), time_offset_s=-5.0)  # telemetry starts 5 s into the video
    assert not late.covers(2.0)
    assert isinstance(TelemetryCoverageError("x"), ValueError)


def test_to_pose_fields():
    s = samples()[0]
    p = to_pose(s, CAM)
    assert p.focal_length_mm == 24.0  # 35 mm-equivalent as logged (what vision.camera.camera_for_pose expects)
    assert p.heading_deg == pytest.approx(190.0) and p.altitude_m == 100.0 and p.camera is CAM
    assert (p.lat, p.lon, p.gimbal_pitch_deg) == (45.0, 179.9, -90.0)
    assert to_pose(s).camera is None
    assert PoseTrack.from_samples(samples(), CAM).pose_at(0.5).focal_length_mm == 24.0


def test_find_sidecar_srt(tmp_path: Path):
    video = tmp_path / "DJI_0042.MP4"
    video.write_bytes(b"")
    assert find_sidecar_srt(video) is None
    (tmp_path / "DJI_0041.SRT").write_text("x")
    assert find_sidecar_srt(video) is None
    (tmp_path / "DJI_0042.srt").write_text("x")
    assert find_sidecar_srt(video) == tmp_path / "DJI_0042.srt"


def test_empty_track_is_an_error():
    with pytest.raises(TelemetryCoverageError):
        PoseTrack.from_samples([])
