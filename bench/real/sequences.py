"""The real sequences with ground truth in ``../shared/data/mot``, and which of their frames may be scored.

The night sequence M1003 is split in time: its last frames train the detector (``NIGHT_TRAIN_FRAMES``), its first
frames are scored, with a gap of a few seconds between them so that no scored frame is a near-copy of a training
frame. Nothing of M1303 is ever trained on. The nadir sequence M0703 (frames 1-340 in ``../shared``) is scored whole:
the shipped detector never saw it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracking.evaluation.io import Boxes, load_ground_truth
from vision.training.detector import NIGHT_DEV_TRAIN_FRAMES as NIGHT_TRAIN_FRAMES  # noqa: F401  (re-exported) 331..600
from vision.training.detector.training import shared_root

# M1003 frames 1..240 are scored (8 s); 241..330 (3 s) are a gap; 331..600 may train the detector.
NIGHT_SCORED_FRAMES = (1, 240)


@dataclass(frozen=True)
class Sequence:
    name: str
    source: Path  # video file or image folder, as `airpatrol process` takes it
    gt: Path  # UAVDT *_gt_whole.txt (its *_gt_ignore.txt beside it)
    frames: tuple[int, int]  # first and last scored frame, 1-based, inclusive; the run covers 1..last
    condition: str  # "day" / "night"
    view: str
    size: tuple[int, int] = (1024, 540)  # frame width, height (every UAVDT sequence)

    @property
    def run_frames(self) -> int:
        return self.frames[1]

    def ground_truth(self) -> tuple[Boxes, Boxes]:
        gt = load_ground_truth(self.gt)
        return window(gt.boxes, self.frames), window(gt.ignore, self.frames)


def window(boxes: Boxes, frames: tuple[int, int]) -> Boxes:
    return boxes.subset((boxes.frame >= frames[0]) & (boxes.frame <= frames[1]))


# name, folder in data/mot, the source in it ("": the folder, an image sequence), ground truth in its gt/, scored
# frames, condition, view
SEQUENCES = (
    (
        "M1303",
        "uavdt_M1303",
        "",
        "M1303_gt_whole.txt",
        (1, 445),
        "day",
        "oblique urban road and junction, moving drone",
    ),
    (
        "M1003-night",
        "uavdt_M1003_night_dev",
        "video.mp4",
        "M1003_gt_whole.txt",
        NIGHT_SCORED_FRAMES,
        "night",
        "oblique arterial road at night, moving drone",
    ),
    (
        "M0703-nadir",
        "uavdt_M0703_nadir_dev",
        "video.mp4",
        "M0703_gt_whole.txt",
        (1, 340),
        "day",
        "nadir urban junctions at low altitude (cars 40-100 px), moving drone",
    ),
)


def real_sequences(root: Path | None = None) -> list[Sequence]:
    """Every real sequence with ground truth that is present (none when ``../shared`` is absent)."""
    mot = (root or shared_root()) / "data" / "mot"
    return [
        Sequence(name, mot / folder / source, mot / folder / "gt" / gt, frames, condition, view)
        for name, folder, source, gt, frames, condition, view in SEQUENCES
        if (mot / folder / "gt" / gt).is_file()
    ]
