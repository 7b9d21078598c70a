"""Which implementation of ego-motion and the motion layer a pipeline gets: ``ego_motion.backend``, the device and
how many streams step together.

Measured on an NVIDIA H200 (docs/gpu.md, ``python3 -m bench.ego_motion_backends --device cuda``, 1080p): for one
stream OpenCV's ego-motion took 11.2 ms a frame and torch's 54.8 ms, the motion layer 10.2 vs 12.3 ms; torch won only
batched, 8 streams in one ``update_streams`` call: 15.3 ms per stream and frame for both stages against OpenCV's 21.4.
So 'auto' takes torch only on CUDA and only for a group of at least ``TORCH_MIN_STREAMS`` streams stepped together.
"""

from __future__ import annotations

from vision.config import EgoMotionConfig, MotionConfig
from vision.ego_motion import EgoMotionEstimator
from vision.motion import MotionDetector

TORCH_MIN_STREAMS = 8  # the smallest batch at which torch measured faster than OpenCV (8 streams, H200)


def resolve_backend(backend: str, device: str, streams: int = 1) -> str:
    """'auto' -> 'torch' on a CUDA device for ``streams`` >= TORCH_MIN_STREAMS stepped together, 'opencv' otherwise
    (one stream on CUDA, and any number on the CPU: OpenCV measured faster there at the same result, docs/gpu.md)."""
    if backend == "auto":
        return "torch" if str(device).startswith("cuda") and streams >= TORCH_MIN_STREAMS else "opencv"
    return backend


def build_motion_stages(ego_config: EgoMotionConfig, motion_config: MotionConfig, device: str, streams: int = 1):
    """(ego-motion estimator, motion detector) of the configured backend; the torch ones on ``device``. Both stages
    always share a backend: the torch motion layer takes the torch ego-motion's device images."""
    if resolve_backend(ego_config.backend, device, streams) == "torch":
        from vision.gpu.ego_motion import TorchEgoMotionEstimator
        from vision.gpu.motion import TorchMotionDetector

        return TorchEgoMotionEstimator(ego_config, device), TorchMotionDetector(motion_config, device)
    return EgoMotionEstimator(ego_config), MotionDetector(motion_config)
