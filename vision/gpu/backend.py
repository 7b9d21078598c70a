"""Which implementation of ego-motion and the motion layer a pipeline gets: ``ego_motion.backend`` and the device.

Measured on an NVIDIA H200 (docs/gpu.md): for one stream OpenCV's ego-motion took 11.2 ms a frame and torch's 54.8 ms
(``python3 -m bench.ego_motion_backends --device cuda``, 1080p). Batched over 8 streams the two stages alone were
faster in torch (15.3 ms per stream and frame against OpenCV's 21.4), but in the full loop of 8 streams stepped
together (``bench/gpu_streams.py --streams 8 --modes step``) OpenCV, in the streams' own threads, gave 11.08 fps per
stream and torch 6.53. So 'auto' is OpenCV everywhere: torch is taken only where it is asked for by name.
"""

from __future__ import annotations

from vision.config import EgoMotionConfig, MotionConfig
from vision.ego_motion import EgoMotionEstimator
from vision.motion import MotionDetector


def resolve_backend(backend: str, device: str, streams: int = 1) -> str:
    """'auto' -> 'opencv' on every device and for any number of streams stepped together (``streams``): no case has
    measured torch faster end to end (docs/gpu.md); 'torch' and 'opencv' are taken as given."""
    if backend == "auto":
        return "opencv"
    return backend


def build_motion_stages(ego_config: EgoMotionConfig, motion_config: MotionConfig, device: str, streams: int = 1):
    """(ego-motion estimator, motion detector) of the configured backend; the torch ones on ``device``. Both stages
    always share a backend: the torch motion layer takes the torch ego-motion's device images."""
    if resolve_backend(ego_config.backend, device, streams) == "torch":
        from vision.gpu.ego_motion import TorchEgoMotionEstimator
        from vision.gpu.motion import TorchMotionDetector

        return TorchEgoMotionEstimator(ego_config, device), TorchMotionDetector(motion_config, device)
    return EgoMotionEstimator(ego_config), MotionDetector(motion_config)
