"""Shapes, checkpoint round trip and error messages of the road U-Net."""

from pathlib import Path

import numpy as np
import pytest
import torch

from vision.road.unet import (
    DEFAULT_WEIGHTS,
    RoadUNet,
    RoadWeightsError,
    load_checkpoint,
    network_size,
    predict_proba,
    save_checkpoint,
)


def test_forward_keeps_spatial_size():
    model = RoadUNet(8).eval()
    with torch.no_grad():
        out = model(torch.zeros(2, 3, 64, 96))
    assert out.shape == (2, 1, 64, 96)


def test_network_size_is_stride_multiple_with_requested_long_side():
    w, h = network_size(1920, 1080, 512)
    assert (w, h) == (512, 288)
    w, h = network_size(720, 1280, 512)
    assert h == 512 and w % RoadUNet.STRIDE == 0 and abs(w - 288) <= RoadUNet.STRIDE


def test_predict_proba_returns_frame_sized_probabilities():
    model = RoadUNet(8).eval()
    frame = np.random.default_rng(0).integers(0, 255, (270, 500, 3), dtype=np.uint8)
    prob = predict_proba(model, frame, 256)
    assert prob.shape == (270, 500) and prob.dtype == np.float32
    assert 0.0 <= prob.min() and prob.max() <= 1.0


def test_checkpoint_round_trip_gives_same_output(tmp_path: Path):
    torch.manual_seed(0)
    model = RoadUNet(8)
    # Non-trivial BatchNorm statistics so folding them into the convolutions is really exercised.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    model.eval()
    path = tmp_path / "road.pt"
    save_checkpoint(path, model, 256, {"note": "test"})
    loaded, long_side, meta = load_checkpoint(path)
    assert long_side == 256 and meta["note"] == "test"
    frame = np.random.default_rng(1).integers(0, 255, (128, 200, 3), dtype=np.uint8)
    # Weights are stored in fp16, so outputs agree to fp16 precision, not exactly.
    assert np.abs(predict_proba(model, frame, 256) - predict_proba(loaded, frame, 256)).max() < 0.02


def test_missing_weights_error_names_the_file(tmp_path: Path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(RoadWeightsError, match="nope.pt"):
        load_checkpoint(missing)


def test_corrupt_weights_error_names_the_file(tmp_path: Path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(RoadWeightsError, match="bad.pt"):
        load_checkpoint(bad)
    assert issubclass(RoadWeightsError, ValueError)


@pytest.mark.skipif(not DEFAULT_WEIGHTS.is_file(), reason="shipped road weights not built yet")
def test_shipped_weights_are_small_and_load():
    assert DEFAULT_WEIGHTS.stat().st_size < 3_000_000
    model, long_side, meta = load_checkpoint()
    assert long_side == 512
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 1_000_000
    assert "epfl" in meta["val_iou"]
