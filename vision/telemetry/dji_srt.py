"""DJI subtitle telemetry (``DJI_0001.SRT`` next to the video), every firmware dialect we have seen.

Dialects (``FlightLog.variant``):

* ``bracketed`` - Mavic 2/3, Air 2(S), Mini 2+, M30...: ``[iso : 100] [latitude: 41.42] [longitude: 2.23]
  [rel_alt: 1.2 abs_alt: 117.4] [gb_yaw: .. gb_pitch: -90 gb_roll: 0]``; key spacing varies, some firmwares
  write ``longtitude``; ``[altitude: x]`` alone is the absolute (GPS/barometric MSL) altitude.
* ``legacy_home`` - Mavic Pro, Phantom 3/4 (2017): ``HOME(lon,lat) date`` / ``GPS(lon,lat,alt) BAROMETER:h``
  (or ``Hb:h Hs:h``), ``ISO:100 Shutter:60 EV: Fnum:2.2``.
* ``legacy_m`` - Matrice 300-era: ``GPS(lat,lon,altM) BAROMETER:hM`` (metre-suffixed, no HOME).
* ``comma`` - Phantom 4 Pro/RTK, Mavic Mini: ``F/3.2, SS 160, ISO 100, EV 0, GPS (lon, lat, n), D 49.2m,
  H 45.6m, H.S 0.0m/s, V.S 0.0m/s[, F.PRY (p°, r°, y°), G.PRY (p°, r°, y°)]``.

Order of the numbers in ``GPS(a, b, c)`` differs between firmwares. It is decided once per file: when some
first value (of GPS or HOME tuples) lies outside +-90 it can only be a longitude, so the order is (lon, lat);
likewise for the second value. When every value is within +-90 (e.g. 36.6, -6.1) both readings are valid
coordinates and the dialect's documented order is used - (lon, lat) for ``legacy_home``/``comma`` (all our
samples with |lon| > 90 confirm it), (lat, lon) for ``legacy_m`` - and a warning says the order was assumed.
The third GPS value is an altitude in metres in ``legacy_*``; in the ``comma`` dialect it is a small integer that
is not an altitude (18 over Brugg, CH, 350 m MSL, with H 45.6 m) - most likely the satellite count - and is ignored.

DJI's integer encodings: ``focal_len : 240`` is 24.0 mm (x10 when written without a decimal point),
``fnum : 280`` is f/2.8 (x100 likewise); a plain shutter number is the denominator (``Shutter:400`` = 1/400 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample

_INDEX = re.compile(r"^\s*\d+\s*$")
_TIMECODE = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})[,.](\d{1,3})\s*-->\s*(\d{1,2}):(\d{2}):(\d{2})[,.](\d{1,3})")
_DATETIME = re.compile(
    r"(\d{4})[-./](\d{1,2})[-./](\d{1,2})[ T]+(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,3}))?(?:,(\d{3}))?"
)
_TAG = re.compile(r"<[^>]*>")
_TUPLE = re.compile(r"\b([A-Za-z][A-Za-z.]*)(\s*)\(([^()]*)\)")
_KEYVAL = re.compile(r"([A-Za-z][A-Za-z_.]*)\s*:\s*([-+]?F?\d[\d.]*(?:/[\d.]+)?|[A-Za-z_]+\b(?!\s*:))")
_SPACED = re.compile(r"^\s*([A-Za-z][A-Za-z.]*)\s+([-+]?\d+(?:\.\d+)?)\s*[A-Za-z/°%]*\s*$")
_FSTOP = re.compile(r"\bF/(\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")

_ALIASES = {
    "latitude": "lat",
    "lat": "lat",
    "longitude": "lon",
    "longtitude": "lon",
    "lon": "lon",
    "rel_alt": "rel_alt",
    "h": "rel_alt",
    "barometer": "rel_alt",
    "hb": "rel_alt",
    "abs_alt": "abs_alt",
    "altitude": "abs_alt",
    "gb_pitch": "gimbal_pitch",
    "gimbal_pitch": "gimbal_pitch",
    "gb_yaw": "gimbal_yaw",
    "gimbal_yaw": "gimbal_yaw",
    "gb_roll": "gimbal_roll",
    "gimbal_roll": "gimbal_roll",
    "drone_yaw": "heading",
    "h.s": "ground_speed",
    "v.s": "vertical_speed",
    "iso": "iso",
    "shutter": "shutter",
    "tv": "shutter",
    "ss": "shutter",
    "fnum": "fnum",
    "ir": "fnum",
    "focal_len": "focal_len",
    "framecnt": "frame_cnt",
    "srtcnt": "frame_cnt",
    "drone_speedx": "speed_x",
    "drone_speedy": "speed_y",
}


@dataclass
class _Entry:
    line: int  # 1-based line of the subtitle index
    lines: list[str] = field(default_factory=list)


@dataclass
class _Raw:
    """One subtitle, tokenised but not yet interpreted (GPS order is decided over the whole file)."""

    line: int
    t: float | None
    when: datetime | None
    values: dict[str, str]
    tuples: dict[str, list[str]]
    spaced_tuple: bool


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    m = _NUMBER.search(text)
    return float(m.group()) if m else None


def _group(lines: list[str]) -> list[_Entry]:
    """Split into subtitles: an index line after a blank line (or before a timecode) opens one."""
    entries: list[_Entry] = []
    prev_blank = True
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            prev_blank = True
            continue
        next_line = lines[i + 1] if i + 1 < len(lines) else ""
        if _INDEX.match(stripped) and (prev_blank or _TIMECODE.search(next_line)):
            entries.append(_Entry(line=i + 1))
        elif entries:
            entries[-1].lines.append(line)
        else:
            raise FlightLogError(f"line {i + 1}: text before the first subtitle index")
        prev_blank = False
    return entries


def _tokenise(entry: _Entry) -> tuple[_Raw | None, str | None]:
    """Parse one subtitle; returns (raw, None) or (None, why it is damaged)."""
    t = None
    text_lines = []
    for line in entry.lines:
        m = _TIMECODE.search(line)
        if m and t is None:
            h, mi, s, ms = (int(v) for v in m.groups()[:4])
            t = h * 3600 + mi * 60 + s + int(m.group(4).ljust(3, "0")) / 1000.0
        else:
            text_lines.append(line)
    raw_text = " ".join(text_lines)
    if raw_text.count("<font") != raw_text.count("</font>"):
        return None, "unterminated <font> tag"
    payload = _TAG.sub(" ", raw_text)
    if payload.count("[") != payload.count("]") or payload.count("(") != payload.count(")"):
        return None, "unbalanced brackets"

    when = None
    m = _DATETIME.search(payload)
    if m:
        y, mo, d, h, mi, s = (int(v) for v in m.groups()[:6])
        micro = int((m.group(7) or "0").ljust(3, "0")) * 1000 + int(m.group(8) or 0)
        try:
            when = datetime(y, mo, d, h, mi, s, micro)
        except ValueError:
            return None, f"invalid date {m.group()!r}"
        payload = payload[: m.start()] + " " + payload[m.end() :]

    tuples: dict[str, list[str]] = {}
    spaced_tuple = False
    for m in _TUPLE.finditer(payload):
        tuples[m.group(1).lower()] = [v.strip() for v in m.group(3).split(",")]
        if m.group(1).upper() in ("GPS", "RTK"):
            spaced_tuple = bool(m.group(2))
    payload = _TUPLE.sub(" , ", payload)

    values: dict[str, str] = {}
    f = _FSTOP.search(payload)
    if f:
        values["fnum"] = f.group(1)
        payload = payload[: f.start()] + payload[f.end() :]
    for m in _KEYVAL.finditer(payload):
        values.setdefault(m.group(1).lower(), m.group(2))
    for piece in payload.split(","):
        m = _SPACED.match(piece)
        if m:
            values.setdefault(m.group(1).lower(), m.group(2))
    return _Raw(entry.line, t, when, values, tuples, spaced_tuple), None


def _has_position(raw: _Raw) -> bool:
    return any(k in raw.tuples for k in ("gps", "rtk")) or ("latitude" in raw.values)


def _variant(raws: list[_Raw]) -> str:
    first = raws[0]
    keyed_camera = any(k in first.values for k in ("iso", "focal_len", "framecnt", "srtcnt"))
    if "latitude" in first.values or (keyed_camera and not first.tuples):
        return "bracketed"
    if first.spaced_tuple:
        return "comma"
    gps = first.tuples.get("gps") or first.tuples.get("rtk")
    if gps and len(gps) >= 3 and gps[2].upper().endswith("M") and "home" not in first.tuples:
        return "legacy_m"
    return "legacy_home"


def _decide_lon_first(raws: list[_Raw], variant: str) -> tuple[bool, str | None]:
    """True if GPS/HOME tuples are (lon, lat); see the module docstring for the rule."""
    firsts, seconds = [], []
    for raw in raws:
        for key in ("gps", "rtk", "home"):
            vals = raw.tuples.get(key)
            if vals and len(vals) >= 2:
                a, b = _num(vals[0]), _num(vals[1])
                if a is not None and b is not None and (a, b) != (0.0, 0.0):
                    firsts.append(abs(a))
                    seconds.append(abs(b))
    if not firsts:
        return True, None
    a_big, b_big = max(firsts) > 90, max(seconds) > 90
    if a_big and not b_big:
        return True, None
    if b_big and not a_big:
        return False, None
    default = variant != "legacy_m"
    order = "(lon, lat)" if default else "(lat, lon)"
    if a_big and b_big:
        return default, f"GPS tuples have values beyond +-90 in both places; assumed {order}"
    return (
        default,
        f"GPS(a, b) order cannot be told from the values (all within +-90); assumed {order} as the {variant} dialect writes it",
    )


def _shutter(text: str | None) -> float | None:
    if not text:
        return None
    if "/" in text:
        num, _, den = text.partition("/")
        try:
            return float(num) / float(den)
        except (ValueError, ZeroDivisionError):
            return None
    v = _num(text)
    return 1.0 / v if v else None


def _scaled(text: str | None, scale: float) -> float | None:
    """DJI writes some values as integers times ``scale`` (``fnum : 280``); decimals are plain (``fnum: 3.2``)."""
    m = _NUMBER.search(text.lstrip("Ff")) if text else None
    if m is None:
        return None
    digits = m.group()
    v = float(digits)
    return v / scale if ("." not in digits and v >= 100) else v


def _sample(raw: _Raw, t: float, lon_first: bool, variant: str) -> TelemetrySample:
    v = {_ALIASES[k]: val for k, val in raw.values.items() if k in _ALIASES}
    s = TelemetrySample(t_s=t, time_local=raw.when)
    lat, lon = _num(v.get("lat")), _num(v.get("lon"))
    gps = raw.tuples.get("rtk") or raw.tuples.get("gps")
    if gps and len(gps) >= 2 and lat is None:
        a, b = _num(gps[0]), _num(gps[1])
        lon, lat = (a, b) if lon_first else (b, a)
        if len(gps) >= 3 and variant != "comma":
            s.abs_alt_m = _num(gps[2])
    if lat is not None and lon is not None and not (lat == 0.0 and lon == 0.0):  # 0,0 = no GPS fix
        s.lat, s.lon = lat, lon
    s.rel_alt_m = _num(v.get("rel_alt"))
    if v.get("abs_alt") is not None:
        s.abs_alt_m = _num(v["abs_alt"])
    fpry, gpry = raw.tuples.get("f.pry"), raw.tuples.get("g.pry")
    s.heading_deg = _num(fpry[2]) if fpry and len(fpry) == 3 else _num(v.get("heading"))
    if gpry and len(gpry) == 3:
        s.gimbal_pitch_deg, s.gimbal_roll_deg, s.gimbal_yaw_deg = (_num(x) for x in gpry)
    else:
        s.gimbal_pitch_deg, s.gimbal_yaw_deg = _num(v.get("gimbal_pitch")), _num(v.get("gimbal_yaw"))
        s.gimbal_roll_deg = _num(v.get("gimbal_roll"))
    s.ground_speed_ms = _num(v.get("ground_speed"))
    speed_x, speed_y = _num(v.get("speed_x")), _num(v.get("speed_y"))
    if s.ground_speed_ms is None and speed_x is not None and speed_y is not None:  # either may be a word ("NA")
        s.ground_speed_ms = float((speed_x**2 + speed_y**2) ** 0.5)
    s.vertical_speed_ms = _num(v.get("vertical_speed"))
    iso = _num(v.get("iso"))
    s.iso = int(iso) if iso is not None else None
    s.shutter_s = _shutter(v.get("shutter"))
    s.fnum = _scaled(v.get("fnum"), 100.0)
    s.focal_len_mm = _scaled(v.get("focal_len"), 10.0)
    fc = _num(v.get("frame_cnt"))
    s.frame_cnt = int(fc) if fc is not None else None
    return s


def parse_dji_srt(data: bytes, path: Path) -> FlightLog:
    text = data.decode("utf-8-sig", errors="replace")
    try:
        entries = _group(text.splitlines())
    except FlightLogError as exc:  # the message names the file, like every other (found by the fuzz tests)
        raise FlightLogError(f"{path}: {exc}") from None
    if not entries:
        raise FlightLogError(f"{path}: no subtitles in this DJI SRT file")
    log = FlightLog(samples=[], path=path, format="dji_srt", checksum="")
    raws: list[_Raw] = []
    for n, entry in enumerate(entries):
        raw, why = _tokenise(entry)
        if raw is not None and raws:
            ref = raws[0]
            if ref.t is not None and raw.t is None:
                why = "no timecode"
            elif _has_position(ref) and not _has_position(raw):
                why = "no position"
            elif ref.when is not None and raw.when is None:
                why = "no date"
        if raw is None or why:
            kind = "truncated entry" if n == len(entries) - 1 else "damaged entry"
            log.complete, log.stopped_at = False, f"line {entry.line}: {kind} ({why})"
            break
        raws.append(raw)
    if not raws:
        raise FlightLogError(f"{path}: first subtitle is damaged ({log.stopped_at})")

    variant = _variant(raws)
    log.variant = variant
    lon_first, warning = _decide_lon_first(raws, variant)
    if warning:
        log.warnings.append(warning)
    t0_when = raws[0].when
    if raws[0].t is None and t0_when is None:
        raise FlightLogError(f"{path}: subtitles have neither timecodes nor dates, no time base")
    if raws[0].t is None:
        log.warnings.append("no timecodes; sample times taken from the subtitle dates")
    for raw in raws:
        if raw.t is None:  # then every subtitle has a date (a missing one ended `raws` above)
            assert raw.when is not None and t0_when is not None
            t = (raw.when - t0_when).total_seconds()
        else:
            t = raw.t
        log.samples.append(_sample(raw, t, lon_first, variant))
    home = raws[0].tuples.get("home")
    if home and len(home) >= 2:
        a, b = _num(home[0]), _num(home[1])
        lon, lat = (a, b) if lon_first else (b, a)
        if lat is not None and lon is not None:
            log.home = (lat, lon, _num(home[2]) if len(home) >= 3 else None)
    if not log.has_positions:
        log.warnings.append("no GPS position in this SRT (camera settings only)")
    return log
