"""Per-frame perception: frame sources, camera geometry, ego-motion, road layer, detection."""
