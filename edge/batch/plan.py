"""What a batch is: the video files found under the given paths, their checksums, run folders and outcomes."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vision.checksum import sha256_file  # noqa: F401  (re-exported: the batch's video checksum)

VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".avi", ".m4v", ".mts", ".m2ts", ".ts", ".mpg", ".mpeg", ".webm", ".lrv")
STATUSES = ("done", "skipped", "failed")


class BatchInputError(ValueError):
    """A path given to ``airpatrol batch`` that cannot be used."""


@dataclass(frozen=True)
class BatchItem:
    """One flight's video; its flight log is the DJI .SRT beside it when there is one (found by process_video)."""

    video: Path

    @property
    def name(self) -> str:
        return self.video.name


@dataclass
class ItemResult:
    video: str
    status: str  # one of STATUSES
    attempts: int = 0
    sha256: str | None = None
    out_dir: str | None = None
    run_id: int | None = None  # processing_runs.id when a database is configured
    frames: int | None = None
    tracks: int | None = None
    fps: float | None = None
    error: str | None = None
    retryable: bool = False  # a failure worth another attempt (not a property of the file itself)
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def discover(paths: Sequence[str | os.PathLike]) -> list[BatchItem]:
    """Video files named directly, or found (recursively) under folders; each once, in a stable order."""
    if not paths:
        raise BatchInputError("no input: give video files or folders")
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise BatchInputError(f"{p}: no such file or folder")
        if p.is_dir():
            videos = sorted(
                q
                for q in p.rglob("*")
                if q.suffix.lower() in VIDEO_EXTENSIONS
                and q.is_file()
                and not any(part.startswith(".") for part in q.relative_to(p).parts)
            )
            if not videos:
                raise BatchInputError(
                    f"{p}: no video files ({', '.join(VIDEO_EXTENSIONS[:5])}, ...) found in this folder"
                )
            found += videos
        else:
            found.append(p)  # named explicitly: any extension is tried (a broken one fails on its own)
    seen: set[Path] = set()
    items = []
    for v in found:
        key = v.resolve()
        if key not in seen:
            seen.add(key)
            items.append(BatchItem(key))
    return items


def run_folder(out_root: Path, video: Path, sha256: str, baseline: bool) -> Path:
    """``<out>/<video stem>-<first 12 hex of sha256>[-baseline]``: content-addressed, still readable."""
    return Path(out_root) / f"{video.stem}-{sha256[:12]}{'-baseline' if baseline else ''}"


def format_table(results: list[ItemResult]) -> str:
    """The final report: one line per file, then the counts."""
    rows = [("status", "video", "tries", "frames", "tracks", "fps", "result")]
    for r in results:
        detail = r.error if r.status == "failed" else (r.note or r.out_dir or "")
        if r.run_id is not None and r.status == "done":
            detail = f"run {r.run_id}: {detail}"
        rows.append((r.status, r.video, str(r.attempts), _num(r.frames), _num(r.tracks), _num(r.fps), detail or ""))
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:6], widths)) + "  " + row[6] for row in rows]
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    lines.append(f"{len(results)} files: {counts['done']} done, {counts['skipped']} skipped, {counts['failed']} failed")
    return "\n".join(lines)


def _num(v) -> str:
    return "" if v is None else str(v)


class ChecksumCache:
    """sha256 of videos already hashed, keyed by (path, size, mtime): a re-run decides 'already done' without
    reading every video again or starting a worker. Stored in the output folder; a changed file is hashed anew."""

    NAME = ".airpatrol-checksums.json"

    def __init__(self, out_root: Path):
        self.path = Path(out_root) / self.NAME
        try:
            self.data: dict[str, list] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}

    @staticmethod
    def _stamp(video: Path) -> list:
        st = video.stat()
        return [st.st_size, st.st_mtime_ns]

    def get(self, video: Path) -> str | None:
        entry = self.data.get(str(video))
        try:
            return entry[2] if entry and entry[:2] == self._stamp(video) else None
        except OSError:
            return None

    def put(self, video: Path, sha256: str) -> None:
        try:
            self.data[str(video)] = [*self._stamp(video), sha256]
        except OSError:
            pass

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)
