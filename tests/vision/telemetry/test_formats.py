"""CSV / ULog / tlog / DataFlash / GPX parsing, content-based detection, damaged and garbage files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vision.telemetry import FlightLogError, detect_format, load_flight_log

SHARED = Path(os.environ.get("AIRPATROL_SHARED", Path(__file__).resolve().parents[3] / ".." / "shared"))
TELEMETRY = SHARED / "data" / "telemetry"
needs_shared = pytest.mark.skipif(not TELEMETRY.is_dir(), reason=f"shared telemetry samples not found at {TELEMETRY}")

FT = 0.3048


AIRDATA = """time(millisecond),datetime(utc),latitude,longitude,height_above_takeoff(feet),altitude_above_seaLevel(feet),speed(mph), zSpeed(mph), compass_heading(degrees),gimbal_heading(degrees),gimbal_pitch(degrees),battery_percent
0,2022-05-04 17:21:57,40.1,-7.5,100,2000,10,-2,90.5,91,-89.9,87
100,2022-05-04 17:21:57,40.1001,-7.5001,101,2001,20,0,91,92,-89.9,87
"""


def test_airdata_csv_units(tmp_path):
    p = tmp_path / "flight.csv"
    p.write_text(AIRDATA)
    log = load_flight_log(p)
    assert log.format == "dji_csv" and log.complete and len(log.samples) == 2
    a, b = log.samples
    assert a.rel_alt_m == pytest.approx(100 * FT) and a.abs_alt_m == pytest.approx(2000 * FT)
    assert a.ground_speed_ms == pytest.approx(10 * 0.44704)
    assert a.vertical_speed_ms == pytest.approx(2 * 0.44704)  # Airdata zSpeed is positive down
    assert (a.heading_deg, a.gimbal_yaw_deg, a.gimbal_pitch_deg, a.battery_pct) == (90.5, 91, -89.9, 87)
    assert b.t_s == pytest.approx(0.1) and a.time_utc.isoformat() == "2022-05-04T17:21:57+00:00"


def test_csv_bad_row_stops_there(tmp_path):
    p = tmp_path / "flight.csv"
    p.write_text(
        AIRDATA
        + "200,2022-05-04 17:21:58,40.1002,not-a-number,102,2002,20,0,91,92,-89.9,87\n"
        + "300,2022-05-04 17:21:58,40.1003,-7.5003,103,2003,20,0,91,92,-89.9,87\n"
    )
    log = load_flight_log(p)
    assert len(log.samples) == 2 and not log.complete and log.stopped_at.startswith("line 4:")


def test_csv_stray_carriage_return_is_damage_not_a_crash(tmp_path):
    """A byte flipped into a carriage return inside a row (found by the fuzz tests: csv raised its own error from
    inside the iteration, a traceback) ends the log there, with the rows before it kept."""
    p = tmp_path / "flight.csv"
    p.write_bytes(
        (AIRDATA + "200,2022-05-04 17:\r21:58,40.1002,-7.5002,102,2002,20,0,91,92,-89.9,87\n").encode()
        + b"300,2022-05-04 17:21:58,40.1003,-7.5003,103,2003,20,0,91,92,-89.9,87\n"
    )
    log = load_flight_log(p)
    assert len(log.samples) == 2 and not log.complete and log.stopped_at.startswith("line 4:")


@needs_shared
@pytest.mark.shared
def test_shared_airdata_csv_feet_to_metres():
    log = load_flight_log(TELEMETRY / "dji_csv" / "filtered_rotunda.csv")
    assert len(log.samples) == 629 and log.complete
    first = log.samples[0]  # row 3734 of the file, read by eye
    assert first.lat == pytest.approx(40.2732472373219) and first.lon == pytest.approx(-7.499214414693)
    assert first.rel_alt_m == pytest.approx(264.763788 * FT)  # 80.70 m
    assert first.abs_alt_m == pytest.approx(2019.2906984756 * FT)
    assert (first.heading_deg, first.gimbal_yaw_deg, first.gimbal_pitch_deg) == (308.7, 308.2, -89.9)
    assert log.samples[-1].t_s == pytest.approx(62.8)  # rows 3734..4362 at Airdata's 10 Hz
    assert any("100 ms" in w for w in log.warnings)


@needs_shared
@pytest.mark.shared
def test_ulog_positions_and_altitude():
    log = load_flight_log(TELEMETRY / "px4_ulog" / "sample_log_small.ulg")
    assert log.format == "px4_ulog" and log.device["model"] == "CUBEPILOT_CUBEORANGE"
    pos = [s for s in log.samples if s.has_position]
    assert pos and abs(pos[0].lat - 63.417) < 0.001 and abs(pos[0].lon - 10.408) < 0.001  # GPS lat 634170622e-7
    assert 60 < pos[0].abs_alt_m < 70  # GPS alt 66814 mm
    assert all(s.rel_alt_m is not None for s in log.samples)
    assert pos[0].time_utc.year == 2021
    sitl = load_flight_log(TELEMETRY / "px4_ulog" / "sample_logging_tagged_and_default_params.ulg")
    p = next(s for s in sitl.samples if s.has_position)
    assert abs(p.lat - 47.3977) < 0.001 and abs(p.lon - 8.5456) < 0.001 and abs(p.abs_alt_m - 488.0) < 1


@needs_shared
@pytest.mark.shared
def test_ulog_without_gps_has_heights_and_says_so():
    log = load_flight_log(TELEMETRY / "px4_ulog" / "sample.ulg")
    assert len(log.samples) > 100 and not log.has_positions
    assert all(s.rel_alt_m is not None and s.heading_deg is not None for s in log.samples)
    assert any("no global position" in w for w in log.warnings)


@needs_shared
@pytest.mark.shared
def test_tlog_and_bin_positions_and_altitude():
    # SITL home at CMAC (-35.3632621, 149.1652374, 584.09 m), as printed in HOME_POSITION / ORGN of both logs.
    for name, fmt in (
        ("mavlink_tlog/sitl_copter_mav.tlog", "mavlink_tlog"),
        ("ardupilot_bin/00000001.BIN", "ardupilot_bin"),
    ):
        log = load_flight_log(TELEMETRY / name)
        assert log.format == fmt and log.complete
        pos = [s for s in log.samples if s.has_position]
        assert len(pos) > 500
        assert pos[0].lat == pytest.approx(-35.3632621) and pos[0].lon == pytest.approx(149.1652374)
        assert pos[0].abs_alt_m == pytest.approx(584.09, abs=0.05) and abs(pos[0].rel_alt_m) < 0.1
        assert log.home[0] == pytest.approx(-35.3632621) and log.device["firmware"].startswith("ArduCopter")
        assert pos[0].time_utc.year == 2022 and log.duration_s > 50


@needs_shared
@pytest.mark.shared
def test_truncated_binary_logs_are_partial(tmp_path):
    for name in ("mavlink_tlog/sitl_copter_mav.tlog", "ardupilot_bin/00000001.BIN"):
        data = (TELEMETRY / name).read_bytes()
        cut = tmp_path / Path(name).name
        cut.write_bytes(data[: len(data) // 2 + 7])
        full, part = load_flight_log(TELEMETRY / name), load_flight_log(cut)
        assert not part.complete and "truncated" in part.stopped_at
        assert 0 < len(part.samples) < len(full.samples)
    garbled = tmp_path / "garbled.BIN"
    data = (TELEMETRY / "ardupilot_bin/00000001.BIN").read_bytes()
    garbled.write_bytes(data[:1_000_000] + b"\x13" * 500 + data[1_000_000:])
    log = load_flight_log(garbled)
    assert not log.complete and log.stopped_at.startswith("byte 1000") and "unreadable" in log.stopped_at


GPX = """<?xml version="1.0" encoding="UTF-8"?>
<gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">
<trk><trkseg>
<trkpt lat="46.5" lon="6.6"><ele>400.0</ele><time>2023-05-01T10:00:00Z</time></trkpt>
<trkpt lat="46.5001" lon="6.6001"><ele>430.0</ele><time>2023-05-01T10:00:02Z</time></trkpt>
<trkpt lat="46.5002" lon="6.6002"><ele>450.0</ele><time>2023-05-01T10:00:04Z</time></trkpt>
</trkseg></trk></gpx>
"""


def test_gpx_and_truncated_gpx(tmp_path):
    p = tmp_path / "track.gpx"
    p.write_text(GPX)
    log = load_flight_log(p)
    assert log.format == "gpx" and log.complete and [s.t_s for s in log.samples] == [0.0, 2.0, 4.0]
    assert log.samples[1].abs_alt_m == 430.0 and log.samples[1].rel_alt_m == 30.0
    cut = tmp_path / "cut.gpx"
    cut.write_text(GPX[: GPX.index('<trkpt lat="46.5002"') + 30])
    part = load_flight_log(cut)
    assert len(part.samples) == 2 and not part.complete and part.stopped_at.startswith("line ")


def test_detection_is_by_content(tmp_path):
    srt_as_txt = tmp_path / "notes.txt"
    srt_as_txt.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\nHOME(149.0251,-20.2532) 2017.08.05 14:11:51\n"
        "GPS(149.0251,-20.2533,16) BAROMETER:1.9\nISO:100 Shutter:60 EV: Fnum:2.2\n"
    )
    assert load_flight_log(srt_as_txt).format == "dji_srt"
    gpx_as_csv = tmp_path / "track.csv"
    gpx_as_csv.write_text(GPX)
    assert load_flight_log(gpx_as_csv).format == "gpx"
    csv_as_srt = tmp_path / "x.SRT"
    csv_as_srt.write_text(AIRDATA)
    assert load_flight_log(csv_as_srt).format == "dji_csv"


@needs_shared
@pytest.mark.shared
def test_detection_of_renamed_binary_logs(tmp_path):
    for name, fmt in (
        ("px4_ulog/sample_log_small.ulg", "px4_ulog"),
        ("mavlink_tlog/sitl_copter_mav.tlog", "mavlink_tlog"),
        ("ardupilot_bin/00000001.BIN", "ardupilot_bin"),
        ("dji_srt/p4p_sample.SRT", "dji_srt"),
    ):
        renamed = tmp_path / f"renamed_{fmt}.txt"
        shutil.copyfile(TELEMETRY / name, renamed)
        assert detect_format(renamed.read_bytes()) == fmt
        assert load_flight_log(renamed).format == fmt


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"   \n\n",
        b"hello world\nthis is not a flight log\n",
        bytes(range(256)) * 40,
        b"a,b,c\n1,2,3\n",
        b"<?xml version='1.0'?><gpx></gpx>",
    ],
)
def test_garbage_is_a_one_line_error_naming_the_file(tmp_path, content):
    p = tmp_path / "junk.SRT"
    p.write_bytes(content)
    with pytest.raises(FlightLogError) as err:
        load_flight_log(p)
    assert "junk.SRT" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_missing_file(tmp_path):
    with pytest.raises(FlightLogError, match="no such file"):
        load_flight_log(tmp_path / "nope.srt")
