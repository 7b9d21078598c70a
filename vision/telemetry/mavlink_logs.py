"""MAVLink telemetry logs (``.tlog``) and ArduPilot DataFlash logs (``.BIN``) via pymavlink.

A sample is emitted for every position message (``GLOBAL_POSITION_INT`` in a tlog; ``POS``, else ``GPS``, in a
DataFlash log) with the latest attitude, speed, battery and gimbal values seen before it (they arrive at about the
same rate). Damage handling differs on purpose:

* tlog packets carry a CRC; packets failing it are normal on radio links and are skipped with a warning. The log
  is incomplete only when it ends in the middle of a packet.
* DataFlash has no CRC: a gap of unreadable bytes means the file is corrupted, so reading stops there
  (pymavlink would resynchronise, but what follows a gap cannot be trusted).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample

DATAFLASH_MAGIC = b"\xa3\x95\x80"  # header bytes + FMT message id
_UNIX_2000 = 946684800.0  # timestamps before this are boot-relative, not wall clock


def looks_like_tlog(head: bytes) -> bool:
    """8-byte big-endian microsecond Unix time, then a MAVLink v1 (0xFE) or v2 (0xFD) packet start."""
    if len(head) < 10 or head[8] not in (0xFE, 0xFD):
        return False
    usec = int.from_bytes(head[:8], "big")
    return _UNIX_2000 * 1e6 < usec < 4102444800 * 1e6  # 2000..2100


def _utc(ts: float) -> datetime | None:
    return datetime.fromtimestamp(ts, timezone.utc) if ts > _UNIX_2000 else None


def _finish(samples: list[TelemetrySample], path: Path, fmt: str) -> None:
    if not samples:
        raise FlightLogError(f"{path}: no position messages in this {fmt} log")
    t0 = samples[0].t_s
    for s in samples:
        s.t_s -= t0


def parse_tlog(data: bytes, path: Path) -> FlightLog:
    from pymavlink import mavutil

    log = FlightLog(samples=[], path=path, format="mavlink_tlog", checksum="")
    conn = mavutil.mavlogfile(str(path), robust_parsing=True)
    state: dict[str, float | None] = {}
    vehicle_sysid = None
    bad = 0
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        while True:
            msg = conn.recv_msg()
            if msg is None:
                if conn.f.tell() >= len(data):
                    break
                continue
            kind = msg.get_type()
            if kind == "BAD_DATA":
                bad += 1
                continue
            if kind == "HEARTBEAT" and msg.autopilot != mavutil.mavlink.MAV_AUTOPILOT_INVALID:
                vehicle_sysid = vehicle_sysid or msg.get_srcSystem()
                log.device.setdefault("model", mavutil.mavlink.enums["MAV_TYPE"][msg.type].name)
                log.device.setdefault("autopilot", mavutil.mavlink.enums["MAV_AUTOPILOT"][msg.autopilot].name)
                continue
            if vehicle_sysid is not None and msg.get_srcSystem() != vehicle_sysid:
                continue  # ground station / companion traffic
            if kind == "ATTITUDE":
                state["heading"] = math.degrees(msg.yaw) % 360.0
            elif kind == "VFR_HUD":
                state["gspeed"], state["climb"] = msg.groundspeed, msg.climb
            elif kind == "BATTERY_STATUS" and msg.id == 0 and msg.battery_remaining >= 0:
                state["battery"] = float(msg.battery_remaining)
            elif kind == "SYS_STATUS" and msg.battery_remaining >= 0 and "battery" not in state:
                state["battery_sys"] = float(msg.battery_remaining)
            elif kind == "MOUNT_STATUS":
                state["g_pitch"], state["g_roll"], state["g_yaw"] = (
                    msg.pointing_a / 100,
                    msg.pointing_b / 100,
                    msg.pointing_c / 100,
                )
            elif kind == "MOUNT_ORIENTATION":
                yaw = getattr(msg, "yaw_absolute", msg.yaw)
                state["g_pitch"], state["g_roll"], state["g_yaw"] = msg.pitch, msg.roll, yaw
            elif kind == "HOME_POSITION" and log.home is None and (msg.latitude, msg.longitude) != (0, 0):
                log.home = (msg.latitude * 1e-7, msg.longitude * 1e-7, msg.altitude * 1e-3)
            elif kind == "AUTOPILOT_VERSION" and msg.uid:
                log.device.setdefault("serial", f"{msg.uid:016X}")
            elif kind == "STATUSTEXT" and msg.text.startswith(
                ("ArduCopter", "ArduPlane", "ArduRover", "ArduSub", "PX4")
            ):
                log.device.setdefault("firmware", msg.text.strip())
            elif kind == "GLOBAL_POSITION_INT":
                vehicle_sysid = vehicle_sysid or msg.get_srcSystem()
                ts = msg._timestamp
                s = TelemetrySample(t_s=ts, time_utc=_utc(ts))
                if (msg.lat, msg.lon) != (0, 0):  # 0,0 until the EKF has a GPS origin
                    s.lat, s.lon, s.abs_alt_m = msg.lat * 1e-7, msg.lon * 1e-7, msg.alt * 1e-3
                s.rel_alt_m = msg.relative_alt * 1e-3
                s.heading_deg = msg.hdg / 100.0 if msg.hdg != 65535 else state.get("heading")
                s.ground_speed_ms = state.get("gspeed", math.hypot(msg.vx, msg.vy) / 100.0)
                s.vertical_speed_ms = state.get("climb", -msg.vz / 100.0)
                s.battery_pct = state.get("battery", state.get("battery_sys"))
                s.gimbal_pitch_deg, s.gimbal_roll_deg = state.get("g_pitch"), state.get("g_roll")
                s.gimbal_yaw_deg = state.get("g_yaw")
                log.samples.append(s)
    leftover = len(conn.mav.buf) - conn.mav.buf_index
    if leftover > 0:
        log.complete = False
        log.stopped_at = f"byte {len(data) - leftover}: file ends inside a MAVLink packet (truncated)"
    if bad:
        log.warnings.append(f"{bad} MAVLink packets failed their CRC and were skipped")
    _finish(log.samples, path, "MAVLink tlog")
    return log


def parse_dataflash(data: bytes, path: Path) -> FlightLog:
    from pymavlink import DFReader

    log = FlightLog(samples=[], path=path, format="ardupilot_bin", checksum="")
    state: dict[str, float | None] = {}
    sink = io.StringIO()
    with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):  # pymavlink prints every bad byte
        # The Cython indexer prints each bad byte to the C-level stderr, which cannot be captured; the pure-Python
        # one prints to sys.stderr (captured above) and indexes a 3 MB log in ~0.1 s.
        saved = os.environ.get("PYMAVLINK_FAST_INDEX")
        os.environ["PYMAVLINK_FAST_INDEX"] = "0"
        try:
            reader = DFReader.DFReader_binary(str(path), zero_time_base=False)
        except Exception as exc:
            raise FlightLogError(f"{path}: unreadable DataFlash log ({exc})") from None
        finally:
            if saved is None:
                os.environ.pop("PYMAVLINK_FAST_INDEX", None)
            else:
                os.environ["PYMAVLINK_FAST_INDEX"] = saved
        have_pos = "POS" in reader.name_to_id and reader.counts[reader.name_to_id["POS"]] > 0
        prev_end = 0
        while True:
            msg = reader.recv_msg()
            if msg is None:
                break
            start = reader.offset - reader.formats[msg.fmt.type].len
            if start != prev_end:
                log.complete = False
                log.stopped_at = f"byte {prev_end}: {start - prev_end} unreadable bytes (corrupted DataFlash data)"
                break
            prev_end = reader.offset
            kind = msg.get_type()
            if kind == "ATT":
                state["heading"] = msg.Yaw % 360.0
            elif kind == "BAT" and getattr(msg, "Instance", 0) == 0 and hasattr(msg, "RemPct"):
                state["battery"] = float(msg.RemPct)
            elif kind in ("MNT", "MOUN"):
                state["g_pitch"] = getattr(msg, "Pitch", None)
                state["g_roll"] = getattr(msg, "Roll", None)
                state["g_yaw"] = getattr(msg, "YawEF", getattr(msg, "Yaw", None))
            elif kind == "ORGN" and (msg.Lat, msg.Lng) != (0, 0) and (log.home is None or msg.Type == 1):
                log.home = (msg.Lat, msg.Lng, msg.Alt)
            elif kind == "VER" and getattr(msg, "FWS", ""):
                log.device.setdefault("firmware", msg.FWS)
            elif kind == "MSG":
                text = msg.Message.strip()
                if text.startswith(("ArduCopter", "ArduPlane", "ArduRover", "ArduSub", "Blimp", "AntennaTracker")):
                    log.device.setdefault("firmware", text)
                parts = text.split()
                if len(parts) == 4 and all(len(p) == 8 and all(c in "0123456789ABCDEF" for c in p) for p in parts[1:]):
                    log.device.setdefault("model", parts[0])  # "CubeOrange 00350031 33305111 30383839"
                    log.device.setdefault("serial", "".join(parts[1:]))
            elif kind == "GPS" and getattr(msg, "I", 0) == 0:
                state["gspeed"], state["vz"] = msg.Spd, msg.VZ
                if not have_pos and msg.Status >= 3:
                    s = TelemetrySample(t_s=msg._timestamp, time_utc=_utc(msg._timestamp))
                    s.lat, s.lon, s.abs_alt_m = msg.Lat, msg.Lng, msg.Alt
                    _fill(s, state)
                    log.samples.append(s)
            elif kind == "POS":
                s = TelemetrySample(t_s=msg._timestamp, time_utc=_utc(msg._timestamp))
                if (msg.Lat, msg.Lng) != (0, 0):
                    s.lat, s.lon, s.abs_alt_m = msg.Lat, msg.Lng, msg.Alt
                s.rel_alt_m = getattr(msg, "RelHomeAlt", None)
                _fill(s, state)
                log.samples.append(s)
        tail = data[prev_end : prev_end + 3]
        if log.complete and len(tail) == 3 and tail[:2] == DATAFLASH_MAGIC[:2] and tail[2] in reader.formats:
            log.complete = False  # a message header with too few bytes after it: the file was cut
            log.stopped_at = f"byte {prev_end}: file ends inside a {reader.formats[tail[2]].name} message (truncated)"
    if not have_pos and log.samples:
        log.warnings.append("no POS messages: positions from raw GPS, no height above home")
    _finish(log.samples, path, "DataFlash")
    return log


def _fill(s: TelemetrySample, state: dict) -> None:
    s.heading_deg = state.get("heading")
    s.ground_speed_ms = state.get("gspeed")
    vz = state.get("vz")
    s.vertical_speed_ms = -vz if vz is not None else None  # ArduPilot GPS.VZ is positive down
    s.battery_pct = state.get("battery")
    s.gimbal_pitch_deg, s.gimbal_roll_deg, s.gimbal_yaw_deg = (
        state.get("g_pitch"),
        state.get("g_roll"),
        state.get("g_yaw"),
    )
