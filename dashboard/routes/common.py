"""Small helpers shared by the route modules: query-string parsing and redirects."""

from __future__ import annotations

from datetime import datetime

from fastapi import HTTPException, Request
from fastapi.responses import RedirectResponse

from dashboard.context import ctx
from dashboard.mapdata import MapFilter


class BadQuery(ValueError):
    pass


def opt_int(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise BadQuery(f"{name}: expected a whole number, got {value[:40]!r}") from None


def opt_float(value: str | None, name: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise BadQuery(f"{name}: expected a number, got {value[:40]!r}") from None


def opt_time(value: str | None, name: str) -> datetime | None:
    """ISO date/time from a form (``2024-05-01T10:30``); read as UTC when it has no zone."""
    if value in (None, ""):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise BadQuery(f"{name}: expected a date/time like 2024-05-01T10:30, got {value[:40]!r}") from None


def map_filter(request: Request) -> MapFilter:
    q = request.query_params
    try:
        return MapFilter(
            start=opt_time(q.get("start"), "start"),
            end=opt_time(q.get("end"), "end"),
            task_id=opt_int(q.get("task_id"), "task_id"),
            device_id=opt_int(q.get("device_id"), "device_id"),
            run_id=opt_int(q.get("run_id"), "run_id"),
            flight_id=opt_int(q.get("flight_id"), "flight_id"),
        )
    except BadQuery as exc:
        raise HTTPException(400, str(exc)) from None


def redirect(request: Request, path: str) -> RedirectResponse:
    """303 See Other to a dashboard path (the browser follows a POST with a GET)."""
    return RedirectResponse(ctx(request).url(path), status_code=303)


def not_found(what: str) -> HTTPException:
    return HTTPException(404, f"{what} not found")
