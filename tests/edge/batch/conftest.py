"""Fixtures of the batch tests: detector weights that exist here or in CI, tiny generated flights, a lean config.

Weights: the shipped detector when it exists (CI); else, for development, the COCO INT8 ONNX from ../shared
dequantised to a float .pt once into the cache folder; else the tests skip with the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import SHARED

# Every MariaDB test in the session shares one throw-away server (tests/db/conftest.py starts it).
from tests.db.conftest import mariadb_server  # noqa: F401  (a fixture)
from tracking.config import PipelineConfig

RAY_MISSING = (
    "ray is not installed (pip install 'airpatrol[cluster]'); Ray tests skipped locally - "
    "CI installs the cluster extra and sets AIRPATROL_REQUIRE_RAY=1"
)

CLIP_FPS = 10  # 2 s clips: 20 frames each keeps a pipeline run to a few seconds on a busy 2-core machine


def resolve_weights() -> Path | None:
    from edge.batch.runtime import cache_dir
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    if DEFAULT_DETECTOR_WEIGHTS.is_file():
        return DEFAULT_DETECTOR_WEIGHTS
    onnx = SHARED / "models" / "yolov8n_coco_int8" / "yolov8n_int8.onnx"
    if not onnx.is_file():
        return None
    out = cache_dir() / "dev" / "coco_yolov8n_dequantised.pt"
    if not out.is_file():
        from vision.training.detector.dequantize import dequantize_onnx

        dequantize_onnx(onnx, out)
    return out


@pytest.fixture(scope="session")
def detector_weights() -> Path:
    w = resolve_weights()
    if w is None:
        pytest.skip("no detector weights: vision/weights/airpatrol_yolov8n.pt is missing and ../shared is absent")
    return w


@pytest.fixture(scope="session")
def lean_config(detector_weights) -> PipelineConfig:
    """CPU, PyTorch runtime (no export in the batch tests), no road U-Net (not what these tests are about)."""
    return PipelineConfig.model_validate(
        {
            "device": "cpu",
            "road": {"enabled": False},
            "detector": {"weights": str(detector_weights), "runtime": "torch", "tiling": "off"},
        }
    )


def make_clip(folder: Path, name: str, seed: int, duration_s: float = 2.0) -> Path:
    """A 640x360 highway flight ``<folder>/<name>.mp4`` (2 s) with its DJI ``<name>.SRT`` beside it."""
    from vision.synth import SceneConfig, generate_scene

    work = folder / f".gen-{name}"
    generate_scene(
        SceneConfig(
            scene="highway",
            seed=seed,
            duration_s=duration_s,
            fps=CLIP_FPS,
            width=640,
            height=360,
            altitude_m=45,
            use_shared_data="off",
            parked_vehicles=2,
            clutter_objects=2,
            road_mask_every=0,
        ),
        work,
        progress=False,
    )
    folder.mkdir(parents=True, exist_ok=True)
    video = folder / f"{name}.mp4"
    shutil.move(work / "video.mp4", video)
    shutil.move(work / "video.SRT", folder / f"{name}.SRT")
    shutil.rmtree(work)
    return video


@pytest.fixture(scope="session")
def clip_library(tmp_path_factory) -> Path:
    """Three flights in nested folders: a/north.mp4, a/deep/south.mp4, east.mp4 (each with its .SRT)."""
    root = tmp_path_factory.mktemp("flights")
    make_clip(root / "a", "north", 21)
    make_clip(root / "a" / "deep", "south", 22)
    make_clip(root, "east", 23)
    return root


@pytest.fixture(scope="session")
def detector_video(detector_weights, tmp_path_factory) -> Path:
    """A clip in which the detector finds vehicles, to compare detector outputs: the real toll-plaza footage from
    ../shared when present (any COCO-like model sees its cars), else a generated flight (CI: the shipped detector)."""
    real = SHARED / "data" / "real_video" / "toll_plaza" / "247589_tiny.mp4"
    if real.is_file():
        return real
    return make_clip(tmp_path_factory.mktemp("detector_clip"), "highway", 41, duration_s=6.5)


def require_ray():
    """The ``ray`` module; without it the test skips locally and fails with ``AIRPATROL_REQUIRE_RAY=1`` (CI), so CI
    cannot silently skip the Ray tests."""
    try:
        import ray
    except ImportError:
        if os.environ.get("AIRPATROL_REQUIRE_RAY") == "1":
            pytest.fail("AIRPATROL_REQUIRE_RAY=1 but " + RAY_MISSING)
        pytest.skip(RAY_MISSING)
    return ray


@pytest.fixture
def ray_local():
    """A private local Ray instance with 2 CPUs (the machine's), shut down after the test."""
    ray = require_ray()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"YOLO_OFFLINE": "1"}})
    yield ray
    ray.shutdown()
