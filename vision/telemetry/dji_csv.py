"""DJI flight-record CSV exports (Airdata ``name(unit)`` columns; FlightReader/PhantomHelp ``OSD.name [unit]``).

Units are read from each header (``height_above_takeoff(feet)``, ``speed(mph)``, ``OSD.height [ft]``) and converted
to SI; headers may carry leading spaces. Airdata rows are 100 ms apart; a trimmed export without any time column
(only the original row index in the first, unnamed column) gets ``t = (index - first index) * 0.1 s`` and a warning.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample

AIRDATA_ROW_PERIOD_S = 0.1

_UNIT = {
    "": 1.0,
    "m": 1.0,
    "meters": 1.0,
    "metres": 1.0,
    "m/s": 1.0,
    "degrees": 1.0,
    "deg": 1.0,
    "percent": 1.0,
    "%": 1.0,
    "feet": 0.3048,
    "ft": 0.3048,
    "mph": 0.44704,
    "km/h": 1 / 3.6,
    "kmh": 1 / 3.6,
    "kph": 1 / 3.6,
    "knots": 0.514444,
    "kn": 0.514444,
    "ft/s": 0.3048,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "ms": 0.001,
    "s": 1.0,
    "seconds": 1.0,
    "second": 1.0,
}
# normalised column name -> sample field (sign -1: the column's positive direction is down)
_FIELDS = {
    "time": ("t_s", 1),
    "osd.flytime": ("t_s", 1),
    "latitude": ("lat", 1),
    "osd.latitude": ("lat", 1),
    "longitude": ("lon", 1),
    "osd.longitude": ("lon", 1),
    "height_above_takeoff": ("rel_alt_m", 1),
    "osd.height": ("rel_alt_m", 1),
    "altitude_above_sealevel": ("abs_alt_m", 1),
    "altitude": ("abs_alt_m", 1),
    "osd.altitude": ("abs_alt_m", 1),
    "compass_heading": ("heading_deg", 1),
    "osd.yaw": ("heading_deg", 1),
    "gimbal_heading": ("gimbal_yaw_deg", 1),
    "gimbal.yaw": ("gimbal_yaw_deg", 1),
    "gimbal_pitch": ("gimbal_pitch_deg", 1),
    "gimbal.pitch": ("gimbal_pitch_deg", 1),
    "gimbal_roll": ("gimbal_roll_deg", 1),
    "gimbal.roll": ("gimbal_roll_deg", 1),
    "speed": ("ground_speed_ms", 1),
    "osd.hspeed": ("ground_speed_ms", 1),
    "zspeed": ("vertical_speed_ms", -1),
    "osd.vspeed": ("vertical_speed_ms", 1),
    "battery_percent": ("battery_pct", 1),
    "battery.chargelevel": ("battery_pct", 1),
}
_HEADER = re.compile(r"^\s*([^(\[]*?)\s*(?:[(\[]\s*([^)\]]*?)\s*[)\]])?\s*$")


def _column(header: str) -> tuple[str, str]:
    m = _HEADER.match(header)
    if m is None:  # an unbalanced bracket ("speed(mph"): the whole text is the name (found by the fuzz tests)
        return header.strip().lower(), ""
    return m.group(1).strip().lower(), (m.group(2) or "").strip().lower()


def _rows(reader: Iterator[list[str]]) -> Iterator[list[str] | csv.Error]:
    """The reader's rows, then the csv.Error that stopped it, if one did (csv raises it from inside the iteration)."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield exc
            return
        yield row


def looks_like_flight_csv(head: str) -> bool:
    first = head.lstrip("\ufeff").splitlines()[0] if head.strip() else ""
    names = {_column(h)[0] for h in first.split(",")}
    return "," in first and bool(names & {"latitude", "osd.latitude"}) and bool(names & {"longitude", "osd.longitude"})


def parse_dji_csv(data: bytes, path: Path) -> FlightLog:
    text = data.decode("utf-8-sig", errors="replace")
    rows = _rows(csv.reader(io.StringIO(text, newline="")))  # newline="": a \r inside a quoted field stays in it
    header = next(rows, None)
    if header is None:
        raise FlightLogError(f"{path}: empty CSV")
    if isinstance(header, csv.Error):
        raise FlightLogError(f"{path}: unreadable CSV header ({header})")
    columns: list[tuple[int, str, float]] = []  # (index, field, factor)
    for i, h in enumerate(header):
        name, unit = _column(h)
        if name in _FIELDS and unit in _UNIT:
            field, sign = _FIELDS[name]
            if field in {c[1] for c in columns}:
                continue  # first of duplicate columns wins (Airdata has altitude and altitude_above_seaLevel)
            columns.append((i, field, sign * _UNIT[unit]))
    names = [_column(h)[0] for h in header]
    utc_col = next((i for i, n in enumerate(names) if n in ("datetime", "custom.updatetime")), None)
    index_col = 0 if names and names[0] == "" else None
    if not any(c[1] == "lat" for c in columns) or not any(c[1] == "lon" for c in columns):
        raise FlightLogError(f"{path}: CSV has no latitude/longitude columns")

    log = FlightLog(samples=[], path=path, format="dji_csv", checksum="", variant="airdata")
    has_time = any(c[1] == "t_s" for c in columns)
    first_index = t0_utc = None
    for line_no, row in enumerate(rows, start=2):
        if isinstance(
            row, csv.Error
        ):  # damaged CSV syntax (e.g. a stray quote or carriage return): keep what came before
            log.complete, log.stopped_at = False, f"line {line_no}: unreadable CSV ({row})"
            break
        if not row or all(not c.strip() for c in row):
            continue
        try:
            if len(row) != len(header):
                raise ValueError(f"{len(row)} fields, header has {len(header)}")
            s = TelemetrySample(t_s=0.0)
            for i, field, factor in columns:
                cell = row[i].strip()
                if cell:
                    setattr(s, field, float(cell) * factor)
            if s.lat is None or s.lon is None or not (-90 <= s.lat <= 90 and -180 <= s.lon <= 180):
                raise ValueError("no valid latitude/longitude")
            if s.lat == 0.0 and s.lon == 0.0:
                s.lat = s.lon = None  # DJI writes 0,0 before the GPS fix
            if utc_col is not None and row[utc_col].strip():
                s.time_utc = datetime.fromisoformat(row[utc_col].strip()).replace(tzinfo=timezone.utc)
            if not has_time:
                if s.time_utc is not None and index_col is None:
                    t0_utc = t0_utc or s.time_utc
                    s.t_s = (s.time_utc - t0_utc).total_seconds()
                elif index_col is not None:
                    idx = int(row[index_col])
                    first_index = idx if first_index is None else first_index
                    s.t_s = (idx - first_index) * AIRDATA_ROW_PERIOD_S
                else:
                    s.t_s = len(log.samples) * AIRDATA_ROW_PERIOD_S
        except ValueError as exc:
            log.complete, log.stopped_at = False, f"line {line_no}: bad row ({exc})"
            break
        log.samples.append(s)
    if not log.samples:
        raise FlightLogError(f"{path}: no valid rows ({log.stopped_at or 'header only'})")
    if has_time:
        t0 = log.samples[0].t_s
        for s in log.samples:
            s.t_s -= t0
    else:
        log.warnings.append(
            "no time column: rows assumed 100 ms apart (Airdata export rate)"
            + (", times from the original row index" if index_col is not None else "")
        )
    return log
