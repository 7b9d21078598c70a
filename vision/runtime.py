"""Which inference runtime the detector uses (runtime selection belongs to ``vision``): PyTorch, or ONNX Runtime through an Ultralytics ONNX export.

``DetectorConfig.runtime``:
  * ``torch``  - load the weights as given (``.pt`` with PyTorch; an ``.onnx``/``.engine`` file with its own runtime);
  * ``onnx``   - ``.pt`` weights are exported once with ``model.export(format="onnx", dynamic=True)`` into the user
    cache folder (keyed by the weights' sha256, so retrained weights get a new export) and run with ONNX Runtime;
  * ``auto``   - the documented rule below.

The rule for ``auto`` (measured with ``bench/throughput.py``, figures in docs/deployment.md): on CPU, ONNX Runtime
ran the YOLOv8n detector 1.4-1.8x faster than PyTorch at batch 1 (9.6 vs 5.5 frames/s at 1280x720; 0.64 vs 0.47 on
tiled 1080p), so ``auto`` exports and uses it; on CUDA it keeps PyTorch, which runs FP16 there
(``DetectorConfig.half``) and is what the GPU path is built on (ONNX Runtime on GPU is not measured). When the
export cannot be made (no ``onnx`` package, unusual weights) ``auto`` falls back to PyTorch with a warning, while an
explicit ``onnx`` raises. Weights that are not ``.pt`` are always loaded as they are.

The export never downloads anything (``simplify=False`` avoids Ultralytics' onnxslim install; YOLO_OFFLINE is set).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

from vision.checksum import sha256_file
from vision.config import DetectorConfig
from vision.yolo_weights import load_yolo

EXPORT_OPSET = None  # Ultralytics' best opset for the installed onnx


class RuntimeChoiceError(ValueError):
    """The requested detector runtime cannot be used with these weights."""


def cache_dir() -> Path:
    """Where exported models live: ``AIRPATROL_CACHE_DIR`` or the user cache folder (platformdirs)."""
    env = os.environ.get("AIRPATROL_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("airpatrol", appauthor=False))


def choose_runtime(config: DetectorConfig, device: str, weights: Path) -> str:
    """How these weights run on ``device``: 'torch' (.pt with PyTorch), 'onnx' (ONNX Runtime: an .onnx file, or a
    .pt to export), or 'native' (another exported format, run by the runtime Ultralytics picks for it)."""
    wanted = getattr(config, "runtime", "torch")
    suffix = weights.suffix.lower()
    if suffix != ".pt":
        if wanted == "onnx" and suffix != ".onnx":
            raise RuntimeChoiceError(
                f"{weights}: detector runtime 'onnx' needs .pt weights to export (or an .onnx file)"
            )
        return "onnx" if suffix == ".onnx" else "native"
    if wanted == "auto":
        return "torch" if device.startswith("cuda") else "onnx"
    return wanted


@contextmanager
def _quiet_ultralytics():
    from ultralytics.utils import LOGGER

    level = LOGGER.level
    LOGGER.setLevel(logging.WARNING)
    try:
        yield
    finally:
        LOGGER.setLevel(level)


def exported_onnx(weights: Path) -> Path:
    """The cached dynamic-shape ONNX export of ``weights`` (.pt), made on first use.

    Several workers may ask at once: each exports in its own temporary folder and the finished file is moved into
    place atomically, so a reader never sees half a file.
    """
    weights = Path(weights)
    digest = sha256_file(weights)[:16]
    target = cache_dir() / "onnx" / f"{weights.stem}-{digest}.onnx"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as tmp:
        local = Path(tmp) / weights.name  # the exporter writes next to its input: keep that inside the cache
        shutil.copyfile(weights, local)
        with _quiet_ultralytics(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch's notice about its legacy ONNX exporter
            out = YOLO(str(local), task="detect").export(
                format="onnx", dynamic=True, simplify=False, half=False, device="cpu", opset=EXPORT_OPSET, verbose=False
            )
        os.replace(out, target)
    return target


def runtime_weights(config: DetectorConfig, device: str, default: Path) -> tuple[Path, str]:
    """(the file the detector should load, the runtime it runs on: 'torch' or 'onnx')."""
    weights = Path(config.weights) if config.weights else Path(default)
    if not weights.is_file():
        return weights, "torch"  # load_yolo reports the missing file
    runtime = choose_runtime(config, device, weights)
    if runtime != "onnx" or weights.suffix.lower() == ".onnx":
        return weights, runtime  # loaded as it is
    try:
        return exported_onnx(weights), "onnx"
    except Exception as exc:  # the exporter raises many types; the message is what matters
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if getattr(config, "runtime", "auto") == "onnx":
            raise RuntimeChoiceError(
                f"{weights}: ONNX export for the 'onnx' detector runtime failed ({reason})"
            ) from None
        warnings.warn(
            f"{weights}: ONNX export failed ({reason}); detector runs on PyTorch", RuntimeWarning, stacklevel=2
        )
        return weights, "torch"


def tune_onnx_session(model, onnx_path: Path, imgsz: int, threads: int | None = None) -> None:
    """Give an Ultralytics ONNX model a CPU session with ``threads`` threads (default: torch's) and no spin-waiting.

    Ultralytics' default session uses every core and lets idle threads spin; next to other workers or other
    processes that oversubscribes the CPU: on the loaded 2-core development machine it was slower than PyTorch
    (4.7 vs 5.2 frames/s), with this session faster (9.6 vs 5.5; docs/deployment.md).
    """
    import numpy as np
    import onnxruntime as ort
    import torch

    model.predict(np.zeros((64, 64, 3), np.uint8), imgsz=imgsz, device="cpu", verbose=False)  # builds the predictor
    backend = getattr(model.predictor.model, "backend", model.predictor.model)
    if not hasattr(backend, "session") or getattr(backend, "use_io_binding", False):
        return  # not the plain CPU ONNX Runtime path: leave it as Ultralytics made it
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    backend.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


def load_for_runtime(config: DetectorConfig, device: str, default: Path):
    """(Ultralytics model, the file it was loaded from, 'torch' or 'onnx'): what ``VehicleDetector`` runs."""
    path, runtime = runtime_weights(config, device, default)
    model = load_yolo(None if path == Path(default) else path)
    if runtime == "onnx" and not device.startswith("cuda"):
        tune_onnx_session(model, path, config.imgsz)
    return model, path, runtime
