"""DJI SRT dialects: small inline samples (run everywhere) and every real file in ../shared (skipped when absent).

Expected values below were read by eye from the files, not produced by the parser.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vision.telemetry import FlightLogError, load_flight_log

SHARED = Path(os.environ.get("AIRPATROL_SHARED", Path(__file__).resolve().parents[3] / ".." / "shared"))
SRT_DIR = SHARED / "data" / "telemetry" / "dji_srt"
needs_shared = pytest.mark.skipif(not SRT_DIR.is_dir(), reason=f"shared DJI SRT samples not found at {SRT_DIR}")


def write(tmp_path: Path, text: str, name: str = "DJI_0001.SRT", encoding: str = "utf-8", newline: str = "\n") -> Path:
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode(encoding))
    return p


BRACKETED_SPACED = """1
00:00:00,000 --> 00:00:00,041
<font size="36">FrameCnt : 1, DiffTime : 41ms
2023-07-15 11:55:16,320,933
[iso : 100] [shutter : 1/400.0] [fnum : 280] [ev : 0] [ct : 5818] [color_md : default] [focal_len : 240] [latitude : 45.123456] [longtitude : 7.654321] [altitude: 312.500000] </font>

2
00:00:00,041 --> 00:00:00,083
<font size="36">FrameCnt : 2, DiffTime : 42ms
2023-07-15 11:55:16,362,600
[iso : 100] [shutter : 1/400.0] [fnum : 280] [ev : 0] [ct : 5818] [color_md : default] [focal_len : 480] [latitude : 45.123466] [longtitude : 7.654331] [altitude: 312.600000] </font>
"""

BRACKETED_COMPACT = """1
00:00:00,000 --> 00:00:00,033
<font size="28">SrtCnt : 1, DiffTime : 33ms
2024-01-18 10:23:26.397
[iso : 150] [shutter : 1/5000.0] [fnum : 170] [ev : 0] [ct : 5023] [color_md : default] [focal_len : 240] [dzoom_ratio: 10000, delta:0],[latitude: -22.724555] [longitude: -47.602414] [rel_alt: 52.300 abs_alt: 601.679] [gb_yaw : -152.5 gb_pitch : -90.0 gb_roll : 0.0] </font>

2
00:00:00,033 --> 00:00:00,066
<font size="28">SrtCnt : 2, DiffTime : 33ms
2024-01-18 10:23:26.430
[iso : 150] [shutter : 1/5000.0] [fnum : 170] [ev : 0] [ct : 5023] [color_md : default] [focal_len : 240] [dzoom_ratio: 10000, delta:0],[latitude: -22.724560] [longitude: -47.602420] [rel_alt: 52.400 abs_alt: 601.779] [gb_yaw : -152.0 gb_pitch : -89.5 gb_roll : 0.0] </font>
"""

LEGACY_HOME = """1
00:00:01,000 --> 00:00:02,000
HOME(149.0251,-20.2532) 2017.08.05 14:11:51
GPS(149.0251,-20.2533,16) BAROMETER:1.9
ISO:100 Shutter:60 EV: Fnum:2.2

2
00:00:02,000 --> 00:00:03,000
HOME(149.0251,-20.2532) 2017.08.05 14:11:52
GPS(149.0252,-20.2534,17) BAROMETER:2.5
ISO:100 Shutter:60 EV: Fnum:2.2
"""

LEGACY_M = """1
00:00:00,000 --> 00:00:01,000
2022.06.21 16:06:17
GPS(36.6146,-6.1120,12.0M) BAROMETER:40.3M

2
00:00:01,000 --> 00:00:02,000
2022.06.21 16:06:18
GPS(36.6147,-6.1121,12.5M) BAROMETER:41.0M
"""

P4_RTK = """36
00:00:35,000 --> 00:00:36,000
F/6.3, SS 60, ISO 100, EV 0, RTK (120.083799, 30.213635, 28), HOME (120.084146, 30.214243, 103.55m), D 75.36m, H 76.19m, H.S 0.30m/s, V.S 0.00m/s, F.PRY (-5.3°, 2.1°, 28.3°), G.PRY (-40.0°, 0.0°, 28.2°)

37
00:00:36,000 --> 00:00:37,000
F/6.3, SS 60, ISO 100, EV 0, RTK (120.083800, 30.213640, 28), HOME (120.084146, 30.214243, 103.55m), D 75.10m, H 76.20m, H.S 0.50m/s, V.S 0.10m/s, F.PRY (-5.0°, 2.0°, 29.0°), G.PRY (-41.0°, 0.0°, 29.0°)
"""

P4P_COMMA = """1
00:00:00,000 --> 00:00:01,000
F/3.2, SS 160, ISO 100, EV 0, GPS (8.2090, 47.4692, 18), D 49.21m, H 45.60m, H.S 0.00m/s, V.S 0.00m/s 


2
00:00:01,000 --> 00:00:02,000
F/3.2, SS 160, ISO 100, EV 0, GPS (8.2091, 47.4693, 18), D 49.24m, H 45.70m, H.S 0.20m/s, V.S 0.10m/s 
"""

NO_TIMECODES = """1
2017.08.05 14:11:51,393,525
[latitude : -20.2533] [longtitude : 149.0251] [iso : 100] [shutter : 1/60.0] [ev : 0] [fnum : 220]

2
2017.08.05 14:11:52,393,525
[latitude : -20.2534] [longtitude : 149.0252] [iso : 100] [shutter : 1/60.0] [ev : 0] [fnum : 220]
"""


def test_bracketed_spaced_longtitude_and_x10_focal(tmp_path):
    log = load_flight_log(write(tmp_path, BRACKETED_SPACED))
    assert log.format == "dji_srt" and log.variant == "bracketed" and log.complete
    a, b = log.samples
    assert (a.lat, a.lon, a.abs_alt_m) == (45.123456, 7.654321, 312.5)
    assert a.rel_alt_m is None  # [altitude: x] alone is absolute
    assert a.focal_len_mm == 24.0 and b.focal_len_mm == 48.0
    assert a.fnum == 2.8 and a.iso == 100 and a.shutter_s == pytest.approx(1 / 400)
    assert a.frame_cnt == 1 and b.t_s == pytest.approx(0.041)
    assert a.time_local.isoformat() == "2023-07-15T11:55:16.320933" and a.time_utc is None


def test_bracketed_compact_rel_abs_alt_and_gimbal(tmp_path):
    log = load_flight_log(write(tmp_path, BRACKETED_COMPACT))
    a, b = log.samples
    assert (a.lat, a.lon) == (-22.724555, -47.602414)
    assert (a.rel_alt_m, a.abs_alt_m) == (52.3, 601.679)
    assert (a.gimbal_yaw_deg, a.gimbal_pitch_deg, a.gimbal_roll_deg) == (-152.5, -90.0, 0.0)
    assert a.fnum == 1.7 and a.focal_len_mm == 24.0 and a.frame_cnt == 1
    assert b.t_s == pytest.approx(0.033) and b.gimbal_pitch_deg == -89.5


def test_legacy_home_lon_first_decided_by_values(tmp_path):
    log = load_flight_log(write(tmp_path, LEGACY_HOME))
    assert log.variant == "legacy_home" and not log.warnings  # 149 > 90: order is certain
    a, b = log.samples
    assert (a.lat, a.lon, a.abs_alt_m, a.rel_alt_m) == (-20.2533, 149.0251, 16.0, 1.9)
    assert (b.lat, b.lon, b.rel_alt_m) == (-20.2534, 149.0252, 2.5)
    assert a.t_s == 1.0 and a.fnum == 2.2 and a.shutter_s == pytest.approx(1 / 60)
    assert log.home == (-20.2532, 149.0251, None)


def test_legacy_home_swapped_order_also_decided_by_values(tmp_path):
    swapped = (
        LEGACY_HOME.replace("149.0251,-20.2532", "-20.2532,149.0251")
        .replace("149.0251,-20.2533", "-20.2533,149.0251")
        .replace("149.0252,-20.2534", "-20.2534,149.0252")
    )
    a = load_flight_log(write(tmp_path, swapped)).samples[0]
    assert (a.lat, a.lon) == (-20.2533, 149.0251)


def test_legacy_m_lat_first_with_ambiguity_warning(tmp_path):
    log = load_flight_log(write(tmp_path, LEGACY_M))
    assert log.variant == "legacy_m"
    a = log.samples[0]
    assert (a.lat, a.lon, a.abs_alt_m, a.rel_alt_m) == (36.6146, -6.1120, 12.0, 40.3)
    assert any("order" in w for w in log.warnings)


def test_comma_dialect_p4p(tmp_path):
    log = load_flight_log(write(tmp_path, P4P_COMMA))
    assert log.variant == "comma"
    a, b = log.samples
    assert (a.lat, a.lon, a.rel_alt_m) == (47.4692, 8.2090, 45.6)
    assert a.abs_alt_m is None  # third GPS value of this dialect is not an altitude
    assert (b.ground_speed_ms, b.vertical_speed_ms) == (0.2, 0.1)
    assert a.fnum == 3.2 and a.iso == 100 and a.shutter_s == pytest.approx(1 / 160)


def test_comma_dialect_p4_rtk_fpry_gpry(tmp_path):
    log = load_flight_log(write(tmp_path, P4_RTK))
    a = log.samples[0]
    assert (a.lat, a.lon, a.rel_alt_m) == (30.213635, 120.083799, 76.19)
    assert a.heading_deg == 28.3
    assert (a.gimbal_pitch_deg, a.gimbal_roll_deg, a.gimbal_yaw_deg) == (-40.0, 0.0, 28.2)
    assert a.t_s == 35.0
    assert log.home[:2] == (30.214243, 120.084146) and log.home[2] == pytest.approx(103.55)


def test_bom_and_crlf(tmp_path):
    log = load_flight_log(write(tmp_path, BRACKETED_COMPACT, encoding="utf-8-sig", newline="\r\n"))
    assert len(log.samples) == 2 and log.samples[0].lat == -22.724555 and log.complete


def test_no_timecodes_uses_dates(tmp_path):
    log = load_flight_log(write(tmp_path, NO_TIMECODES))
    assert [s.t_s for s in log.samples] == [0.0, 1.0]
    assert log.samples[1].lon == 149.0252 and log.samples[0].fnum == 2.2
    assert any("timecodes" in w for w in log.warnings)


def test_truncated_inline_entry_keeps_valid_part(tmp_path):
    cut = LEGACY_HOME + "\n3\n00:00:03,000 --> 00:00:04,000\nHOME(149.0251,-20.2532) 2017.08.05 14:11:53\n"
    log = load_flight_log(write(tmp_path, cut))
    assert len(log.samples) == 2 and not log.complete
    assert log.stopped_at == "line 13: truncated entry (no position)"


def test_truncated_mid_bracket(tmp_path):
    cut = BRACKETED_COMPACT.rstrip("\n")[:-60]
    log = load_flight_log(write(tmp_path, cut))
    assert len(log.samples) == 1 and not log.complete and "line 7" in log.stopped_at


def test_first_entry_damaged_is_an_error(tmp_path):
    with pytest.raises(FlightLogError, match="DJI_0001.SRT"):
        load_flight_log(write(tmp_path, "1\n00:00:00,000 --> 00:00:01,000\n[latitude: 1.0] [longitude: 2.\n"))


# --- the real files -------------------------------------------------------------------------------------------
# name: (samples, complete, first (lat, lon, rel_alt, abs_alt))
REAL = {
    "MAVIC3.srt": (12318, True, (3.41531, -3.37440, -2.4, 0.401)),
    "air2s.srt": (17, True, (41.424724, 2.234156, None, 117.0)),
    "broken_incomplete.SRT": (19, False, (-34.7383, -58.4563, 20.1, 19.0)),
    "matrice_300.srt": (381, True, (36.6146, -6.1120, 0.3, 0.0)),
    "mavic_2_style.SRT": (468, True, (-20.2533, 149.0251, None, None)),
    "mavic_2pro_new.SRT": (8952, True, (-35.080155, -60.286702, None, None)),
    "mavic_air.SRT": (2, True, (None, None, None, None)),
    "mavic_pro.SRT": (468, True, (-20.2533, 149.0251, 1.9, 16.0)),
    "old_format.SRT": (468, True, (-20.2533, 149.0251, 1.9, 16.0)),
    "p4p_sample.SRT": (5, True, (47.4692, 8.2090, 45.6, None)),
}


def _real_files():
    return sorted(p.name for p in SRT_DIR.iterdir() if p.suffix.lower() == ".srt") if SRT_DIR.is_dir() else []


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize("name", _real_files() or ["<none>"])
def test_every_shared_srt_parses_sanely(name):
    log = load_flight_log(SRT_DIR / name)
    assert log.format == "dji_srt" and log.samples
    times = [s.t_s for s in log.samples]
    assert times == sorted(times) and times[0] >= 0
    for s in log.samples:
        if s.has_position:
            assert -90 <= s.lat <= 90 and -180 <= s.lon <= 180
        if s.rel_alt_m is not None:
            assert -50 < s.rel_alt_m < 1000
        if s.focal_len_mm is not None:
            assert 4 < s.focal_len_mm < 1000
    if name in REAL:
        count, complete, (lat, lon, rel, absolute) = REAL[name]
        first = log.samples[0]
        assert len(log.samples) == count and log.complete == complete
        assert (first.lat, first.lon, first.rel_alt_m, first.abs_alt_m) == (lat, lon, rel, absolute)


@needs_shared
@pytest.mark.shared
def test_shared_details_read_by_eye():
    m3 = load_flight_log(SRT_DIR / "MAVIC3.srt")
    assert m3.samples[0].focal_len_mm == 24.0 and m3.samples[0].iso == 220 and m3.samples[-1].frame_cnt == 12318
    assert m3.samples[-1].t_s == pytest.approx(246.34)
    m2 = load_flight_log(SRT_DIR / "mavic_2pro_new.SRT")  # UTF-8 BOM, focal_len 280
    assert m2.samples[0].focal_len_mm == 28.0 and m2.samples[0].frame_cnt == 218
    broken = load_flight_log(SRT_DIR / "broken_incomplete.SRT")
    assert broken.stopped_at == "line 115: truncated entry (no position)"
    assert broken.samples[-1].rel_alt_m == 7.7
    p4p = load_flight_log(SRT_DIR / "p4p_sample.SRT")
    assert p4p.samples[3].ground_speed_ms == 2.62
    pro = load_flight_log(SRT_DIR / "mavic_pro.SRT")
    assert pro.home == (-20.2532, 149.0251, None)


def test_word_for_a_speed_component_leaves_the_speed_unset(tmp_path):
    # found by mypy: "drone_speedx : NA" used to end in a TypeError (None ** 2)
    text = BRACKETED_SPACED.replace(
        "[altitude: 312.500000]", "[altitude: 312.500000] [drone_speedx : NA] [drone_speedy : 1.0]"
    )
    assert "drone_speedx : NA" in text
    log = load_flight_log(write(tmp_path, text))
    assert log.samples[0].ground_speed_ms is None
    both = BRACKETED_SPACED.replace(
        "[altitude: 312.500000]", "[altitude: 312.500000] [drone_speedx : 3.0] [drone_speedy : 4.0]"
    )
    assert load_flight_log(write(tmp_path, both)).samples[0].ground_speed_ms == 5.0
