"""The detector's runtime selection moved to :mod:`vision.runtime` (layers only look down: ``vision`` loads the
detector, so it owns the torch / ONNX Runtime / OpenVINO choice); re-exported here so existing imports keep working."""

from __future__ import annotations

from vision.runtime import (
    EXPORT_OPSET,
    RuntimeChoiceError,
    cache_dir,
    choose_runtime,
    exported,
    exported_onnx,
    load_for_runtime,
    openvino_runs_bf16,
    runtime_weights,
    tune_onnx_session,
    tune_openvino,
)

__all__ = [
    "EXPORT_OPSET",
    "RuntimeChoiceError",
    "cache_dir",
    "choose_runtime",
    "exported",
    "exported_onnx",
    "load_for_runtime",
    "openvino_runs_bf16",
    "runtime_weights",
    "tune_onnx_session",
    "tune_openvino",
]
