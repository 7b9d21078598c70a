"""The detector's weights file: where the shipped default lies, and loading a file without any download attempt.

Apart from :mod:`vision.detection` because :mod:`vision.runtime` (which picks torch or ONNX Runtime and loads the
file) needs it too, and the detector needs the runtime.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")  # never let Ultralytics reach the network
os.environ.setdefault("YOLO_VERBOSE", "False")

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
DEFAULT_DETECTOR_WEIGHTS = WEIGHTS_DIR / "airpatrol_yolov8n.pt"


class WeightsError(ValueError):
    """Weights that are missing or unusable; never triggers a download."""


def load_yolo(weights: str | os.PathLike | None):
    """Load YOLO weights from a local file; clear error instead of any download attempt."""
    from ultralytics import YOLO

    path = Path(weights) if weights else DEFAULT_DETECTOR_WEIGHTS
    if not path.is_file():
        hint = (
            ""
            if weights
            else " (the shipped default is missing: reinstall airpatrol or run `airpatrol train-detector`)"
        )
        raise WeightsError(f"{path}: detector weights not found{hint}")
    try:
        return YOLO(str(path), task="detect")
    except Exception as exc:  # Ultralytics raises many types for unreadable files
        raise WeightsError(f"{path}: not usable YOLO weights ({str(exc).splitlines()[0][:160]})") from None
