"""Counting lines and zones drawn on the map, kept per site: the run's task, or the run itself when it has none.

There is no table for them (the schema is frozen for this change), so they live in one JSON file in the data folder,
``<data_dir>/counting_lines.json``::

    {"task:3": [{"id": "c1f0...", "name": "north gate", "kind": "line",
                 "coordinates": [[lon, lat], [lon, lat]], "created_by": "operator", "created_at": "2026-..."}],
     "run:17": [...]}

A line has two points (its direction, first to second, names its sides); a zone is a polygon of 3 or more points
(not closed: the last point joins the first). Writes replace the file atomically under a lock, so a reader never
sees half a file. The wanted table (one row per line: ``id``, ``task_id`` or ``run_id``, ``name``, ``kind``,
``geometry_geojson``, ``created_by_id``, ``created_at``) is described in docs/dashboard.md.
"""

from __future__ import annotations

import json
import math
import os
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

FILE_NAME = "counting_lines.json"
KINDS = ("line", "zone")
MAX_POINTS = 50
MAX_PER_SITE = 50
_lock = threading.Lock()


class BadCountingLine(ValueError):
    """The posted line or zone cannot be stored (the message says why)."""


def site_key(task_id: int | None, run_id: int) -> str:
    return f"task:{task_id}" if task_id is not None else f"run:{run_id}"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise OSError(f"{path}: not a readable counting-lines file ({exc})") from None
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def site_lines(data_dir: Path, key: str) -> list[dict]:
    with _lock:
        return list(_read(Path(data_dir) / FILE_NAME).get(key, []))


def validate(body: dict) -> dict:
    """A clean line or zone from what the browser posted, or BadCountingLine."""
    if not isinstance(body, dict):
        raise BadCountingLine("expected a JSON object")
    kind = body.get("kind", "line")
    if kind not in KINDS:
        raise BadCountingLine(f"kind: expected one of {', '.join(KINDS)}")
    pts = body.get("coordinates")
    if not isinstance(pts, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pts):
        raise BadCountingLine("coordinates: expected a list of [lon, lat] pairs")
    try:
        pts = [[float(lon), float(lat)] for lon, lat in pts]
    except (TypeError, ValueError):
        raise BadCountingLine("coordinates: numbers expected") from None
    if not all(
        math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90 for lon, lat in pts
    ):
        raise BadCountingLine("coordinates: longitude -180..180 and latitude -90..90 expected")
    need = 2 if kind == "line" else 3
    if len(pts) < need or (kind == "line" and len(pts) != 2) or len(pts) > MAX_POINTS:
        raise BadCountingLine(f"a {kind} needs {'exactly 2' if kind == 'line' else f'3 to {MAX_POINTS}'} points")
    if kind == "line" and pts[0] == pts[1]:
        raise BadCountingLine("a line needs two different points")
    name = str(body.get("name") or "").strip()[:80] or f"{kind}"
    return {"name": name, "kind": kind, "coordinates": pts}


def add_line(data_dir: Path, key: str, body: dict, created_by: str) -> dict:
    line = validate(body)
    line.update(
        id=uuid.uuid4().hex[:12],
        created_by=created_by,
        created_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
    )
    path = Path(data_dir) / FILE_NAME
    with _lock:
        data = _read(path)
        lines = data.setdefault(key, [])
        if len(lines) >= MAX_PER_SITE:
            raise BadCountingLine(
                f"this site has {len(lines)} counting lines and zones already (at most {MAX_PER_SITE})"
            )
        lines.append(line)
        _write(path, data)
    return line


def delete_line(data_dir: Path, key: str, line_id: str) -> bool:
    path = Path(data_dir) / FILE_NAME
    with _lock:
        data = _read(path)
        lines = data.get(key, [])
        kept = [x for x in lines if x.get("id") != line_id]
        if len(kept) == len(lines):
            return False
        data[key] = kept
        _write(path, data)
    return True
