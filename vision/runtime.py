"""Which inference runtime the detector uses (runtime selection belongs to ``vision``): PyTorch, ONNX Runtime through an
Ultralytics ONNX export, or OpenVINO through an Ultralytics OpenVINO export.

``DetectorConfig.runtime``:
  * ``torch``    - load the weights as given (``.pt`` with PyTorch; an ``.onnx``/``.engine`` file with its own runtime);
  * ``onnx``     - ``.pt`` weights are exported once with ``model.export(format="onnx", dynamic=True)`` into the user
    cache folder (keyed by the weights' sha256, so retrained weights get a new export) and run with ONNX Runtime;
  * ``openvino`` - the same with ``format="openvino"`` (a folder ``*_openvino_model``), run with OpenVINO on the CPU;
  * ``auto``     - the documented rule below.

The rule for ``auto`` (measured with ``bench/throughput.py``, figures in docs/deployment.md): on CPU, ONNX Runtime
ran the YOLOv8n detector 1.4-1.8x faster than PyTorch at batch 1 (9.6 vs 5.5 frames/s at 1280x720; 0.64 vs 0.47 on
tiled 1080p); OpenVINO, on a CPU with bfloat16 arithmetic (AVX512-BF16 or AMX: AMD Zen 4, Intel Sapphire Rapids and
later), which OpenVINO then uses for the network's inner layers, ran it 1.8x as fast as ONNX Runtime inside `process`
(99 vs 181 ms a call at 1440 x 810; 81 vs 177 ms on one input, idle), its boxes the same within a few hundredths of a
score (docs/deployment.md); at float32 it was no faster (0.84-0.98x). So ``auto`` takes OpenVINO where the CPU runs
bfloat16 and the ``openvino`` package is there, else ONNX Runtime; on CUDA it keeps PyTorch, which runs FP16 there (``DetectorConfig.half``) and is what the GPU path is built
on. When the export cannot be made (no ``onnx`` package, unusual weights) ``auto`` falls back to PyTorch with a
warning, while an explicit ``onnx`` or ``openvino`` raises. Weights that are not ``.pt`` are always loaded as they are.

The exports never download anything (``simplify=False`` avoids Ultralytics' onnxslim install; YOLO_OFFLINE is set).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@functools.cache
def openvino_runs_bf16() -> bool:
    """Whether the ``openvino`` package is installed and its CPU plugin runs bfloat16 on this CPU (the condition
    under which it was measured faster than ONNX Runtime; module docstring). Asked once a process."""
    try:
        import openvino as ov
    except ImportError:
        return False
    try:
        return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except Exception:  # a plugin that cannot say: not the measured case
        return False


# How many pixels a runtime detects in the CPU time ONNX Runtime takes for one (the detector's scale budgets are in
# ONNX Runtime's pixels): OpenVINO at bfloat16 ran the passes of `airpatrol process` on a 1080p render in 99 ms
# against ONNX Runtime's 181 (1440 x 810 input, the same frames; docs/deployment.md). At float32 it was no faster.
PIXELS_PER_ONNX_PIXEL = {"openvino": 1.8}


def pixels_per_onnx_pixel(runtime: str) -> float:
    """The budget factor of ``runtime`` (:data:`PIXELS_PER_ONNX_PIXEL`), 1 where it was not measured faster: ONNX
    Runtime, PyTorch, OpenVINO on a CPU without bfloat16."""
    if runtime == "openvino" and not openvino_runs_bf16():
        return 1.0
    return PIXELS_PER_ONNX_PIXEL.get(runtime, 1.0)


def runtime_label(detector) -> dict[str, Any]:
    """Which runtime ran ``detector`` ('auto' picks by CPU) and how many of ONNX Runtime's pixels its recorded budget
    got (summary.json -> detector_runtime): two machines run a flight alike only where these agree
    (docs/deployment.md). None for a detector that does not say (a test's fake, a baseline's)."""
    return {
        "runtime": getattr(detector, "runtime", None),
        "pixels_per_onnx_pixel": getattr(detector, "runtime_pixels", None),
    }


def choose_runtime(config: DetectorConfig, device: str, weights: Path) -> str:
    """How these weights run on ``device``: 'torch' (.pt with PyTorch), 'onnx' (ONNX Runtime: an .onnx file, or a
    .pt to export), 'openvino' (a .pt exported for OpenVINO, or an ``*_openvino_model`` folder), or 'native'
    (another exported format, run by the runtime Ultralytics picks for it)."""
    wanted = getattr(config, "runtime", "torch")
    suffix = weights.suffix.lower()
    if weights.name.endswith("_openvino_model"):
        return "openvino"
    if suffix != ".pt":
        if wanted in EXPORTS and suffix != ".onnx":
            also = " (or an .onnx file)" if wanted == "onnx" else ""
            raise RuntimeChoiceError(f"{weights}: detector runtime '{wanted}' needs .pt weights to export{also}")
        return "onnx" if suffix == ".onnx" else "native"
    if wanted == "auto":
        if device.startswith("cuda"):
            return "torch"
        return "openvino" if openvino_runs_bf16() else "onnx"
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


# runtime -> (Ultralytics export format, the name its export gets after the weights' stem and digest)
EXPORTS = {"onnx": ("onnx", ".onnx"), "openvino": ("openvino", "_openvino_model")}


def exported(weights: Path, runtime: str) -> Path:
    """The cached dynamic-shape export of ``weights`` (.pt) for ``runtime`` ('onnx': a file, 'openvino': a folder),
    made on first use.

    Several workers may ask at once: each exports in its own temporary folder and the finished export is moved into
    place atomically, so a reader never sees half of one.
    """
    fmt, ending = EXPORTS[runtime]
    weights = Path(weights)
    digest = sha256_file(weights)[:16]
    target = cache_dir() / runtime / f"{weights.stem}-{digest}{ending}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as tmp:
        local = Path(tmp) / weights.name  # the exporter writes next to its input: keep that inside the cache
        shutil.copyfile(weights, local)
        with _quiet_ultralytics(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch's notice about its legacy ONNX exporter
            args = dict(simplify=False, opset=EXPORT_OPSET) if fmt == "onnx" else {}
            out = YOLO(str(local), task="detect").export(
                format=fmt, dynamic=True, half=False, device="cpu", verbose=False, **args
            )
        try:
            os.replace(out, target)
        except OSError:
            if not target.exists():  # another worker's folder landed first (a folder is not replaced): use it
                raise
    return target


def exported_onnx(weights: Path) -> Path:
    """The cached dynamic-shape ONNX export of ``weights`` (.pt), made on first use (:func:`exported`)."""
    return exported(weights, "onnx")


def runtime_weights(config: DetectorConfig, device: str, default: Path) -> tuple[Path, str]:
    """(the file or folder the detector should load, the runtime it runs on: 'torch', 'onnx' or 'openvino')."""
    weights = Path(config.weights) if config.weights else Path(default)
    if not weights.exists():
        return weights, "torch"  # load_yolo reports the missing file
    runtime = choose_runtime(config, device, weights)
    if runtime not in EXPORTS or weights.suffix.lower() != ".pt":
        return weights, runtime  # loaded as it is
    try:
        return exported(weights, runtime), runtime
    except Exception as exc:  # the exporter raises many types; the message is what matters
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if getattr(config, "runtime", "auto") == runtime:
            raise RuntimeChoiceError(
                f"{weights}: {runtime} export for the '{runtime}' detector runtime failed ({reason})"
            ) from None
        warnings.warn(
            f"{weights}: {runtime} export failed ({reason}); detector runs on PyTorch", RuntimeWarning, stacklevel=2
        )
        return weights, "torch"


def _cpu_backend(model, imgsz: int):
    """Build Ultralytics' predictor for ``model`` on the CPU (one tiny frame) and return its inference backend."""
    import numpy as np

    model.predict(np.zeros((64, 64, 3), np.uint8), imgsz=imgsz, device="cpu", verbose=False)
    return getattr(model.predictor.model, "backend", model.predictor.model)


def tune_onnx_session(model, onnx_path: Path, imgsz: int, threads: int | None = None) -> None:
    """Give an Ultralytics ONNX model a CPU session with ``threads`` threads (default: torch's) and no spin-waiting.

    Ultralytics' default session uses every core and lets idle threads spin; next to other workers or other
    processes that oversubscribes the CPU: on the loaded 2-core development machine it was slower than PyTorch
    (4.7 vs 5.2 frames/s), with this session faster (9.6 vs 5.5; docs/deployment.md).
    """
    import onnxruntime as ort
    import torch

    backend = _cpu_backend(model, imgsz)
    if not hasattr(backend, "session") or getattr(backend, "use_io_binding", False):
        return  # not the plain CPU ONNX Runtime path: leave it as Ultralytics made it
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    backend.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


def tune_openvino(model, folder: Path, imgsz: int, threads: int | None = None) -> None:
    """Compile an Ultralytics OpenVINO model for the CPU with ``threads`` threads (default: torch's), as the ONNX
    session gets (:func:`tune_onnx_session`): OpenVINO's own default takes every core, which a batch worker given a
    share of them, or a machine running other processes, oversubscribes."""
    import torch

    backend = _cpu_backend(model, imgsz)
    if not hasattr(backend, "ov_compiled_model") or getattr(backend, "read_model", None) is not None:
        return  # not the plain dynamic-shape CPU path: leave it as Ultralytics made it
    import openvino as ov

    threads = threads or torch.get_num_threads()
    if backend.ov_compiled_model.get_property("INFERENCE_NUM_THREADS") == threads:
        return  # compiled for these threads already (compiling again costs half a second)
    xml = next(Path(folder).glob("*.xml"))
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
    core = ov.Core()
    backend.ov_compiled_model = core.compile_model(core.read_model(str(xml)), "CPU", config)


def load_for_runtime(config: DetectorConfig, device: str, default: Path):
    """(Ultralytics model, the file it was loaded from, 'torch', 'onnx' or 'openvino'): what ``VehicleDetector``
    runs.

    Ultralytics' CPU device selection (its predictor's set-up) sets torch's threads to one less than the machine's
    cores (``NUM_THREADS``: 1 on a 2-core machine), for the whole process: the detector's ONNX session, built with
    torch's thread count after it, and every later torch model (the road U-Net) ran on one core of two. The count the
    process had before loading is given to the detector's runtime and restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    path, runtime = runtime_weights(config, device, default)
    model = load_yolo(None if path == Path(default) else path)
    try:
        if runtime == "onnx" and not device.startswith("cuda"):
            tune_onnx_session(model, path, config.imgsz, threads)
        elif runtime == "openvino":
            tune_openvino(model, path, config.imgsz, threads)
        elif not device.startswith("cuda"):
            _cpu_backend(model, config.imgsz)  # the predictor's set-up, where Ultralytics sets the threads: here
    finally:
        torch.set_num_threads(threads)
    return model, path, runtime
