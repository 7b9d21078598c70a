"""The detector runtime: the rule, the cached ONNX export, and ONNX Runtime finding what PyTorch finds."""

from __future__ import annotations

import numpy as np
import pytest

from edge.batch.runtime import RuntimeChoiceError, choose_runtime, exported_onnx
from tracking.config import DetectorConfig
from vision.detection import VehicleDetector
from vision.source import open_source


def test_rule(tmp_path):
    pt, onnx, engine = tmp_path / "m.pt", tmp_path / "m.onnx", tmp_path / "m.engine"
    auto, torch_, onnx_rt = DetectorConfig(), DetectorConfig(runtime="torch"), DetectorConfig(runtime="onnx")
    assert choose_runtime(auto, "cpu", pt) == "onnx"
    assert choose_runtime(auto, "cuda", pt) == "torch"  # FP16 PyTorch is the GPU path
    assert choose_runtime(torch_, "cpu", pt) == "torch"
    assert choose_runtime(onnx_rt, "cuda", pt) == "onnx"  # asked for explicitly
    assert choose_runtime(torch_, "cpu", onnx) == "onnx"  # not .pt: loaded as it is
    assert choose_runtime(auto, "cuda", engine) == "native"
    with pytest.raises(RuntimeChoiceError, match="m.engine"):
        choose_runtime(onnx_rt, "cpu", engine)


@pytest.fixture(scope="module")
def export(detector_weights, tmp_path_factory):
    if detector_weights.suffix != ".pt":
        pytest.skip(f"{detector_weights}: not .pt weights")
    cache = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("AIRPATROL_CACHE_DIR", str(cache))
    yield exported_onnx(detector_weights)
    mp.undo()


def test_export_is_cached_once(export, detector_weights):
    assert export.is_file() and export.parent.name == "onnx"
    stamp = export.stat().st_mtime_ns
    assert exported_onnx(detector_weights) == export and export.stat().st_mtime_ns == stamp
    assert not list(export.parent.glob(".export-*")), "temporary export folders are removed"


def test_onnx_runtime_finds_what_torch_finds(export, detector_weights, detector_video, monkeypatch):
    monkeypatch.setenv("AIRPATROL_CACHE_DIR", str(export.parents[1]))
    cfg = dict(weights=str(detector_weights), conf=0.01, tiling="off")
    torch_det = VehicleDetector(DetectorConfig(runtime="torch", **cfg), "cpu")
    onnx_det = VehicleDetector(DetectorConfig(runtime="onnx", **cfg), "cpu")
    assert (torch_det.runtime, onnx_det.runtime) == ("torch", "onnx") and onnx_det.weights == str(export)
    with open_source(detector_video, max_frames=4) as src:
        images = [f.image for f in src]
    matched = 0
    for a, b in zip(torch_det._predict(images), onnx_det._predict(images)):  # a batch: the export has dynamic shapes
        strong = a[a.score >= 0.05]
        for box, score in zip(strong.xyxy, strong.score):
            near = np.abs(b.xyxy - box).max(axis=1) < 1.0
            assert near.any(), f"ONNX Runtime missed a box PyTorch found: {box} ({score:.2f})"
            assert abs(b.score[near].max() - score) < 0.01
            matched += 1
    assert matched > 0, "no boxes to compare"


def test_explicit_onnx_with_unusable_weights_is_a_clear_error(tmp_path):
    bogus = tmp_path / "broken.pt"
    bogus.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="broken.pt"):
        VehicleDetector(DetectorConfig(weights=str(bogus), runtime="onnx"), "cpu")
