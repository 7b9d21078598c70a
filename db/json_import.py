"""Moving the JSON files that held user-made objects outside the database into it, once (revision 0004).

Before 0004, counting lines and zones lived in ``<data_dir>/counting_lines.json`` and the streams' own calibrations
in ``<data_dir>/stream_calibrations.json``. A migration has no data folder, so ``airpatrol db upgrade`` and the
start of the service and of the dashboard call :func:`import_data_folder`: each file found is imported in one
transaction, then renamed ``<name>.imported`` so it is never read again, and one line says what happened (returned,
and logged). Entries already in the database (same line id; a stream that has a calibration) are left as they
are, so an interrupted import can run again; entries whose task, run or stream is not in this database are skipped
and counted (the renamed file keeps them).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import inspect, select

from db import counting
from db.engine import make_db_engine, session_scope
from db.models import CountingLine, ProcessingRun, Task
from db.service_models import StreamRow

log = logging.getLogger("airpatrol.db")

COUNTING_FILE = "counting_lines.json"
CALIBRATION_FILE = "stream_calibrations.json"
IMPORTED_SUFFIX = ".imported"


def import_data_folder(url: str | None, data_dir: Path | str | None, log_messages: bool = True) -> list[str]:
    """Import whichever of the two files is in ``data_dir``; one message per file (empty: nothing to do), also
    logged as a warning unless ``log_messages`` is False (a command that prints them itself)."""
    if data_dir is None:
        return []
    data_dir = Path(data_dir)
    files = [p for p in (data_dir / COUNTING_FILE, data_dir / CALIBRATION_FILE) if p.is_file()]
    if not files:
        return []
    engine = make_db_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    if "counting_lines" not in tables:  # the schema is older than 0004: the next upgrade imports them
        return []
    messages = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
        except (OSError, ValueError) as exc:
            messages.append(f"{path}: not imported, not a readable JSON file ({exc}); fix or remove it")
            if log_messages:
                log.warning(messages[-1])
            continue
        with session_scope(url, write=True) as s:
            what = _counting_lines(s, data) if path.name == COUNTING_FILE else _calibrations(s, data)
        done = _rename(path)
        messages.append(f"{path}: {what}; the file is now {done.name}")
        if log_messages:
            log.warning(messages[-1])  # an operator should see it once, at the default log level
    return messages


def _rename(path: Path) -> Path:
    target, n = path.with_name(path.name + IMPORTED_SUFFIX), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{IMPORTED_SUFFIX}.{n}")
    try:
        path.rename(target)
    except FileNotFoundError:  # another process importing at the same moment renamed it first
        pass
    return target


def _when(value) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def _counting_lines(s, data: dict) -> str:
    imported = present = 0
    skipped: dict[str, int] = {}
    known = set(s.scalars(select(CountingLine.public_id)))
    for key, lines in data.items():
        kind, _, num = str(key).partition(":")
        model = {"task": Task, "run": ProcessingRun}.get(kind)
        if model is None or not num.isdigit() or not isinstance(lines, list):
            skipped[f"site {key!r} not understood"] = skipped.get(f"site {key!r} not understood", 0) + 1
            continue
        if s.get(model, int(num)) is None:
            skipped[f"{kind} {num} not in the database"] = len(lines)
            continue
        task_id, run_id = (int(num), None) if kind == "task" else (None, int(num))
        for line in lines:
            try:
                line_id = str(line["id"])[:32]
                if line_id in known:
                    present += 1
                    continue
                coords = [[float(lon), float(lat)] for lon, lat in line["coordinates"]]
                if line["kind"] not in ("line", "zone"):
                    raise ValueError(line["kind"])
                counting.add_line(
                    s,
                    task_id,
                    run_id,
                    name=str(line.get("name") or line["kind"])[:80],
                    kind=line["kind"],
                    coordinates=coords,
                    created_by=str(line["created_by"])[:96] if line.get("created_by") else None,
                    created_at=_when(line.get("created_at")),
                    public_id=line_id,
                )
                known.add(line_id)
                imported += 1
            except (KeyError, TypeError, ValueError):
                skipped["not a line or zone"] = skipped.get("not a line or zone", 0) + 1
    what = f"imported {imported} counting lines and zones into the database"
    if present:
        what += f", {present} were there already"
    if skipped:
        what += ", skipped " + ", ".join(f"{n} ({why})" for why, n in skipped.items())
    return what


def _calibrations(s, data: dict) -> str:
    imported = present = 0
    missing: list[str] = []
    for key, value in data.items():
        row = s.get(StreamRow, int(key)) if str(key).isdigit() else None
        if row is None or not isinstance(value, dict):
            missing.append(str(key))
        elif row.calibration_json:
            present += 1  # calibrated again since: the newer one stays
        else:
            row.calibration_json = value
            imported += 1
    what = f"imported the calibrations of {imported} streams into the database"
    if present:
        what += f", {present} had one there already"
    if missing:
        what += f", skipped {len(missing)} (stream {', '.join(missing[:10])} not in the database)"
    return what
