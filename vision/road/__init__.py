"""Road layer: U-Net road segmentation, fixed masks and track-learned roads (see docs/road.md)."""
