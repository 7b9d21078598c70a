"""``load_flight_log(path)``: detect the format from the file's content (never its extension) and parse it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from vision.telemetry.types import FlightLog, FlightLogError

_SRT_TIMECODE = re.compile(r"^\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->", re.MULTILINE)
_SRT_DJI_ENTRY = re.compile(r"^\s*1\s*\n\s*\d{4}[-.]\d{1,2}[-.]\d{1,2}\s+\d{1,2}:\d{2}", re.MULTILINE)
_HEAD_BYTES = 64 * 1024


def detect_format(data: bytes) -> str | None:
    """The format name for ``data``, or None. Binary magic first, then text structure."""
    from vision.telemetry.dji_csv import looks_like_flight_csv
    from vision.telemetry.mavlink_logs import DATAFLASH_MAGIC, looks_like_tlog
    from vision.telemetry.px4_ulog import ULOG_MAGIC

    if data.startswith(ULOG_MAGIC):
        return "px4_ulog"
    if data.startswith(DATAFLASH_MAGIC):
        return "ardupilot_bin"
    if looks_like_tlog(data[:16]):
        return "mavlink_tlog"
    head = data[:_HEAD_BYTES]
    if b"\x00" in head:
        return None  # some other binary file
    text = head.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")
    if "<gpx" in text[:4096]:
        return "gpx"
    if _SRT_TIMECODE.search(text) or _SRT_DJI_ENTRY.search(text):
        return "dji_srt"
    if looks_like_flight_csv(text):
        return "dji_csv"
    return None


def load_flight_log(path: str | Path) -> FlightLog:
    """Parse any supported flight log. Raises :class:`FlightLogError` (a ValueError) with a one-line reason."""
    from vision.telemetry.dji_csv import parse_dji_csv
    from vision.telemetry.dji_srt import parse_dji_srt
    from vision.telemetry.gpx import parse_gpx
    from vision.telemetry.mavlink_logs import parse_dataflash, parse_tlog
    from vision.telemetry.px4_ulog import parse_px4_ulog

    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FlightLogError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FlightLogError(f"{path}: is a directory, not a flight log") from None
    if not data.strip():
        raise FlightLogError(f"{path}: file is empty")
    fmt = detect_format(data)
    if fmt is None:
        raise FlightLogError(
            f"{path}: not a recognised flight log (expected DJI SRT/CSV, PX4 ULog, MAVLink tlog, ArduPilot BIN or GPX)"
        )
    parser = {
        "dji_srt": parse_dji_srt,
        "dji_csv": parse_dji_csv,
        "px4_ulog": parse_px4_ulog,
        "mavlink_tlog": parse_tlog,
        "ardupilot_bin": parse_dataflash,
        "gpx": parse_gpx,
    }[fmt]
    log = parser(data, path)
    if not log.samples:
        raise FlightLogError(f"{path}: no valid telemetry samples ({log.stopped_at or fmt})")
    log.checksum = hashlib.sha256(data).hexdigest()
    return log
