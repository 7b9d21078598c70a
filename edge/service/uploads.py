"""Resumable uploads of recorded flights (tus-like): create -> PATCH chunks at an offset -> HEAD offset -> complete.

The bytes on disk are the truth for the offset: an interrupted PATCH keeps what arrived, the client asks for the
offset and goes on from there. Files are named by the upload's random id (never by anything the client sent) in
one folder; the client's file name is kept, sanitised, for display. ``complete`` checks the size, the optional
SHA-256, and the content: a video must open in PyAV with a video stream and decode (a renamed text file or a still
image is refused), a flight log must parse.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import unicodedata
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import utcnow
from edge.service.auth import Principal
from edge.service.config import ServiceConfig
from edge.service.metrics import ServiceMetrics
from edge.service.models import UploadRow

UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".avi", ".ts", ".mts", ".m2ts", ".m4v", ".webm", ".flv", ".h264", ".h265")
LOG_EXTENSIONS = (".srt", ".csv", ".txt", ".ulg", ".tlog", ".bin", ".gpx")
KINDS = {"video": VIDEO_EXTENSIONS, "flight_log": LOG_EXTENSIONS}
STILL_IMAGE_FORMATS = ("image2", "png_pipe", "jpeg_pipe", "bmp_pipe", "tiff_pipe", "webp_pipe", "gif_pipe")


class UploadError(ValueError):
    def __init__(self, status: int, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.status, self.retry_after_s = status, retry_after_s


def sanitize_filename(name: str) -> str:
    """A display name with no path in it: last path component, printable ASCII subset, no leading dots."""
    name = unicodedata.normalize("NFKC", name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9._ -]+", "_", name).strip(" .")
    return name[:128] or "upload"


def probe_video(path: Path) -> dict:
    """What the video is, or UploadError(422) when it is not a video at all."""
    import av

    try:
        container = av.open(str(path), options={"protocol_whitelist": "file"})
    except (av.error.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise UploadError(422, f"not a readable video ({str(exc).splitlines()[0][:120]})") from None
    with container:
        if container.format.name in STILL_IMAGE_FORMATS:
            raise UploadError(422, f"a still image ({container.format.name}), not a video")
        if not container.streams.video:
            raise UploadError(422, f"no video stream (container {container.format.name})")
        stream = container.streams.video[0]
        decoded = 0
        try:
            for decoded, _ in enumerate(container.decode(stream), 1):
                if decoded >= 2:
                    break
        except av.error.FFmpegError as exc:
            raise UploadError(422, f"video does not decode ({str(exc).splitlines()[0][:120]})") from None
        if decoded < 2:
            raise UploadError(422, "fewer than 2 decodable frames: not a video")
        cc = stream.codec_context
        fps = float(stream.average_rate or stream.guessed_rate or 0) or None
        duration = (
            float(stream.duration * stream.time_base)
            if stream.duration and stream.time_base
            else (container.duration / 1e6 if container.duration else None)
        )
        return {
            "container": container.format.name,
            "codec": cc.name,
            "width": cc.width,
            "height": cc.height,
            "fps": fps,
            "duration_s": duration,
            "frames": stream.frames or None,
        }


def probe_flight_log(path: Path) -> dict:
    from vision.telemetry import load_flight_log

    try:
        flight = load_flight_log(path)
    except ValueError as exc:
        raise UploadError(422, str(exc).replace(str(path), "flight log")[:300]) from None
    return {
        "format": flight.format,
        "samples": len(flight.samples),
        "duration_s": round(flight.duration_s, 3),
        "complete": flight.complete,
    }


class UploadStore:
    def __init__(self, root: Path, config: ServiceConfig, metrics: ServiceMetrics):
        self.root, self.config, self.metrics = root, config, metrics
        root.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, asyncio.Lock] = {}

    def path(self, row: UploadRow) -> Path:
        ext = Path(row.filename).suffix.lower()
        return self.root / f"{row.id}{ext if ext in KINDS[row.kind] else ''}"

    def offset(self, row: UploadRow) -> int:
        p = self.path(row)
        return p.stat().st_size if p.exists() else 0

    def get(self, s: Session, upload_id: str) -> UploadRow:
        row = s.get(UploadRow, upload_id) if UPLOAD_ID.match(upload_id or "") else None
        if row is None or row.status == "discarded":
            raise UploadError(404, f"upload {upload_id[:40]!r} not found")
        return row

    def create(self, s: Session, who: Principal, kind: str, filename: str, size: int, sha256: str | None) -> UploadRow:
        name = sanitize_filename(filename)
        if Path(name).suffix.lower() not in KINDS[kind]:
            raise UploadError(415, f"{name}: a {kind.replace('_', ' ')} must end in one of {' '.join(KINDS[kind])}")
        limit = self.config.max_upload_bytes if kind == "video" else self.config.max_log_bytes
        if size > limit:
            raise UploadError(413, f"{name}: {size} bytes exceeds the limit of {limit} bytes for a {kind}")
        check_device_limits(s, self.config, who.label, size)
        row = UploadRow(
            id=secrets.token_hex(16),
            kind=kind,
            filename=name,
            size=size,
            sha256=sha256,
            owner=who.label,
            device_id=who.device_id,
            status="receiving",
        )
        s.add(row)
        s.flush()
        self.path(row).touch()
        return row

    async def append(self, row: UploadRow, offset: int, chunks: AsyncIterator[bytes]) -> int:
        """Write a chunk at ``offset`` (must equal the bytes already stored). Returns the new offset."""
        if row.status != "receiving":
            raise UploadError(409, f"upload {row.id} is {row.status}; nothing more can be added")
        lock = self._locks.setdefault(row.id, asyncio.Lock())
        if lock.locked():
            raise UploadError(409, f"upload {row.id}: another chunk is being written")
        async with lock:
            path = self.path(row)
            have = self.offset(row)
            if offset != have:
                raise UploadError(409, f"offset {offset} does not match the {have} bytes received")
            written = 0
            with open(path, "ab") as f:
                try:
                    async for chunk in chunks:
                        if written + len(chunk) > self.config.max_chunk_bytes:
                            raise UploadError(413, f"chunk larger than {self.config.max_chunk_bytes} bytes")
                        if have + written + len(chunk) > row.size:
                            raise UploadError(413, f"more bytes than the declared size {row.size}")
                        f.write(chunk)
                        written += len(chunk)
                finally:  # also on a dropped connection: what arrived stays, the client resumes after it
                    f.flush()
                    os.fsync(f.fileno())
                    self.metrics.upload_bytes.inc(written)
            return have + written

    def complete(self, s: Session, row: UploadRow) -> UploadRow:
        """Verify size, checksum and content. A refused upload is deleted (its row stays, status ``rejected``).

        Reads no database rows: call it with no transaction open (hashing a large file takes a while)."""
        if row.status == "complete":
            return row
        if row.status == "rejected":
            raise UploadError(422, f"upload {row.id} was rejected: {row.error}")
        have = self.offset(row)
        if have != row.size:
            raise UploadError(409, f"upload {row.id} is incomplete: {have} of {row.size} bytes received")
        path = self.path(row)
        try:
            if row.sha256:
                digest = _sha256(path)
                if digest != row.sha256:
                    raise UploadError(422, f"SHA-256 mismatch: declared {row.sha256}, received {digest}")
            row.info = probe_video(path) if row.kind == "video" else probe_flight_log(path)
        except UploadError as exc:
            row.status, row.error, row.completed_at = "rejected", f"{row.filename}: {exc}", utcnow()
            path.unlink(missing_ok=True)
            s.commit()
            raise UploadError(exc.status, f"{row.filename}: {exc}") from None
        row.status, row.completed_at = "complete", utcnow()
        self._locks.pop(row.id, None)
        return row

    def discard(self, s: Session, row: UploadRow) -> None:
        """Delete the file; the row stays as ``discarded`` (hidden: 404) so it still counts against the device's
        upload rate - creating and deleting uploads in a loop does not get round the limits."""
        self.path(row).unlink(missing_ok=True)
        self._locks.pop(row.id, None)
        row.status, row.completed_at = "discarded", utcnow()

    def complete_path(self, s: Session, upload_id: str, kind: str) -> Path:
        row = self.get(s, upload_id)
        if row.kind != kind:
            raise UploadError(422, f"upload {upload_id} is a {row.kind}, expected a {kind}")
        if row.status != "complete":
            raise UploadError(409, f"upload {upload_id} is {row.status}, not complete")
        path = self.path(row)
        if not path.is_file():
            raise UploadError(410, f"upload {upload_id}: its file is gone from the server")
        return path


def check_device_limits(s: Session, cfg: ServiceConfig, owner: str, size: int) -> None:
    """Refuse a new upload (429 with the seconds until it would be accepted) when ``owner`` - a device, or a user -
    has started ``uploads_per_window`` uploads or announced ``upload_bytes_per_window`` bytes in the last
    ``upload_window_s``, or holds ``open_uploads_per_device`` unfinished ones. Counted from the uploads table, so
    every worker process and every restart sees the same; two creates racing on two workers may pass one over."""
    window = timedelta(seconds=cfg.upload_window_s)
    now = utcnow()
    recent = s.execute(
        select(UploadRow.created_at, UploadRow.size)
        .where(UploadRow.owner == owner, UploadRow.created_at >= now - window)
        .order_by(UploadRow.created_at)
    ).all()
    w = cfg.upload_window_s
    hours = f"{w / 3600:g} h" if w >= 3600 else f"{w / 60:g} min" if w >= 60 else f"{w:g} s"

    def after(created_at) -> float:  # seconds until this upload leaves the window
        return max(1.0, (created_at + window - now).total_seconds())

    if len(recent) >= cfg.uploads_per_window:
        wait = after(recent[len(recent) - cfg.uploads_per_window][0])
        raise UploadError(
            429,
            f"{owner}: {len(recent)} uploads started in the last {hours} (limit "
            f"{cfg.uploads_per_window}); try again in {wait:.0f} s",
            wait,
        )
    if size > cfg.upload_bytes_per_window:
        raise UploadError(
            413, f"{size} bytes exceeds the {cfg.upload_bytes_per_window} bytes a device may upload per {hours}"
        )
    total = sum(r.size for r in recent)
    if total + size > cfg.upload_bytes_per_window:
        freed, wait = 0, cfg.upload_window_s
        for created_at, n in recent:  # the oldest leave the window first
            freed += n
            if total - freed + size <= cfg.upload_bytes_per_window:
                wait = after(created_at)
                break
        raise UploadError(
            429,
            f"{owner}: {total} bytes announced in the last {hours}; {size} more would pass the "
            f"limit of {cfg.upload_bytes_per_window}; try again in {wait:.0f} s",
            wait,
        )
    open_now = (
        s.scalar(
            select(func.count()).select_from(UploadRow).where(UploadRow.owner == owner, UploadRow.status == "receiving")
        )
        or 0
    )
    if open_now >= cfg.open_uploads_per_device:
        raise UploadError(
            429,
            f"{owner}: {open_now} unfinished uploads (limit {cfg.open_uploads_per_device}); "
            f"complete or DELETE one first",
            60.0,
        )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * 1024 * 1024):
            h.update(block)
    return h.hexdigest()
