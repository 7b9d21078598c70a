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
# the shipped detector retrained with vehicles at every heading (its training_set.json beside it): runs beside it
ANY_HEADING_WEIGHTS = WEIGHTS_DIR / "airpatrol_yolov8n_any_heading.pt"


class WeightsError(ValueError):
    """Weights that are missing or unusable; never triggers a download."""


def load_yolo(weights: str | os.PathLike | None):
    """Load YOLO weights from a local file (or an OpenVINO export's ``*_openvino_model`` folder); clear error instead
    of any download attempt."""
    from ultralytics import YOLO

    path = Path(weights) if weights else DEFAULT_DETECTOR_WEIGHTS
    if not (path.is_file() or (path.is_dir() and path.name.endswith("_openvino_model"))):
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


def weights_label(path: str | os.PathLike) -> str:
    """A weights file as a run records it: its name and the start of its SHA-256 (``airpatrol_yolov8n.pt
    sha256:0123456789abcdef``), which say which weights these were wherever the file lies; the path itself may be a
    cache folder or a machine the reader never saw."""
    from vision.checksum import sha256_file

    p = Path(path)
    return f"{p.name} sha256:{sha256_file(p)[:16]}"


def detector_weights_label(detector: object) -> str:
    """What a run records as its detector's weights: the file the configuration named (or the shipped default) by
    :func:`weights_label` - not the file loaded, which for the ONNX runtime is an export in the cache folder.

    A stand-in detector (tests, benchmarks) without a weights file keeps its own ``weights`` string.
    """
    config = getattr(detector, "config", None)
    if config is not None and hasattr(config, "weights"):
        source = Path(config.weights) if config.weights else DEFAULT_DETECTOR_WEIGHTS
        if source.is_file():
            return weights_label(source)
    return str(getattr(detector, "weights", ""))
