"""GPX tracks (``<trkpt lat lon><ele/><time/></trkpt>``), read incrementally so a truncated file keeps its valid part.

GPX elevation is above mean sea level; height above take-off is taken as elevation minus the first point's
elevation (with a warning). Garmin's TrackPointExtension ``speed``/``course`` are used when present.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree

from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    t = datetime.fromisoformat(text.strip())
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def parse_gpx(data: bytes, path: Path) -> FlightLog:
    log = FlightLog(samples=[], path=path, format="gpx", checksum="")
    points: list[TelemetrySample] = []
    try:
        for _, elem in ElementTree.iterparse(io.BytesIO(data), events=("end",)):
            if _local(elem.tag) == "gpx" and elem.get("creator"):
                log.device.setdefault("software", elem.get("creator"))
            if _local(elem.tag) != "trkpt":
                continue
            children = {_local(c.tag): c for c in elem.iter()}
            when = _time(children["time"].text) if "time" in children else None
            lat, lon = float(elem.get("lat")), float(elem.get("lon"))  # a missing one: TypeError, caught below
            if not (-90 <= lat <= 90 and -180 <= lon <= 180):
                raise ValueError(f"coordinates out of range ({lat}, {lon})")
            s = TelemetrySample(t_s=0.0, time_utc=when, lat=lat, lon=lon)
            if "ele" in children and children["ele"].text:
                s.abs_alt_m = float(children["ele"].text)
            if "speed" in children and children["speed"].text:
                s.ground_speed_ms = float(children["speed"].text)
            if "course" in children and children["course"].text:
                s.heading_deg = float(children["course"].text) % 360.0
            points.append(s)
            elem.clear()
    except ElementTree.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        log.complete, log.stopped_at = False, f"line {line}: malformed GPX/XML ({exc})"
    except (ValueError, TypeError) as exc:
        log.complete, log.stopped_at = False, f"track point {len(points) + 1}: invalid value ({exc})"
    timed = [p for p in points if p.time_utc is not None]
    if not timed:
        what = "no track points" if not points else "track points without <time>"
        raise FlightLogError(f"{path}: GPX has {what}" + (f" ({log.stopped_at})" if log.stopped_at else ""))
    if len(timed) < len(points):
        log.warnings.append(f"{len(points) - len(timed)} track points without <time> dropped")
    t0 = timed[0].time_utc
    assert t0 is not None  # timed has only points with a time
    first_ele = next((p.abs_alt_m for p in timed if p.abs_alt_m is not None), None)
    for p in timed:
        assert p.time_utc is not None
        p.t_s = (p.time_utc - t0).total_seconds()
        if first_ele is not None and p.abs_alt_m is not None:
            p.rel_alt_m = p.abs_alt_m - first_ele
    if first_ele is not None:
        log.warnings.append("height above take-off assumed = elevation minus the first point's elevation")
    log.samples = timed
    return log
