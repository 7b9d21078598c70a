"""An evidence clip per study conflict, cut the way violation clips are (:func:`vision.evidence.make_clips`: the run's
annotated video, else its source video, from 2 s before to 2 s after, the first vehicle of the pair ringed), and kept
in the run folder as ``study/conflict_<a>_<b>_<deciseconds>.mp4``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from vision import evidence

CONFLICT_DIR = "study"
_RUN_FILES = ("annotated.mp4", "summary.json", "tracks.csv")


def clip_name(conflict) -> str:
    return f"conflict_{int(conflict.track_a)}_{int(conflict.track_b)}_{int(round(conflict.t * 10))}.mp4"


def clip_path(run_dir: Path | None, name: str) -> Path | None:
    if run_dir is None or "/" in name or not name.startswith("conflict_") or not name.endswith(".mp4"):
        return None
    path = Path(run_dir) / CONFLICT_DIR / name
    return path if path.is_file() else None


def make_conflict_clips(run_dir: Path, conflicts: list, fps: float) -> int:
    """Clips of the conflicts that have none yet; returns how many were made. make_clips writes a violation's clip
    into ``<folder>/evidence``: it is pointed at a scratch folder that links the run's video and tracks, so the
    run's own violation clips of the same vehicles are left alone."""
    todo = [c for c in conflicts if clip_path(run_dir, clip_name(c)) is None]
    if not todo:
        return 0
    out = run_dir / CONFLICT_DIR
    out.mkdir(exist_ok=True)
    made = 0
    with tempfile.TemporaryDirectory(prefix=".conflicts-", dir=run_dir) as tmp:
        scratch = Path(tmp)
        for name in _RUN_FILES:
            if (run_dir / name).is_file():
                os.symlink(run_dir / name, scratch / name)
        for c in todo:
            clips = evidence.make_clips(scratch, [evidence.Wanted(int(c.track_a), float(c.t))], fps)
            if clips:
                shutil.move(str(clips[int(c.track_a)]), out / clip_name(c))
                made += 1
    return made
