"""Training the shipped vehicle detector: COCO INT8 dequantisation, data set building, fine-tuning."""

from pathlib import Path

DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "airpatrol_yolov8n.pt"
# Chosen by measuring one epoch on the 2 shared CPU cores (docs/detector.md): ~70 minutes in all.
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 16
DEFAULT_FREEZE = 10  # YOLOv8n layers 0-9 are the backbone
DEFAULT_WISE_ALPHA = 0.5  # weight of the fine-tuned weights in the shipped average (WiSE-FT's usual middle)
