"""Property tests: every flight-log parser, fed random bytes or a real log mutated at random (bytes flipped, cut,
inserted, deleted), either returns samples or raises the one-line FlightLogError - never another exception, never
a hang. Bounded: few examples and a per-example deadline, so the suite stays fast."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED
from vision.telemetry import FlightLogError, load_flight_log

TELEMETRY = SHARED / "data" / "telemetry"

SRT = """1
00:00:00,000 --> 00:00:00,033
<font size="28">FrameCnt: 1, DiffTime: 33ms
2024-05-17 10:11:12.345
[iso: 100] [shutter: 1/1000.0] [fnum: 2.8] [ev: 0] [focal_len: 24.00] [latitude: 47.123456] [longitude: 8.123456] [rel_alt: 80.000 abs_alt: 520.000] [gb_yaw: 90.0 gb_pitch: -90.0 gb_roll: 0.0] </font>

2
00:00:00,033 --> 00:00:00,066
<font size="28">FrameCnt: 2, DiffTime: 33ms
2024-05-17 10:11:12.378
[iso: 100] [shutter: 1/1000.0] [fnum: 2.8] [ev: 0] [focal_len: 24.00] [latitude: 47.123466] [longitude: 8.123466] [rel_alt: 80.100 abs_alt: 520.100] [gb_yaw: 90.0 gb_pitch: -90.0 gb_roll: 0.0] </font>
"""
CSV = (
    "time(millisecond),datetime(utc),latitude,longitude,height_above_takeoff(feet),compass_heading(degrees)\n"
    "0,2022-05-04 17:21:57,40.1,-7.5,100,90.5\n100,2022-05-04 17:21:57,40.1001,-7.5001,101,91\n"
)
GPX = (
    '<?xml version="1.0"?><gpx version="1.1" creator="t"><trk><trkseg>'
    '<trkpt lat="47.1" lon="8.1"><ele>500</ele><time>2024-05-17T10:11:12Z</time></trkpt>'
    '<trkpt lat="47.2" lon="8.2"><ele>501</ele><time>2024-05-17T10:11:13Z</time></trkpt></trkseg></trk></gpx>'
)


def _seeds() -> dict[str, bytes]:
    """Small text logs written here; the binary formats from the shared real logs (their first 64 kB) if present."""
    seeds = {"dji_srt": SRT.encode(), "dji_csv": CSV.encode(), "gpx": GPX.encode()}
    for name, rel in [
        ("px4_ulog", "px4_ulog/sample_log_small.ulg"),
        ("mavlink_tlog", "mavlink_tlog/sitl_copter_mav.tlog"),
        ("ardupilot_bin", "ardupilot_bin/00000001.BIN"),
        ("dji_srt_real", "dji_srt/p4p_sample.SRT"),
    ]:
        p = TELEMETRY / rel
        if p.is_file():
            with p.open("rb") as f:
                seeds[name] = f.read(64 * 1024)
    return seeds


SEEDS = _seeds()


def _check(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"log{suffix}"
        path.write_bytes(data)
        try:
            log = load_flight_log(path)
        except FlightLogError as exc:
            msg = str(exc)
            assert str(path) in msg and "\n" not in msg and "Traceback" not in msg  # one line naming the file
            return
    assert log.samples
    assert all(math.isfinite(s.t_s) for s in log.samples)
    assert log.complete or log.stopped_at  # a damaged log says where it stopped


mutation = st.tuples(
    st.sampled_from(["flip", "cut", "insert", "delete", "dup"]), st.floats(0, 1), st.binary(max_size=64)
)


def _mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for op, where, junk in ops:
        i = int(where * len(b)) if b else 0
        if op == "flip" and b:
            for k, byte in enumerate(junk or b"\xff"):
                if i + k < len(b):
                    b[i + k] ^= byte or 0x55
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = junk
        elif op == "delete":
            del b[i : i + 1 + len(junk) * 16]
        elif op == "dup":
            b[i:i] = b[max(0, i - 256) : i]
    return bytes(b)


FUZZ = settings(max_examples=25, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@FUZZ
@given(data=st.binary(max_size=4096), suffix=st.sampled_from([".SRT", ".csv", ".ulg", ".tlog", ".BIN", ".gpx", ".log"]))
def test_random_bytes(data, suffix):
    _check(data, suffix)


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_mutated_real_logs(fmt):
    suffix = {
        "dji_srt": ".SRT",
        "dji_srt_real": ".SRT",
        "dji_csv": ".csv",
        "gpx": ".gpx",
        "px4_ulog": ".ulg",
        "mavlink_tlog": ".tlog",
        "ardupilot_bin": ".BIN",
    }[fmt]

    @FUZZ
    @given(ops=st.lists(mutation, min_size=1, max_size=4))
    def run(ops):
        _check(_mutate(SEEDS[fmt], ops), suffix)

    run()


def test_ulog_cut_inside_a_definition_does_not_hang():
    """Found by the fuzzing above: pyulog looped forever (and grew to gigabytes) on this damaged ULog."""
    if "px4_ulog" not in SEEDS:
        pytest.skip(f"shared ULog sample not found under {TELEMETRY}")
    import time

    data = _mutate(SEEDS["px4_ulog"], [("delete", 0.7609624449125756, b"\xc2k0\xf9\x0e\xc7\xdd")])
    t0 = time.perf_counter()
    _check(data, ".ulg")
    assert time.perf_counter() - t0 < 10
