"""Training the shipped vehicle detector (a development tool, not on the runtime path): COCO INT8 dequantisation,
data set building, fine-tuning."""

from pathlib import Path

DEFAULT_WEIGHTS = Path(__file__).resolve().parents[2] / "weights" / "airpatrol_yolov8n.pt"
# 5 epochs with the frozen backbone: ~5 min each on 2 CPU cores, ~25 min in all (docs/detector.md).
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 16
DEFAULT_FREEZE = 10  # YOLOv8n layers 0-9 are the backbone
DEFAULT_WISE_ALPHA = (
    1.0  # share of the fine-tuned weights; < 1 averages with the start point (WiSE-FT, docs/detector.md)
)
# Frames of the night dev sequence (UAVDT M1003, frames 1-600 in ../shared) that may train the detector: the first
# 240 are scored (bench/real), and frames 241-330 (3 s) keep the two apart.
NIGHT_DEV_TRAIN_FRAMES = (331, 600)
