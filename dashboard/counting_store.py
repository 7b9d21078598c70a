"""Counting lines and zones drawn on the map, kept per site: the run's task, or the run itself when it has none.

They are rows of the ``counting_lines`` table (``db/counting.py``, revision 0004), so every dashboard process and
service worker sees the same lines and ``airpatrol db backup`` takes them. A site is named by its key, ``task:3`` or
``run:17``; a line is ``{"id", "name", "kind": "line"|"zone", "coordinates": [[lon, lat], ...], "created_by",
"created_at"}``. A line has two points (its direction, first to second, names its sides); a zone is a polygon of 3
or more points (not closed: the last point joins the first). Lines drawn before revision 0004 were kept in
``<data_dir>/counting_lines.json``; ``db/json_import.py`` moves them into the table once.
"""

from __future__ import annotations

import math

from sqlalchemy.orm import Session

from db import counting

KINDS = ("line", "zone")
MAX_POINTS = 50
MAX_PER_SITE = 50


class BadCountingLine(ValueError):
    """The posted line or zone cannot be stored (the message says why)."""


def site_key(task_id: int | None, run_id: int) -> str:
    return f"task:{task_id}" if task_id is not None else f"run:{run_id}"


def _parse(key: str) -> tuple[int | None, int | None]:
    """(task_id, run_id) of a site key."""
    kind, _, num = key.partition(":")
    if kind not in ("task", "run") or not num.isdigit():
        raise ValueError(f"not a counting site: {key!r}")
    return (int(num), None) if kind == "task" else (None, int(num))


def site_lines(db: Session, key: str) -> list[dict]:
    return counting.site_lines(db, *_parse(key))


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


def add_line(db: Session, key: str, body: dict, created_by: str) -> dict:
    """Validate and add a line or zone to the site (flushed; the caller commits)."""
    line = validate(body)
    task_id, run_id = _parse(key)
    have = counting.count_site_lines(db, task_id, run_id)
    if have >= MAX_PER_SITE:
        raise BadCountingLine(f"this site has {have} counting lines and zones already (at most {MAX_PER_SITE})")
    row = counting.add_line(db, task_id, run_id, created_by=created_by, **line)
    return counting.as_dict(row)


def delete_line(db: Session, key: str, line_id: str) -> bool:
    """Delete one of the site's lines (flushed; the caller commits); False when the site has no such line."""
    return counting.delete_line(db, *_parse(key), line_id)
