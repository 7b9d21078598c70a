"""Where a processed run folder's inputs are (its video, its flight log), found again from any folder.

``summary.json`` records each input twice: the absolute path (``video.path``, ``telemetry``) and the path relative
to the run folder (``video.path_from_run``, ``telemetry_from_run``). Looking an input up tries, in this order:

1. the path relative to the run folder (the run folder and its inputs moved or were mounted elsewhere together);
2. the recorded path (absolute in runs written since; older runs recorded it as given to `airpatrol process`,
   relative to the folder it ran in, so it is found when that is the current folder);
3. for such an older run's relative path only: relative to the run folder's parent and grandparent, where
   `airpatrol process` most often ran (``--out run`` and the default ``airpatrol-runs/<name>``).

The first that exists wins. ``db/run_import.py`` (the orthophoto, the evidence images, the flight log) and the
image work in :mod:`vision.orthophoto` and :mod:`vision.evidence` all look the inputs up here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

OLDER_RUN_PARENTS = 2  # run folder's parent and grandparent (see the module doc, 3.)


def record(path: str | os.PathLike, run_dir: str | os.PathLike) -> tuple[str, str | None]:
    """(absolute path, path relative to ``run_dir``) of an input, for ``summary.json``. The relative path is None
    where there is none (another drive on Windows)."""
    absolute = Path(path).resolve()
    try:
        relative: str | None = os.path.relpath(absolute, Path(run_dir).resolve())
    except ValueError:
        relative = None
    return str(absolute), relative


def find(run_dir: str | os.PathLike, path: str | None, path_from_run: str | None = None) -> Path | None:
    """The input recorded as ``path`` / ``path_from_run`` of the run in ``run_dir``, where it exists now (absolute)."""
    run_dir = Path(run_dir).resolve()
    candidates = []
    if path_from_run:
        candidates.append(run_dir / path_from_run)
    if path:
        given = Path(path)
        candidates.append(given)
        if not given.is_absolute():
            candidates += [parent / given for parent in list(run_dir.parents)[:OLDER_RUN_PARENTS]]
    return next((p.resolve() for p in candidates if p.exists()), None)


def run_video(run_dir: str | os.PathLike, summary: dict[str, Any]) -> Path | None:
    """The run's source video (file or image-sequence folder), where it is now; None when it is not there."""
    video = summary.get("video") or {}
    return find(run_dir, str(video.get("path") or summary.get("source") or "") or None, video.get("path_from_run"))


def recorded_video(summary: dict[str, Any]) -> str:
    """The video's path as the summary has it, for messages."""
    return str((summary.get("video") or {}).get("path") or summary.get("source") or "")


def run_telemetry(run_dir: str | os.PathLike, summary: dict[str, Any]) -> Path | None:
    """The run's flight log, where it is now; None when the run had none or it is not there."""
    if not summary.get("telemetry"):
        return None
    return find(run_dir, str(summary["telemetry"]), summary.get("telemetry_from_run"))
