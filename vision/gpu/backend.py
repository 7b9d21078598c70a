"""Which implementation of ego-motion and the motion layer a pipeline gets: ``ego_motion.backend`` and the device."""

from __future__ import annotations

from vision.config import EgoMotionConfig, MotionConfig
from vision.ego_motion import EgoMotionEstimator
from vision.motion import MotionDetector


def resolve_backend(backend: str, device: str) -> str:
    """'auto' -> 'torch' on a CUDA device, 'opencv' elsewhere (on CPU OpenCV's kernels measured several times
    faster than torch's at the same result, docs/gpu.md)."""
    if backend == "auto":
        return "torch" if str(device).startswith("cuda") else "opencv"
    return backend


def build_motion_stages(ego_config: EgoMotionConfig, motion_config: MotionConfig, device: str):
    """(ego-motion estimator, motion detector) of the configured backend; the torch ones on ``device``."""
    if resolve_backend(ego_config.backend, device) == "torch":
        from vision.gpu.ego_motion import TorchEgoMotionEstimator
        from vision.gpu.motion import TorchMotionDetector

        return TorchEgoMotionEstimator(ego_config, device), TorchMotionDetector(motion_config, device)
    return EgoMotionEstimator(ego_config), MotionDetector(motion_config)
