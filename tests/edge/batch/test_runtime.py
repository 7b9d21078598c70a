"""The detector runtime: the rule, the cached ONNX and OpenVINO exports, ONNX Runtime finding what PyTorch finds and
OpenVINO what ONNX Runtime finds, and the threads they run on."""

from __future__ import annotations

import os

import numpy as np
import pytest

import vision.runtime
from edge.batch.runtime import RuntimeChoiceError, choose_runtime, exported_onnx
from tracking.config import DetectorConfig
from vision.detection import VehicleDetector
from vision.source import open_source


def test_rule(tmp_path, monkeypatch):
    pt, onnx, engine = tmp_path / "m.pt", tmp_path / "m.onnx", tmp_path / "m.engine"
    auto, torch_, onnx_rt = DetectorConfig(), DetectorConfig(runtime="torch"), DetectorConfig(runtime="onnx")
    openvino = DetectorConfig(runtime="openvino")
    monkeypatch.setattr(vision.runtime, "openvino_runs_bf16", lambda: False)
    assert choose_runtime(auto, "cpu", pt) == "onnx"
    monkeypatch.setattr(vision.runtime, "openvino_runs_bf16", lambda: True)
    assert choose_runtime(auto, "cpu", pt) == "openvino"  # where the CPU runs bfloat16 (measured faster there)
    assert choose_runtime(auto, "cuda", pt) == "torch"
    assert choose_runtime(openvino, "cpu", pt) == "openvino"
    assert choose_runtime(torch_, "cpu", tmp_path / "m_openvino_model") == "openvino"  # an export: as it is
    with pytest.raises(RuntimeChoiceError, match="m.engine"):
        choose_runtime(openvino, "cpu", engine)
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
    # a batch: the export has dynamic shapes
    _finds_the_same(torch_det, onnx_det, images, min_score=0.05, px=1.0, score_diff=0.01)


def _finds_the_same(reference, other, images, min_score: float, px: float, score_diff: float) -> None:
    """Every box ``reference`` scores >= ``min_score`` on ``images`` (one batch) is boxed by ``other`` within ``px``
    on each side, its score within ``score_diff``; at least one box is compared."""
    matched = 0
    for a, b in zip(reference._predict(images), other._predict(images)):
        strong = a[a.score >= min_score]
        for box, score in zip(strong.xyxy, strong.score):
            near = np.abs(b.xyxy - box).max(axis=1) < px
            assert near.any(), f"{other.runtime} missed a box {reference.runtime} found: {box} ({score:.2f})"
            assert abs(b.score[near].max() - score) < score_diff
            matched += 1
    assert matched > 0, "no boxes to compare"


def test_explicit_onnx_with_unusable_weights_is_a_clear_error(tmp_path):
    bogus = tmp_path / "broken.pt"
    bogus.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="broken.pt"):
        VehicleDetector(DetectorConfig(weights=str(bogus), runtime="onnx"), "cpu")


def _openvino():
    try:
        import openvino
    except ImportError:
        pytest.skip("the openvino package is not installed (a declared dependency: pip install -e .)")
    return openvino


def test_openvino_finds_what_onnx_runtime_finds(export, detector_weights, detector_video, monkeypatch):
    """OpenVINO (bfloat16 where the CPU has it, as ``auto`` runs it) boxes what ONNX Runtime (float32) boxes: at
    bfloat16 a score moves by a few hundredths, a box by a pixel or two (docs/deployment.md)."""
    _openvino()
    monkeypatch.setenv("AIRPATROL_CACHE_DIR", str(export.parents[1]))
    cfg = dict(weights=str(detector_weights), conf=0.01, tiling="off")
    onnx_det = VehicleDetector(DetectorConfig(runtime="onnx", **cfg), "cpu")
    ov_det = VehicleDetector(DetectorConfig(runtime="openvino", **cfg), "cpu")
    assert ov_det.runtime == "openvino" and ov_det.weights.endswith("_openvino_model")
    assert ov_det.weights.startswith(str(export.parents[1] / "openvino"))
    with open_source(detector_video, max_frames=4) as src:
        images = [f.image for f in src]
    _finds_the_same(onnx_det, ov_det, images, min_score=0.25, px=3.0, score_diff=0.05)  # a batch: dynamic shapes too


@pytest.mark.parametrize("runtime", ["torch", "onnx", "openvino"])
def test_the_detector_keeps_the_process_threads(runtime, export, detector_weights, monkeypatch):
    """Ultralytics' CPU set-up sets torch's threads to one less than the cores (1 on a 2-core machine) for the whole
    process; loading the detector leaves the process's count as it was, and the detector's runtime runs on it."""
    import torch

    if runtime == "openvino":
        _openvino()
    monkeypatch.setenv("AIRPATROL_CACHE_DIR", str(export.parents[1]))
    before = torch.get_num_threads()
    cores = os.cpu_count() or 1
    # a count other than the one Ultralytics would set (min(8, cores - 1)); OpenVINO takes at most the cores, and all
    # of them unless told otherwise, so it is asked for one
    wanted = next(n for n in range(2, 12) if n != min(8, max(1, cores - 1)))
    if runtime == "openvino":
        if cores < 2:
            pytest.skip("one core: OpenVINO's own thread count is the one asked for")
        wanted = 1
    torch.set_num_threads(wanted)
    try:
        det = VehicleDetector(DetectorConfig(weights=str(detector_weights), runtime=runtime, tiling="off"), "cpu")
        det._predict([np.zeros((360, 640, 3), np.uint8)])
        assert torch.get_num_threads() == wanted
        backend = getattr(det.model.predictor.model, "backend", det.model.predictor.model)
        if runtime == "onnx":
            assert backend.session.get_session_options().intra_op_num_threads == wanted
        if runtime == "openvino":
            assert backend.ov_compiled_model.get_property("INFERENCE_NUM_THREADS") == wanted
    finally:
        torch.set_num_threads(before)
