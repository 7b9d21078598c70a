"""Road layer: U-Net road segmentation, fixed masks and track-learned roads (see docs/road.md)."""

from pathlib import Path

DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "road_unet.pt"
