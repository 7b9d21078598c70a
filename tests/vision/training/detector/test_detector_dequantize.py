"""The INT8 ONNX -> float Ultralytics model conversion."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import shared_path
from vision.training.detector.dequantize import (
    OnnxWeightsError,
    build_float_model,
    dequantize_onnx,
    dequantized_conv_weights,
)


def _tiny_quantised_onnx(path, q, scale, zero_point, bias):
    inits = [
        numpy_helper.from_array(q, "model.0.conv.weight_quantized"),
        numpy_helper.from_array(np.array(scale, np.float32), "model.0.conv.weight_scale"),
        numpy_helper.from_array(np.array(zero_point, np.uint8), "model.0.conv.weight_zero_point"),
        numpy_helper.from_array(bias, "model.0.conv.bias"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph), str(path))


def test_dequantised_weight_is_scale_times_q_minus_zero_point(tmp_path):
    rng = np.random.default_rng(0)
    q = rng.integers(0, 256, size=(4, 3, 3, 3), dtype=np.uint8)
    bias = rng.normal(size=4).astype(np.float32)
    _tiny_quantised_onnx(tmp_path / "m.onnx", q, 0.0123, 131, bias)
    weights = dequantized_conv_weights(tmp_path / "m.onnx")
    np.testing.assert_allclose(weights["model.0.conv.weight"], (q.astype(np.float32) - 131) * 0.0123, rtol=1e-6)
    np.testing.assert_array_equal(weights["model.0.conv.bias"], bias)


def test_not_an_onnx_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(OnnxWeightsError, match="bad.onnx"):
        dequantized_conv_weights(bad)
    with pytest.raises(OnnxWeightsError, match="not found"):
        dequantized_conv_weights(tmp_path / "missing.onnx")


@pytest.mark.shared
def test_float_model_matches_onnxruntime_on_a_real_frame(tmp_path):
    import cv2
    import onnxruntime as ort
    import torch
    from ultralytics import YOLO
    from ultralytics.data.augment import LetterBox

    onnx_path = shared_path("models", "yolov8n_coco_int8", "yolov8n_int8.onnx")
    frame = cv2.imread(str(shared_path("data", "mot", "uavdt_M1303", "img", "img000100.jpg")))
    x = LetterBox((640, 640), auto=False)(image=frame)[:, :, ::-1].transpose(2, 0, 1)[None]  # type: ignore[index]  # image= only: the image back
    x = np.ascontiguousarray(x, dtype=np.float32) / 255
    ref = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0][0]
    model = build_float_model(onnx_path)
    with torch.no_grad():
        out = model(torch.from_numpy(x))[0][0].numpy()
    assert out.shape == ref.shape == (84, 8400)
    # The ONNX also quantises activations (dynamic INT8), so agreement is close, not exact: compare where it matters.
    confident = ref[4:].max(axis=0) > 0.25
    assert confident.sum() >= 20  # the frame has dozens of cars
    assert np.abs(out[:4, confident] - ref[:4, confident]).max() < 3.0  # px in the 640 input
    assert np.abs(out[4:] - ref[4:]).max() < 0.15  # class probabilities
    top_ref, top_out = np.argsort(-ref[4:].max(0))[:30], np.argsort(-out[4:].max(0))[:30]
    assert len(set(top_ref) & set(top_out)) >= 24

    ckpt = dequantize_onnx(onnx_path, tmp_path / "coco_float.pt")
    loaded = YOLO(str(ckpt))
    assert loaded.names[2] == "car"
    cars = list(loaded.predict(frame, conf=0.25, classes=[2], verbose=False))[0].boxes  # type: ignore[union-attr]  # Results, not tensors (no embed=)
    onnx_cars = list(YOLO(str(onnx_path), task="detect").predict(frame, conf=0.25, classes=[2], verbose=False))[0].boxes  # type: ignore[union-attr]
    assert abs(len(cars) - len(onnx_cars)) <= max(2, len(onnx_cars) // 10)


def test_batchnorm_calibration_keeps_the_function_and_makes_train_mode_agree():
    import torch
    from ultralytics.nn.tasks import DetectionModel

    from vision.training.detector.dequantize import calibrate_batchnorm

    torch.manual_seed(0)
    model = DetectionModel("yolov8n.yaml", nc=4, verbose=False)
    for module in model.modules():  # an identity-BN model like build_float_model's, with non-trivial biases
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.zero_()
            module.running_var.fill_(1 - module.eps)
            module.weight.data.fill_(1.0)
            module.bias.data.normal_(0, 0.5)
    x = torch.rand(2, 3, 96, 96)

    def head_inputs(train: bool) -> list[torch.Tensor]:
        seen = []
        net = copy.deepcopy(model)  # a train-mode pass updates the BN running statistics: keep `model` as it is
        net.model[-1].register_forward_hook(lambda m, inputs, out: seen.append([t.clone() for t in inputs[0]]))  # type: ignore[index, union-attr]  # a DetectionModel's layer list
        net.train(train)
        with torch.no_grad():
            net(x)
        return seen[0]

    before = head_inputs(train=False)
    assert max(float((a - b).norm() / b.norm()) for a, b in zip(head_inputs(train=True), before)) > 0.5
    calibrate_batchnorm(model, [x])
    after_eval, after_train = head_inputs(train=False), head_inputs(train=True)
    for a, b in zip(after_eval, before):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)  # same network in eval mode
    for a, b in zip(after_train, before):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)  # and in train mode on the calibration batch
