"""Train AirPatrol's vehicle detector (YOLOv8n, classes car/truck/bus/van) on CPU, reproducibly, with no download.

Start point (``init="coco_int8"``): the COCO YOLOv8n rebuilt in float from the shared INT8 ONNX (dequantize.py), with
its 80-class output rows cut down to ours: car <- COCO car, truck <- truck, bus <- bus, van <- car (COCO has no van;
vans look like cars from above). So the network starts as the COCO vehicle detector, and fine-tuning only has to
teach it the drone view. ``init="scratch"`` builds yolov8n.yaml with random weights (for comparison).
"""
from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import torch
import typer

from vision.detector.dataset import CLASS_NAMES, DEFAULT_DATA_DIR, LabelTeacher, build_dataset
from vision.detector.dequantize import DEFAULT_ONNX, build_float_model, calibrate_batchnorm, save_checkpoint

COCO_ROWS_FOR_OURS = (2, 7, 5, 2)  # COCO ids of car, truck, bus, car -> our car, truck, bus, van
DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "airpatrol_yolov8n.pt"
# Chosen by measuring one epoch on the 2 shared CPU cores (docs/detector.md): ~70 minutes in all.
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 16
DEFAULT_FREEZE = 10  # YOLOv8n layers 0-9 are the backbone


class TrainingError(ValueError):
    """Bad training arguments or inputs."""


def shared_root() -> Path:
    """The shared data folder: env AIRPATROL_SHARED, else ``../shared`` beside the repository root."""
    env = os.environ.get("AIRPATROL_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"


def vehicle_head_from_coco(coco_model):
    """The COCO model with its class head cut to our classes (rows ``COCO_ROWS_FOR_OURS`` of the last 1x1 convs).

    Only the last conv of each class branch changes: the branches keep COCO's hidden width (80; a model built from
    yolov8n.yaml with nc=4 would have 64), so every learnt COCO weight is kept. ``VehicleTrainer`` trains this
    module as it is rather than rebuilding it from the yaml.
    """
    model = copy.deepcopy(coco_model)
    detect = model.model[-1]
    rows = torch.tensor(COCO_ROWS_FOR_OURS)
    for branch in detect.cv3:
        old = branch[-1]
        new = torch.nn.Conv2d(old.in_channels, len(rows), 1)
        with torch.no_grad():
            new.weight.copy_(old.weight[rows])
            new.bias.copy_(old.bias[rows])
        branch[-1] = new
    detect.nc = len(CLASS_NAMES)
    detect.no = detect.nc + detect.reg_max * 4
    model.nc = detect.nc
    model.yaml["nc"] = detect.nc
    model.names = dict(enumerate(CLASS_NAMES))
    return model


def _vehicle_trainer():
    from ultralytics.models.yolo.detect import DetectionTrainer

    class VehicleTrainer(DetectionTrainer):
        """Trains the given module itself when its class count fits the data (keeps the widened COCO head)."""

        def get_model(self, cfg=None, weights=None, verbose=True):
            if isinstance(weights, torch.nn.Module) and getattr(weights, "nc", None) == self.data["nc"]:
                model = copy.deepcopy(weights).float()
                for param in model.parameters():
                    param.requires_grad = True
                return model
            return super().get_model(cfg=cfg, weights=weights, verbose=verbose)

    return VehicleTrainer


def calibration_batches(image_dir: Path, count: int = 64, batch: int = 8, imgsz: int = 640) -> list[torch.Tensor]:
    """``count`` evenly spaced images of ``image_dir`` (sorted: deterministic), letterboxed like Ultralytics does."""
    import cv2
    import numpy as np
    from ultralytics.data.augment import LetterBox

    paths = sorted(image_dir.glob("*.jpg"))
    if not paths:
        raise TrainingError(f"{image_dir}: no images to calibrate BatchNorm with")
    picked = [paths[i] for i in np.linspace(0, len(paths) - 1, min(count, len(paths))).round().astype(int)]
    letterbox = LetterBox((imgsz, imgsz), auto=False)
    images = [letterbox(image=cv2.imread(str(p)))[:, :, ::-1].transpose(2, 0, 1) for p in picked]
    stacked = torch.from_numpy(np.ascontiguousarray(np.stack(images))).float() / 255
    return list(stacked.split(batch))


def make_init_checkpoint(init: str, work_dir: Path, onnx_path: Path | None = None,
                         calibration_dir: Path | None = None) -> Path:
    """Write the start-point checkpoint for ``init`` ("coco_int8" or "scratch") and return its path.

    With ``calibration_dir`` (images), the COCO model's BatchNorms get real statistics (``calibrate_batchnorm``):
    same function in eval mode, and training mode no longer sees a different network. Without it the checkpoint
    is exact for inference (used as the label teacher) but not fit to be trained.
    """
    from ultralytics.nn.tasks import DetectionModel

    work_dir.mkdir(parents=True, exist_ok=True)
    name = f"init_{init}"
    if init == "coco_int8":
        onnx_path = onnx_path or shared_root() / DEFAULT_ONNX
        model = vehicle_head_from_coco(build_float_model(onnx_path))
        note = f"COCO YOLOv8n dequantised from {onnx_path.name}, vehicle rows of the class head"
        if calibration_dir is not None:
            calibrate_batchnorm(model, calibration_batches(calibration_dir))
            name, note = f"{name}_bn", f"{note}, BatchNorm calibrated on {calibration_dir}"
    elif init == "scratch":
        model = DetectionModel("yolov8n.yaml", nc=len(CLASS_NAMES), verbose=False)
        model.names = dict(enumerate(CLASS_NAMES))
        note = "random init"
    else:
        raise TrainingError(f"init must be 'coco_int8' or 'scratch', got {init!r}")
    return save_checkpoint(model, work_dir / f"{name}.pt", note=note)


def train_detector(out_weights: Path, data_dir: Path | None = None, epochs: int = DEFAULT_EPOCHS, imgsz: int = 640,
                   batch: int = DEFAULT_BATCH, init: Literal["coco_int8", "scratch"] = "coco_int8",
                   extra_dirs: Sequence[Path] = (), seed: int = 0, shared: Path | None = None,
                   fraction: float = 1.0, freeze: int = DEFAULT_FREEZE, label_teacher: bool = True,
                   resume: bool = False) -> Path:
    """Build the data, fine-tune YOLOv8n on CPU and write the best weights (optimizer stripped, fp16) to ``out_weights``.

    ``freeze`` first layers stay as initialised (10 = the whole backbone: keeps COCO's features, which the small
    data set would otherwise wear away, and makes an epoch ~1/3 cheaper). ``label_teacher`` lets the COCO vehicle
    model add the vehicles the labels of incomplete sources miss (dataset.LabelTeacher).
    ``fraction`` < 1 trains on that share of the training images (smoke tests and timing).
    ``resume`` continues an interrupted run with the same arguments from its last epoch (Ultralytics' resume).
    """
    os.environ.setdefault("YOLO_OFFLINE", "1")  # never let ultralytics fetch weights, fonts or data
    if epochs < 1 or batch < 1 or imgsz < 32:
        raise TrainingError(f"epochs, batch must be >= 1 and imgsz >= 32 (got {epochs}, {batch}, {imgsz})")
    shared = Path(shared) if shared else shared_root()
    detection = shared / "data" / "detection"
    if not detection.is_dir():
        raise TrainingError(f"{detection}: shared detection data not found (set AIRPATROL_SHARED)")
    data_dir = Path(data_dir or DEFAULT_DATA_DIR).expanduser().resolve()
    onnx_path = shared / DEFAULT_ONNX
    teacher = LabelTeacher(make_init_checkpoint("coco_int8", data_dir / "init", onnx_path)) if label_teacher else None
    data_yaml = build_dataset(detection, data_dir, extra_dirs=[Path(e) for e in extra_dirs], teacher=teacher)
    init_ckpt = make_init_checkpoint(init, data_dir / "init", onnx_path, calibration_dir=data_dir / "images" / "train")

    from ultralytics import YOLO

    run_dir = data_dir / "runs"
    name = f"{init}_e{epochs}_i{imgsz}_f{freeze}_s{seed}"
    last = run_dir / name / "weights" / "last.pt"
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    started = time.monotonic()
    if resume and last.exists():
        YOLO(str(last)).train(trainer=_vehicle_trainer(), resume=True)
    else:
        if resume:
            print(f"nothing to resume at {last}: training from the start")
        shutil.rmtree(run_dir / name, ignore_errors=True)
        _train(init_ckpt, data_yaml, epochs, imgsz, batch, seed, fraction, freeze, run_dir, name)
    best = run_dir / name / "weights" / "best.pt"
    if not best.exists():
        best = last
    out_weights = Path(out_weights)
    out_weights.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(best, out_weights)  # ultralytics already stripped the optimizer and halved it
    print(f"trained {epochs} epochs in {(time.monotonic() - started) / 60:.1f} min -> {out_weights} "
          f"({out_weights.stat().st_size / 1e6:.1f} MB)")
    return out_weights


def _train(init_ckpt: Path, data_yaml: Path, epochs: int, imgsz: int, batch: int, seed: int, fraction: float,
           freeze: int, run_dir: Path, name: str) -> None:
    from ultralytics import YOLO

    YOLO(str(init_ckpt)).train(
        trainer=_vehicle_trainer(),
        data=str(data_yaml), epochs=epochs, imgsz=imgsz, batch=batch, device="cpu", workers=2, seed=seed,
        deterministic=True, amp=False, plots=False, val=False,  # validate once, after the last epoch
        project=str(run_dir), name=name, exist_ok=True, pretrained=True, fraction=fraction,
        warmup_epochs=min(3.0, epochs / 4), close_mosaic=max(1, epochs // 5), freeze=freeze or None,
        verbose=True,
    )


def cli_train_detector(
    out: Annotated[Path, typer.Option("--out", help="where to write the trained weights (.pt)")] = DEFAULT_WEIGHTS,
    epochs: Annotated[int, typer.Option("--epochs", help="training epochs")] = DEFAULT_EPOCHS,
    imgsz: Annotated[int, typer.Option("--imgsz", help="training image size (tiles are 640)")] = 640,
    batch: Annotated[int, typer.Option("--batch", help="images per batch")] = DEFAULT_BATCH,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="work folder for the built data set")] = None,
    extra: Annotated[list[Path] | None, typer.Option("--extra", help="extra YOLO-format folder(s) for training")] = None,
    init: Annotated[str, typer.Option("--init", help="coco_int8 (fine-tune) or scratch")] = "coco_int8",
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
    freeze: Annotated[int, typer.Option("--freeze", help="first layers kept frozen (10 = backbone)")] = DEFAULT_FREEZE,
    resume: Annotated[bool, typer.Option("--resume", help="continue an interrupted run with the same options")] = False,
) -> None:
    """Train the YOLOv8n vehicle detector on CPU from the shared drone data (no download)."""
    if init not in ("coco_int8", "scratch"):
        raise typer.BadParameter(f"--init must be coco_int8 or scratch, got {init!r}")
    path = train_detector(out, data_dir=data_dir, epochs=epochs, imgsz=imgsz, batch=batch, init=init,
                          extra_dirs=extra or (), seed=seed, freeze=freeze,
                          resume=resume)
    typer.echo(str(path))
