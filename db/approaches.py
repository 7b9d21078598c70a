"""A junction's study approaches, kept per site (``study_approaches``): the task of a run, or the run itself when it
has no task, like its counting lines. What the study page edits (drag, rename, merge) and the study reads back."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db.models import ProcessingRun, StudyApproach, TaskRound, utcnow

MAX_APPROACHES = 16
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,16}$")


class BadApproach(ValueError):
    """Approaches that cannot be stored (the message says which and why)."""


@dataclass(frozen=True)
class Site:
    """Where a run's approaches are kept: its task (``task_id``), else the run (``run_id``)."""

    task_id: int | None
    run_id: int | None

    @property
    def key(self) -> str:
        return f"task:{self.task_id}" if self.task_id is not None else f"run:{self.run_id}"

    def where(self):
        if self.task_id is not None:
            return StudyApproach.task_id == self.task_id
        return StudyApproach.run_id == self.run_id


def site_of_run(db: Session, run: ProcessingRun) -> Site:
    task_id = (
        db.scalar(select(TaskRound.task_id).where(TaskRound.id == run.task_round_id))
        if run.task_round_id is not None
        else None
    )
    return Site(task_id, None) if task_id is not None else Site(None, run.id)


def site_approaches(db: Session, site: Site) -> list[StudyApproach]:
    return list(db.scalars(select(StudyApproach).where(site.where()).order_by(StudyApproach.key)))


def clean(items: object) -> list[dict]:
    """Approaches as posted (``[{"key", "name", "lon", "lat", "heading_deg", "radius_m"}]``), checked."""
    if not isinstance(items, list) or not items:
        raise BadApproach("approaches: expected a non-empty list")
    if len(items) > MAX_APPROACHES:
        raise BadApproach(f"approaches: at most {MAX_APPROACHES} at one site")
    out, keys = [], set()
    for i, a in enumerate(items):
        if not isinstance(a, dict):
            raise BadApproach(f"approach {i + 1}: expected an object")
        key = str(a.get("key") or "").strip()
        if not KEY_RE.match(key):
            raise BadApproach(f"approach {i + 1}: key {key!r} must be 1-16 letters, digits, '-' or '_'")
        if key in keys:
            raise BadApproach(f"approach {key}: the key is used twice")
        keys.add(key)
        try:
            lon, lat = float(a["lon"]), float(a["lat"])
            heading, radius = float(a.get("heading_deg", 0.0)), float(a.get("radius_m", 15.0))
        except (KeyError, TypeError, ValueError):
            raise BadApproach(f"approach {key}: lon, lat, heading_deg and radius_m must be numbers") from None
        if not all(math.isfinite(v) for v in (lon, lat, heading, radius)) or not (
            -180 <= lon <= 180 and -90 <= lat <= 90
        ):
            raise BadApproach(f"approach {key}: longitude -180..180 and latitude -90..90 expected")
        if not 1.0 <= radius <= 500.0:
            raise BadApproach(f"approach {key}: radius {radius:g} m; 1 to 500 m expected")
        name = str(a.get("name") or "").strip()[:80] or key
        out.append(dict(key=key, name=name, lon=lon, lat=lat, heading_deg=heading % 360.0, radius_m=radius))
    return out


def replace_site_approaches(db: Session, site: Site, items: list[dict], user_id: int | None) -> list[StudyApproach]:
    """The site's approaches become ``items`` (already :func:`clean`); the caller commits."""
    db.execute(delete(StudyApproach).where(site.where()))
    db.flush()
    rows = [
        StudyApproach(task_id=site.task_id, run_id=site.run_id, updated_by_id=user_id, updated_at=utcnow(), **a)
        for a in items
    ]
    db.add_all(rows)
    db.flush()
    return rows


def clear_site_approaches(db: Session, site: Site) -> int:
    result = db.execute(delete(StudyApproach).where(site.where()))
    return result.rowcount or 0  # type: ignore[attr-defined]  # a DELETE's result is a CursorResult, which has it
