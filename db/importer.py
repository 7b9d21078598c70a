"""Import a flight log (any format vision.telemetry reads) as one flight + its telemetry samples.

All of a file goes in one transaction, so a flight never exists half-imported: it appears with its samples and
its status (``complete`` or ``partial: <where the damaged log stopped>``), or not at all. A file whose SHA-256
is already in ``flights.checksum`` adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session
from tqdm import tqdm

from db.crud import create_device, get_device
from db.engine import session_scope
from db.models import Device, Flight, TelemetrySampleRow, as_naive_utc
from db.validation import DbValidationError, FlightMetaIn, Serial, validate, validate_samples
from vision.telemetry import FlightLog, load_flight_log

# the telemetry_samples columns a flight log fills (also the columns of the dashboard's samples CSV export)
SAMPLE_FIELDS = [
    "t_s",
    "time_utc",
    "lat",
    "lon",
    "rel_alt_m",
    "abs_alt_m",
    "heading_deg",
    "gimbal_pitch_deg",
    "gimbal_yaw_deg",
    "gimbal_roll_deg",
    "ground_speed_ms",
    "vertical_speed_ms",
    "battery_pct",
    "focal_len_mm",
    "frame_cnt",
]
BATCH_ROWS = 5000
_SERIAL = TypeAdapter(Serial)


class LogImportError(ValueError):
    pass


@dataclass
class ImportResult:
    path: Path
    flight_id: int
    created: bool  # False: the same file (checksum) was imported before, nothing added
    samples: int
    status: str


def _sample_rows(log: FlightLog) -> list[dict]:
    rows = []
    for s in log.samples:
        row = {name: getattr(s, name) for name in SAMPLE_FIELDS}
        row["time_utc"] = as_naive_utc(s.time_utc)
        rows.append(row)
    return rows


def _resolve_device(session: Session, log: FlightLog, serial: str | None, create: bool) -> Device:
    serial = serial or log.device.get("serial")
    if not serial:
        raise LogImportError(f"{log.path}: the log does not name its aircraft; pass --device SERIAL or --flight ID")
    try:
        serial = _SERIAL.validate_python(serial)
    except ValidationError:
        raise DbValidationError(
            f"{log.path}: device serial {serial[:80]!r} is not valid (1-64 letters, digits, '.', '_', ':' or '-')"
        ) from None
    device = get_device(session, serial)
    if device is None:
        if not create:
            raise LogImportError(f"{log.path}: unknown device {serial!r}; register it first or pass --create-device")
        model = (log.device.get("model") or "")[:128] or None
        device = create_device(session, serial, kind="drone", model=model)
    return device


def import_flight_log_file(url: str | None, path: str | Path, *, attempts: int = 3, **kwargs) -> ImportResult:
    """Import one file in its own transaction, retried when a concurrent import of the same file or device won.

    Two importers racing on the same file (or the same new device) make one of them fail on the unique checksum
    (serial), or on MariaDB with a deadlock; in a fresh transaction the retry then finds the other's rows and
    returns them (``created=False``). ``kwargs`` are those of :func:`import_flight_log`.
    """
    log = kwargs.pop("log", None) or load_flight_log(path)  # parse once, outside any transaction
    for attempt in range(1, attempts + 1):
        try:
            with session_scope(url, write=True) as session:
                return import_flight_log(session, path, log=log, **kwargs)
        except (IntegrityError, OperationalError) as exc:
            if attempt == attempts or not _is_race(exc):
                raise
    raise AssertionError("unreachable")


def _is_race(exc: IntegrityError | OperationalError) -> bool:
    if isinstance(exc, IntegrityError):
        return True
    code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
    return code in (1213, 1205) or "database is locked" in str(exc.orig)  # deadlock, lock wait timeout


def import_flight_log(
    session: Session,
    path: str | Path,
    *,
    device_serial: str | None = None,
    flight_id: int | None = None,
    create_device: bool = False,
    progress: bool = True,
    log: FlightLog | None = None,
) -> ImportResult:
    """Import one file inside the caller's transaction (use ``session.begin()`` around it)."""
    path = Path(path)
    log = log or load_flight_log(path)
    existing = session.scalar(select(Flight).where(Flight.checksum == log.checksum))
    if existing is not None:
        return ImportResult(path, existing.id, False, existing.sample_count, existing.status)

    rows = _sample_rows(log)
    validate_samples(rows, str(path))
    status = "complete" if log.complete else f"partial: {log.stopped_at}"
    start = as_naive_utc(log.start_time)
    home = log.home or (None, None, None)
    meta = validate(
        FlightMetaIn,
        {
            "source_file": str(path.resolve()),
            "source_format": log.format,
            "checksum": log.checksum,
            "status": status[:255],
            "home_lat": home[0],
            "home_lon": home[1],
            "home_alt_m": home[2],
            "start_time": start,
            "end_time": start + timedelta(seconds=log.duration_s) if start else None,
        },
        str(path),
    )

    if flight_id is not None:
        flight = session.get(Flight, flight_id)
        if flight is None:
            raise LogImportError(f"{path}: no flight with id {flight_id}")
        if flight.checksum is not None:
            raise LogImportError(f"{path}: flight {flight_id} already has a log ({flight.source_file})")
        device = None
        if device_serial is not None:
            device = _resolve_device(session, log, device_serial, create_device)
            if flight.device_id not in (None, device.id):
                raise LogImportError(f"{path}: flight {flight_id} belongs to another device than {device.serial!r}")
    else:
        flight, device = None, _resolve_device(session, log, device_serial, create_device)

    timed = next((s for s in log.samples if s.time_utc is not None or s.time_local is not None), None)
    values = meta.model_dump() | {
        "clock": None if timed is None else ("utc" if timed.time_utc is not None else "local"),
        "sample_count": len(rows),
    }
    if flight is None:
        assert device is not None  # resolved whenever no flight was given
        flight = Flight(device_id=device.id, **values)
        session.add(flight)
    else:
        for key, value in values.items():
            setattr(flight, key, value)
        if device is not None:
            flight.device_id = device.id
    session.flush()  # the flight id for the samples

    bar = tqdm(total=len(rows), desc=f"import {path.name}", unit="sample", disable=not progress, leave=False)
    with bar:
        for i in range(0, len(rows), BATCH_ROWS):
            batch = rows[i : i + BATCH_ROWS]
            for row in batch:
                row["flight_id"] = flight.id
            session.execute(insert(TelemetrySampleRow), batch)
            bar.update(len(batch))
    return ImportResult(path, flight.id, True, len(rows), status)
