"""The batch's view of the shared database: which videos are done (by content checksum), their rows, their flights."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select, update

from db.engine import session_scope
from db.models import ProcessingRun, Video


def completed_run_id(url: str, sha256: str, baseline: bool) -> int | None:
    """The complete run of a video with this content, if any (whatever its file name or path was)."""
    with session_scope(url) as s:
        return s.scalar(
            select(ProcessingRun.id)
            .join(Video, ProcessingRun.video_id == Video.id)
            .where(
                Video.checksum == sha256,
                ProcessingRun.baseline == baseline,
                ProcessingRun.status == "complete",
            )
            .order_by(ProcessingRun.id.desc())
            .limit(1)
        )


def prepare_video(url: str, video: Path, sha256: str, device_serial: str | None) -> tuple[int, int | None, str | None]:
    """(video id, flight id or None, a note): the ``videos`` row of this content, and its flight from the sidecar log.

    The flight log (DJI .SRT beside the video) is imported once (``flights.checksum``); DJI subtitles do not name
    the aircraft, so without ``--device`` the run is stored without a flight and the note says why.
    """
    from vision.telemetry.poses import find_sidecar_srt

    note = None
    flight_id = None
    log = find_sidecar_srt(video)
    if log is not None:
        from db.importer import import_flight_log

        try:
            with session_scope(url) as s:
                flight_id = import_flight_log(
                    s, log, device_serial=device_serial, create_device=device_serial is not None, progress=False
                ).flight_id
        except ValueError as exc:  # no aircraft named, invalid samples: the video is still worth processing
            note = f"flight log not linked: {str(exc).splitlines()[0][:200]}"
    with session_scope(url) as s:
        row = s.scalar(select(Video).where(Video.checksum == sha256).order_by(Video.id.desc()).limit(1))
        if row is None:
            row = Video(file_path=str(video)[:1024], checksum=sha256, flight_id=flight_id)
            s.add(row)
        elif flight_id is not None and row.flight_id is None:
            row.flight_id = flight_id
        s.flush()
        return row.id, flight_id if flight_id is not None else row.flight_id, note


def update_video_metadata(url: str, video_id: int, info: dict) -> None:
    """Size, rate and length of the video as the decoder saw it (``summary["video"]``)."""
    values = {k: info.get(k) for k in ("width", "height", "fps", "frame_count")}
    values["duration_s"] = info.get("duration_s") or (
        info["frame_count"] / info["fps"] if info.get("frame_count") and info.get("fps") else None
    )
    with session_scope(url) as s:
        s.execute(update(Video).where(Video.id == video_id).values(**values))
