"""The pipeline with the torch ego-motion / motion backend: chosen by ``ego_motion.backend`` and the device, and
tracking a synthetic drone clip as the OpenCV backend does."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tests.edge.service.service_fakes import BrightBoxDetector
from tracking.config import CalibrationConfig, EgoMotionConfig, PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.ego_motion import EgoMotionEstimator
from vision.gpu.backend import resolve_backend
from vision.gpu.ego_motion import TorchEgoMotionEstimator
from vision.types import Frame

W, H, FPS = 480, 270, 25.0


@pytest.fixture(autouse=True)
def one_torch_thread():  # torch's CPU threads spin against each other on a loaded two-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _pipeline(backend: str) -> Pipeline:
    cfg = PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),  # fewer corners than the default: a quicker test, the same for both backends
        ego_motion=EgoMotionConfig(backend=backend, max_features=200),
        calibration=CalibrationConfig(metres_per_pixel=0.2),
    )
    p = Pipeline(cfg, detector=BrightBoxDetector())
    p.reset(W, H, FPS)
    return p


def test_backend_follows_config_and_device():
    # auto: OpenCV everywhere (torch measured slower end to end on an H200, for 1 and for 8 streams, docs/gpu.md)
    assert resolve_backend("auto", "cpu") == "opencv" and resolve_backend("auto", "cpu", streams=16) == "opencv"
    assert resolve_backend("auto", "cuda") == "opencv" and resolve_backend("auto", "cuda:0", streams=8) == "opencv"
    assert resolve_backend("auto", "cuda", streams=16) == "opencv"
    assert resolve_backend("torch", "cpu") == "torch" and resolve_backend("opencv", "cuda") == "opencv"
    assert isinstance(_pipeline("auto").ego, EgoMotionEstimator)
    assert isinstance(_pipeline("torch").ego, TorchEgoMotionEstimator)


def test_torch_backend_tracks_like_opencv_on_a_panning_drone():
    """The drone pans 2 px/frame; a white car (the detector sees it) drives at 45 km/h, a small dark one (only the
    motion layer sees it) at 36 km/h. Both backends report the same vehicles with the same speeds (to 3 km/h)."""
    rng = np.random.default_rng(5)
    ground = np.zeros((H, W + 200), np.float32)
    for s in (3, 9, 27):
        ground += (
            cv2.resize(
                rng.random((H // s + 2, (W + 200) // s + 2)).astype(np.float32),
                (W + 200, H),
                interpolation=cv2.INTER_CUBIC,
            )
            * s
        )
    ground = cv2.cvtColor(((ground - ground.min()) / np.ptp(ground) * 130 + 20).astype(np.uint8), cv2.COLOR_GRAY2BGR)
    runs = {}
    for backend in ("opencv", "torch"):
        p = _pipeline(backend)
        ids: set[int] = set()
        speeds: dict[int, list[float]] = {}
        for i in range(60):
            pan = 2 * i
            frame = ground[:, pan : pan + W].copy()
            x = int(60 + 2.5 * i - pan + 2 * i)  # 2.5 px/frame over the ground (0.2 m/px, 25 fps: 45 km/h)
            cv2.rectangle(frame, (x, 120), (x + 18, 128), (255, 255, 255), -1)
            xs = int(300 - 2.0 * i - pan + 2 * i)  # 2 px/frame the other way: 36 km/h
            cv2.rectangle(frame, (xs, 200), (xs + 10, 205), (0, 0, 0), -1)
            for t in p.step(Frame(i, i / FPS, frame)).tracks:
                ids.add(t.track_id)
                if t.speed_kmh is not None:
                    speeds.setdefault(round(float(t.center[1]) / 40), []).append(t.speed_kmh)
        runs[backend] = (ids, {k: float(np.median(v[-10:])) for k, v in speeds.items()})
        assert p.ego_failures == 0
    (ids_cv, sp_cv), (ids_t, sp_t) = runs["opencv"], runs["torch"]
    assert len(ids_cv) == len(ids_t)
    assert sp_cv.keys() == sp_t.keys() and len(sp_cv) >= 1
    for k in sp_cv:
        assert abs(sp_cv[k] - sp_t[k]) < 3.0, (sp_cv, sp_t)
