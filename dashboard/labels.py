"""Names people recognise for runs and flights (video file, date, drone) instead of bare database ids."""

from __future__ import annotations

from pathlib import PurePath

from db.models import Flight, ProcessingRun


def _name(path: str | None) -> str:
    if not path:
        return ""
    name = PurePath(path.replace("\\", "/")).name
    if name in ("img1", "img", "images"):  # image-sequence folders: the sequence's folder names it
        name = PurePath(path.replace("\\", "/")).parent.name
    return name


def run_label(run: ProcessingRun) -> str:
    when = run.finished_at or run.started_at or run.created_at
    parts = [f"#{run.id}", _name(run.source) or "video ?"]
    if when is not None:
        parts.append(when.strftime("%Y-%m-%d %H:%M"))
    parts.append("baseline" if run.baseline else "AirPatrol")
    return " · ".join(parts)


def flight_label(flight: Flight) -> str:
    device = flight.device.name or flight.device.serial if flight.device else "unknown drone"
    parts = [device]
    if flight.start_time is not None:
        parts.append(flight.start_time.strftime("%Y-%m-%d %H:%M") + (" local" if flight.clock == "local" else ""))
    else:
        parts.append("time unknown")
    if flight.source_file:
        parts.append(_name(flight.source_file))
    return " · ".join(parts)


def violation_time(occurred_at, t_s: float, flight_clock: str | None, flight_start) -> str:
    """When a violation happened, as the evidence supports it.

    Only a flight log gives a wall clock: with one, the flight's time (UTC, or the drone's local clock for DJI SRT
    logs, whose zone is unknown); without one, the time into the video and "wall-clock unknown" - never the time
    the run was processed or imported. Whole seconds: the frame time is not more exact than that in the log.
    """
    video = f"video {t_s:.1f} s"
    if occurred_at is None or flight_start is None:
        return f"{video} (wall-clock unknown)"
    zone = "UTC" if flight_clock == "utc" else "drone's local clock"
    return f"{occurred_at:%Y-%m-%d %H:%M:%S} {zone} · {video}"
