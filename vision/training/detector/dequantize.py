"""Turn the shipped-with-the-data COCO YOLOv8n INT8 ONNX export back into a float Ultralytics model.

The only COCO YOLOv8n weights we may use are an Ultralytics ONNX export that was then quantised with onnxruntime's
dynamic INT8 quantiser: every conv weight is stored as ``<name>.weight_quantized`` (uint8) plus a per-tensor
``weight_scale`` and ``weight_zero_point``, and the export had already fused each BatchNorm into its conv
(``<name>.bias`` is the fused bias, kept in float). The initialiser names are the PyTorch parameter names, so the
float model is rebuilt by name: ``w = (q - zero_point) * scale`` goes into the conv, and the BatchNorm after it is set
to an identity (weight 1, bias = fused bias, mean 0, var = 1 - eps, so ``(x - 0) / sqrt(1 - eps + eps) * 1 + b``).
The result is a normal, trainable Ultralytics checkpoint: ``YOLO(path)`` loads it and ``.train()`` fine-tunes it.
"""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

DEFAULT_ONNX = Path("models/yolov8n_coco_int8/yolov8n_int8.onnx")  # relative to the shared folder


class OnnxWeightsError(ValueError):
    """The ONNX file is not the expected quantised YOLOv8n export."""


def _initialisers(onnx_path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    if not onnx_path.is_file():
        raise OnnxWeightsError(f"{onnx_path}: ONNX file not found")
    try:
        model = onnx.load(str(onnx_path))
    except Exception as exc:  # onnx raises DecodeError and friends
        raise OnnxWeightsError(f"{onnx_path}: not a readable ONNX model ({exc})") from exc
    arrays = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    metadata = {p.key: p.value for p in model.metadata_props}
    return arrays, metadata


def dequantized_conv_weights(onnx_path: Path) -> dict[str, np.ndarray]:
    """``{"model.0.conv": float32 weight}`` for every quantised conv, plus ``"<name>.bias"`` fused biases."""
    arrays, _ = _initialisers(onnx_path)
    out: dict[str, np.ndarray] = {}
    for name, q in arrays.items():
        if not name.endswith(".weight_quantized"):
            continue
        base = name[: -len(".weight_quantized")]
        scale = arrays[f"{base}.weight_scale"].astype(np.float32)
        zero_point = arrays[f"{base}.weight_zero_point"].astype(np.float32)
        out[f"{base}.weight"] = ((q.astype(np.float32) - zero_point) * scale).astype(np.float32)
    for name, value in arrays.items():
        if name.endswith(".bias") and value.dtype == np.float32:
            out[name] = value
    if not any(k.endswith(".weight") for k in out):
        raise OnnxWeightsError(f"{onnx_path}: no '*.weight_quantized' initialisers (not a dynamic-INT8 export?)")
    return out


def class_names(onnx_path: Path) -> dict[int, str]:
    """The class names the Ultralytics exporter embedded in the ONNX metadata."""
    _, metadata = _initialisers(onnx_path)
    if "names" not in metadata:
        raise OnnxWeightsError(f"{onnx_path}: no 'names' in the ONNX metadata (not an Ultralytics export?)")
    return {int(k): str(v) for k, v in ast.literal_eval(metadata["names"]).items()}


def build_float_model(onnx_path: Path, cfg: str = "yolov8n.yaml"):
    """A float ``DetectionModel`` (nc from the ONNX names) carrying the dequantised weights, in eval mode."""
    from ultralytics.nn.tasks import DetectionModel

    names = class_names(onnx_path)
    weights = dequantized_conv_weights(onnx_path)
    model = DetectionModel(cfg, nc=len(names), verbose=False)
    model.names = names
    state = model.state_dict()
    new_state: dict[str, torch.Tensor] = {}

    def take(key: str, like: torch.Tensor) -> torch.Tensor:
        src = weights.get(key)
        if src is None or tuple(src.shape) != tuple(like.shape):
            got = None if src is None else tuple(src.shape)
            raise OnnxWeightsError(
                f"{onnx_path}: ONNX weight {key} missing or of shape {got}, want {tuple(like.shape)}"
            )
        return torch.from_numpy(src.copy())

    for name, module in model.named_modules():
        if name.endswith("dfl.conv"):
            continue  # fixed arange(16) projection, not learnt: keep Ultralytics' exact values
        if isinstance(module, torch.nn.Conv2d):
            new_state[f"{name}.weight"] = take(f"{name}.weight", module.weight)
            if module.bias is not None:  # the plain 1x1 output convs of the Detect head
                new_state[f"{name}.bias"] = take(f"{name}.bias", module.bias)
        elif isinstance(module, torch.nn.BatchNorm2d):
            assert module.running_mean is not None and module.running_var is not None  # YOLOv8's BNs track them
            # Identity BN that adds the fused bias: y = (x - 0) / sqrt((1 - eps) + eps) * 1 + bias
            new_state[f"{name}.weight"] = torch.ones_like(module.weight)
            new_state[f"{name}.bias"] = take(f"{name[: -len('.bn')]}.conv.bias", module.bias)
            new_state[f"{name}.running_mean"] = torch.zeros_like(module.running_mean)
            new_state[f"{name}.running_var"] = torch.full_like(module.running_var, 1.0 - module.eps)
    missing = [k for k in state if k not in new_state and not k.endswith(("num_batches_tracked", "dfl.conv.weight"))]
    if missing:
        raise OnnxWeightsError(f"{onnx_path}: no ONNX weights for {missing[:5]}")
    model.load_state_dict(new_state, strict=False)
    return model.eval()


def calibrate_batchnorm(model, batches) -> None:
    """Re-express every BatchNorm so that training-mode batch statistics give (about) the same function.

    The identity BN from ``build_float_model`` is exact in eval mode, but in train mode BN normalises by the batch's
    own mean and variance, so the first training step would see a different network (every channel rescaled to unit
    variance) and wreck the COCO features. Here each BN keeps its eval-mode function ``y = (x - m0) / s0 * g0 + b0``
    while taking the real statistics (mean ``m``, std ``s`` of its input over ``batches``) as running statistics:
    ``g = g0 * s / s0`` and ``b = b0 + g0 * (m - m0) / s0``. ``batches``: iterable of (B, 3, H, W) float tensors in 0-1.
    """
    sums: dict[str, list] = {}  # name -> [sum, sum of squares (tensors), count]
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d):

            def accumulate(mod, inputs, output, name=name):
                x = inputs[0].double()
                total = sums.setdefault(name, [torch.zeros(x.shape[1], dtype=torch.float64)] * 2 + [0])
                total[0] = total[0] + x.sum((0, 2, 3))
                total[1] = total[1] + (x * x).sum((0, 2, 3))
                total[2] += x.numel() // x.shape[1]

            hooks.append(module.register_forward_hook(accumulate))
    model.eval()
    try:
        with torch.no_grad():
            for batch in batches:
                model(batch)
    finally:
        for hook in hooks:
            hook.remove()
    if not sums:
        raise ValueError("calibrate_batchnorm: no images were given")
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            total, total_sq, count = sums[name]
            assert module.running_mean is not None and module.running_var is not None  # YOLOv8's BNs track them
            mean = total / count
            var = (total_sq / count - mean * mean).clamp_min(0)
            s0 = (module.running_var.double() + module.eps).sqrt()
            s = (var + module.eps).sqrt()
            g0, b0, m0 = module.weight.detach().double(), module.bias.detach().double(), module.running_mean.double()
            with torch.no_grad():
                module.weight.copy_(g0 * s / s0)
                module.bias.copy_(b0 + g0 * (mean - m0) / s0)
                module.running_mean.copy_(mean)
                module.running_var.copy_(var)


def save_checkpoint(model, out_path: Path, note: str = "") -> Path:
    """Save ``model`` the way Ultralytics' trainer does, so ``YOLO(out_path)`` loads it and can ``.train()``."""
    import ultralytics

    out_path.parent.mkdir(parents=True, exist_ok=True)
    model.args = {"task": "detect", "imgsz": 640}
    ckpt = {
        "date": datetime.now().astimezone().isoformat(),
        "version": ultralytics.__version__,
        "license": "AGPL-3.0 License (https://ultralytics.com/license)",
        "description": note,
        "epoch": -1,
        "best_fitness": None,
        "model": model,
        "ema": None,
        "updates": None,
        "optimizer": None,
        "train_args": dict(model.args),
    }
    torch.save(ckpt, out_path)
    return out_path


def dequantize_onnx(onnx_path: Path, out_path: Path) -> Path:
    """Write the float Ultralytics checkpoint rebuilt from the INT8 ONNX ``onnx_path`` to ``out_path``."""
    model = build_float_model(Path(onnx_path))
    return save_checkpoint(model, Path(out_path), note=f"dequantised from {Path(onnx_path).name}")
