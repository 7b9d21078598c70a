"""PX4 ULog (``.ulg``) via pyulog.

The sample timeline is the highest-rate position topic: ``vehicle_local_position`` (EKF, gives height above the
EKF origin = take-off, velocities and heading) when present, else ``vehicle_global_position``, else the raw GPS
topic. Other topics (global position / GPS for lat/lon, battery, gimbal) are interpolated or held onto that
timeline. ``time_utc`` comes from the GPS ``time_utc_usec`` offset to the boot clock.
"""

from __future__ import annotations

import contextlib
import io
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample

ULOG_MAGIC = b"ULog\x01\x12\x35"


def _topic(ulog, *names: str):
    for name in names:
        for d in ulog.data_list:
            if d.name == name and d.multi_id == 0 and len(d.data["timestamp"]):
                return d.data
    return None


def _interp(t: np.ndarray, src_t: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Linear interpolation onto ``t``; NaN outside the source's time span (no extrapolation)."""
    ok = np.isfinite(values)
    if ok.sum() < 1:
        return np.full(len(t), np.nan)
    out = np.interp(t, src_t[ok], values[ok])
    out[(t < src_t[ok][0]) | (t > src_t[ok][-1])] = np.nan
    return out


def _hold(t: np.ndarray, src_t: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Last value at or before each ``t`` (battery level, gimbal state)."""
    idx = np.searchsorted(src_t, t, side="right") - 1
    out = values[np.clip(idx, 0, None)].astype(float)
    out[idx < 0] = np.nan
    return out


def _quat_to_euler_deg(q0, q1, q2, q3):
    """Hamilton quaternion (w, x, y, z), body->NED, to roll, pitch, yaw in degrees."""
    roll = np.degrees(np.arctan2(2 * (q0 * q1 + q2 * q3), 1 - 2 * (q1**2 + q2**2)))
    pitch = np.degrees(np.arcsin(np.clip(2 * (q0 * q2 - q3 * q1), -1, 1)))
    yaw = np.degrees(np.arctan2(2 * (q0 * q3 + q1 * q2), 1 - 2 * (q2**2 + q3**2)))
    return roll, pitch, yaw


def _f(v) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def parse_px4_ulog(data: bytes, path: Path) -> FlightLog:
    ulog = _read(path, data)

    local = _topic(ulog, "vehicle_local_position")
    glob = _topic(ulog, "vehicle_global_position")
    gps = _topic(ulog, "vehicle_gps_position", "sensor_gps")
    base = local if local is not None else (glob if glob is not None else gps)
    if base is None:
        raise FlightLogError(f"{path}: ULog has no position topic (vehicle_local_position / global position / GPS)")
    t_us = base["timestamp"].astype(np.int64)
    t = t_us.astype(float)
    n = len(t)
    nan = np.full(n, np.nan)
    lat, lon, abs_alt = nan.copy(), nan.copy(), nan.copy()
    rel_alt, heading, gspeed, vspeed = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    warnings: list[str] = []

    if glob is not None:
        gt = glob["timestamp"].astype(float)
        lat, lon, abs_alt = _interp(t, gt, glob["lat"]), _interp(t, gt, glob["lon"]), _interp(t, gt, glob["alt"])
    elif gps is not None:
        gt = gps["timestamp"].astype(float)
        fix = gps["fix_type"] >= 2 if "fix_type" in gps else np.ones(len(gt), bool)
        lat_raw = np.where(fix, gps["lat"] * 1e-7, np.nan)
        lon_raw = np.where(fix, gps["lon"] * 1e-7, np.nan)
        lat, lon = _interp(t, gt, lat_raw), _interp(t, gt, lon_raw)
        abs_alt = _interp(t, gt, np.where(fix, gps["alt"] * 1e-3, np.nan))
    elif local is not None and "ref_lat" in local:
        ok = (local["xy_global"] == 1) & np.isfinite(local["ref_lat"])
        if ok.any():  # local NED offsets from the EKF origin, small-distance approximation
            r = 6371000.0
            lat = np.where(ok, local["ref_lat"] + np.degrees(local["x"] / r), np.nan)
            lon = np.where(
                ok, local["ref_lon"] + np.degrees(local["y"] / (r * np.cos(np.radians(local["ref_lat"])))), np.nan
            )
    if not np.isfinite(lat).any():
        warnings.append("no global position in this ULog (no GPS/global topic): samples carry height and heading only")

    if local is not None:
        rel_alt = np.where(local["z_valid"] == 1, -local["z"], np.nan) if "z_valid" in local else -local["z"]
        if "vx" in local:
            gspeed = np.hypot(local["vx"], local["vy"])
            vspeed = -local["vz"]
        yaw_key = "heading" if "heading" in local else ("yaw" if "yaw" in local else None)
        if yaw_key:
            heading = np.degrees(local[yaw_key].astype(float)) % 360.0
    elif gps is not None and "vel_m_s" in gps:
        gt = gps["timestamp"].astype(float)
        gspeed = _interp(t, gt, gps["vel_m_s"])
        vspeed = -_interp(t, gt, gps["vel_d_m_s"])
    if not np.isfinite(rel_alt).any() and np.isfinite(abs_alt).any():
        rel_alt = abs_alt - abs_alt[np.isfinite(abs_alt)][0]
        warnings.append("height above take-off taken as GPS altitude minus the first GPS altitude")

    battery = nan.copy()
    bat = _topic(ulog, "battery_status")
    if bat is not None:
        battery = _hold(t, bat["timestamp"].astype(float), bat["remaining"] * 100.0)
    g_pitch, g_roll, g_yaw = nan.copy(), nan.copy(), nan.copy()
    gimbal = _topic(ulog, "gimbal_device_attitude_status", "mount_orientation")
    if gimbal is not None:
        gt = gimbal["timestamp"].astype(float)
        if "q[0]" in gimbal:
            r, p, y = _quat_to_euler_deg(gimbal["q[0]"], gimbal["q[1]"], gimbal["q[2]"], gimbal["q[3]"])
        else:
            r, p, y = (np.degrees(gimbal[f"attitude_euler_angle[{i}]"]) for i in range(3))
        g_roll, g_pitch, g_yaw = _hold(t, gt, r), _hold(t, gt, p), _hold(t, gt, y)

    utc_offset_us = None
    if gps is not None and "time_utc_usec" in gps:
        valid = gps["time_utc_usec"] > 0
        if valid.any():
            i = int(np.argmax(valid))
            utc_offset_us = int(gps["time_utc_usec"][i]) - int(gps["timestamp"][i])

    samples = []
    for i in range(n):
        s = TelemetrySample(t_s=float(t_us[i] - t_us[0]) * 1e-6)
        if utc_offset_us is not None:
            s.time_utc = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(
                microseconds=int(t_us[i]) + utc_offset_us
            )
        s.lat, s.lon, s.abs_alt_m = _f(lat[i]), _f(lon[i]), _f(abs_alt[i])
        s.rel_alt_m, s.heading_deg = _f(rel_alt[i]), _f(heading[i])
        s.ground_speed_ms, s.vertical_speed_ms, s.battery_pct = _f(gspeed[i]), _f(vspeed[i]), _f(battery[i])
        s.gimbal_pitch_deg, s.gimbal_roll_deg, s.gimbal_yaw_deg = _f(g_pitch[i]), _f(g_roll[i]), _f(g_yaw[i])
        samples.append(s)

    info = ulog.msg_info_dict
    device = {
        k: str(info[src])
        for k, src in (("model", "ver_hw"), ("serial", "sys_uuid"), ("firmware", "ver_sw"), ("autopilot", "sys_name"))
        if src in info
    }
    log = FlightLog(
        samples=samples, path=path, format="px4_ulog", checksum="", variant=None, device=device, warnings=warnings
    )
    home = _topic(ulog, "home_position")
    if home is not None and np.isfinite(home["lat"][-1]) and (home["lat"][-1], home["lon"][-1]) != (0.0, 0.0):
        log.home = (float(home["lat"][-1]), float(home["lon"][-1]), _f(home["alt"][-1]))
    else:
        first = next((s for s in samples if s.has_position), None)
        if first and first.lat is not None and first.lon is not None:  # has_position: both are set
            log.home = (first.lat, first.lon, first.abs_alt_m)
    if ulog.file_corruption:
        log.complete = False
        log.stopped_at = f"t={samples[-1].t_s:.1f}s: ULog data corrupted or truncated after the last valid message"
    return log


class _RunawayRead(Exception):
    """pyulog kept reading far more than the file holds (it loops on some damaged files); not one of the errors
    pyulog swallows, so it ends the parse."""


class _GuardedFile(io.BytesIO):
    """The log's bytes for pyulog, with two guards against its endless loop on a message cut by the end of the
    file (pyulog 1.3 seeks back by the *declared* size from where the short read ended, landing before the
    message it started from, and reads the same bytes again, forever):

    - a relative seek may not land before the last message header read (it then moves one byte past it, which
      is what pyulog meant: "advance by a single byte");
    - at most ``budget`` bytes are read in total.
    """

    def __init__(self, data: bytes, budget: int):
        super().__init__(data)
        self._header_at, self._read_total, self._budget = 0, 0, budget

    def read(self, size: int | None = -1) -> bytes:
        if size == 3:  # pyulog reads every message header with read(3)
            self._header_at = self.tell()
        out = super().read(size)
        self._read_total += len(out)
        if self._read_total > self._budget:
            raise _RunawayRead(f"parser read {self._read_total} bytes of a {len(self.getbuffer())}-byte file")
        return out

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1 and self.tell() + offset < self._header_at:
            return super().seek(self._header_at + 1)
        return super().seek(offset, whence)


def _read(path: Path, data: bytes | None = None):
    from pyulog import ULog

    data = path.read_bytes() if data is None else data
    guarded = _GuardedFile(data, budget=64 * len(data) + (64 << 20))
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # pyulog prints its corruption notes; we report our own
            return ULog(
                guarded,
                message_name_filter_list=[
                    "vehicle_local_position",
                    "vehicle_global_position",
                    "vehicle_gps_position",
                    "sensor_gps",
                    "battery_status",
                    "gimbal_device_attitude_status",
                    "mount_orientation",
                    "home_position",
                ],
            )
    except _RunawayRead as exc:
        raise FlightLogError(f"{path}: unreadable ULog (damaged: {exc})") from None
    except Exception as exc:  # pyulog raises plain Exception/struct.error on broken headers
        raise FlightLogError(f"{path}: unreadable ULog ({exc})") from None
