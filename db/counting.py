"""Rows of ``counting_lines``: a site's lines and zones as the pages use them (``{"id", "name", "kind",
"coordinates": [[lon, lat], ...], "created_by", "created_at"}``; a zone's ring is not closed there).

A site is ``task_id`` or, for a run without a task, ``run_id`` (exactly one). Validation of what a browser posts is
the dashboard's (``dashboard/counting_store.py``); these functions store what they are given.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import CountingLine


def geometry_geojson(kind: str, coordinates: list[list[float]]) -> str:
    """A line as a GeoJSON LineString, a zone as a Polygon (its ring closed, as GeoJSON wants)."""
    if kind == "line":
        return json.dumps({"type": "LineString", "coordinates": coordinates})
    return json.dumps({"type": "Polygon", "coordinates": [coordinates + [coordinates[0]]]})


def coordinates_of(row: CountingLine) -> list[list[float]]:
    geom = json.loads(row.geometry_geojson)
    return geom["coordinates"] if geom["type"] == "LineString" else geom["coordinates"][0][:-1]


def as_dict(row: CountingLine) -> dict:
    return {
        "id": row.public_id,
        "name": row.name,
        "kind": row.kind,
        "coordinates": coordinates_of(row),
        "created_by": row.created_by,
        "created_at": row.created_at.replace(microsecond=0).isoformat() + "+00:00",
    }


def _site(task_id: int | None, run_id: int | None):
    return CountingLine.task_id == task_id if task_id is not None else CountingLine.run_id == run_id


def site_lines(s: Session, task_id: int | None, run_id: int | None) -> list[dict]:
    rows = s.scalars(select(CountingLine).where(_site(task_id, run_id)).order_by(CountingLine.id))
    return [as_dict(r) for r in rows]


def count_site_lines(s: Session, task_id: int | None, run_id: int | None) -> int:
    return s.scalar(select(func.count()).select_from(CountingLine).where(_site(task_id, run_id))) or 0


def add_line(
    s: Session,
    task_id: int | None,
    run_id: int | None,
    *,
    name: str,
    kind: str,
    coordinates: list[list[float]],
    created_by: str | None,
    created_at: datetime | None = None,
    public_id: str | None = None,
) -> CountingLine:
    row = CountingLine(
        public_id=public_id or uuid.uuid4().hex[:12],
        task_id=task_id,
        run_id=None if task_id is not None else run_id,
        name=name,
        kind=kind,
        geometry_geojson=geometry_geojson(kind, coordinates),
        created_by=created_by,
    )
    if created_at is not None:
        row.created_at = created_at
    s.add(row)
    s.flush()
    return row


def delete_line(s: Session, task_id: int | None, run_id: int | None, public_id: str) -> bool:
    row = s.scalar(select(CountingLine).where(_site(task_id, run_id), CountingLine.public_id == public_id))
    if row is None:
        return False
    s.delete(row)
    s.flush()
    return True
