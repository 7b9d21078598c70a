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
from typing import Literal

import torch

from vision.training.detector import DEFAULT_BATCH, DEFAULT_EPOCHS, DEFAULT_FREEZE, DEFAULT_WISE_ALPHA
from vision.training.detector.dataset import CLASS_NAMES, DEFAULT_DATA_DIR, LabelTeacher, build_dataset
from vision.training.detector.dequantize import DEFAULT_ONNX, build_float_model, calibrate_batchnorm, save_checkpoint

COCO_ROWS_FOR_OURS = (2, 7, 5, 2)  # COCO ids of car, truck, bus, car -> our car, truck, bus, van


class TrainingError(ValueError):
    """Bad training arguments or inputs."""


def shared_root() -> Path:
    """The shared data folder: env AIRPATROL_SHARED, else ``../shared`` beside the repository root."""
    env = os.environ.get("AIRPATROL_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared"


def portable_path(path: Path) -> str:
    """``path`` as ``training_set.json`` names it: relative to the project, or ``../shared/...`` for shared data.

    A file elsewhere (a copy of earlier weights in /tmp, say) is named by its file name only: the record identifies
    such inputs by their SHA-256, never by a machine's absolute path.
    """
    path = Path(path).resolve()
    project = Path(__file__).resolve().parents[3]
    for root, prefix in ((shared_root().resolve(), Path("../shared")), (project, Path("."))):
        if path.is_relative_to(root):
            return (prefix / path.relative_to(root)).as_posix()
    return path.name


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
        assert new.bias is not None and old.bias is not None  # 1x1 output convs with a bias
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
    # given only image=, LetterBox returns the image (a dict only when given labels)
    images = [letterbox(image=cv2.imread(str(p)))[:, :, ::-1].transpose(2, 0, 1) for p in picked]  # type: ignore[index]
    stacked = torch.from_numpy(np.ascontiguousarray(np.stack(images))).float() / 255
    return list(stacked.split(batch))


def make_init_checkpoint(
    init: str, work_dir: Path, onnx_path: Path | None = None, calibration_dir: Path | None = None
) -> Path:
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


def train_detector(
    out_weights: Path,
    data_dir: Path | None = None,
    epochs: int = DEFAULT_EPOCHS,
    imgsz: int = 640,
    batch: int = DEFAULT_BATCH,
    init: Literal["coco_int8", "scratch"] = "coco_int8",
    extra_dirs: Sequence[Path] = (),
    seed: int = 0,
    shared: Path | None = None,
    fraction: float = 1.0,
    freeze: int = DEFAULT_FREEZE,
    label_teacher: bool = True,
    resume: bool = False,
    wise_alpha: float = DEFAULT_WISE_ALPHA,
) -> Path:
    """Build the data, fine-tune YOLOv8n on CPU and write the best weights (optimizer stripped, fp16) to ``out_weights``.

    ``freeze`` first layers stay as initialised (10 = the whole backbone: keeps COCO's features, which the small
    data set would otherwise wear away, and makes an epoch ~1/3 cheaper). ``label_teacher`` lets the COCO vehicle
    model add the vehicles the labels of incomplete sources miss (dataset.LabelTeacher).
    ``fraction`` < 1 trains on that share of the training images (smoke tests and timing).
    ``resume`` continues an interrupted run with the same arguments from its last epoch (Ultralytics' resume).
    ``wise_alpha`` < 1 writes ``(1 - a) * start + a * fine-tuned`` weights (``interpolate_weights``; WiSE-FT,
    Wortsman et al. 2022). Measured with 0.5: better on oblique UAVDT, but most tiny top-down vehicles are lost again,
    so the default is 1 (docs/detector.md).
    """
    os.environ.setdefault("YOLO_OFFLINE", "1")  # never let ultralytics fetch weights, fonts or data
    if not 0.0 <= wise_alpha <= 1.0:
        raise TrainingError(f"wise_alpha must be in [0, 1], got {wise_alpha}")
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
    if wise_alpha < 1.0 and init == "coco_int8":
        interpolate_weights(init_ckpt, best, wise_alpha, out_weights)
    else:
        shutil.copyfile(best, out_weights)  # ultralytics already stripped the optimizer and halved it
    print(
        f"trained {epochs} epochs in {(time.monotonic() - started) / 60:.1f} min -> {out_weights} "
        f"({out_weights.stat().st_size / 1e6:.1f} MB)"
    )
    return out_weights


def interpolate_weights(start: Path, tuned: Path, alpha: float, out: Path) -> Path:
    """Save ``tuned``'s checkpoint with every float tensor replaced by ``(1 - alpha) * start + alpha * tuned`` (fp16).

    Both must be the same architecture (the fine-tuned model and the checkpoint its training started from). BatchNorm
    running statistics are averaged too; the start point's are real statistics (``calibrate_batchnorm``).
    """
    from ultralytics.utils.torch_utils import torch_load

    start_model = torch_load(start, map_location="cpu")["model"].float()
    ckpt = torch_load(tuned, map_location="cpu")
    model = (ckpt.get("ema") or ckpt["model"]).float()
    a, b = start_model.state_dict(), model.state_dict()
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        raise TrainingError(f"{start} and {tuned} are not the same architecture: cannot average them")
    model.load_state_dict({k: (1 - alpha) * a[k] + alpha * b[k] if b[k].is_floating_point() else b[k] for k in b})
    ckpt.update(model=model.half(), ema=None, description=f"WiSE-FT average, alpha={alpha}: {start.name} + {tuned}")
    torch.save(ckpt, out)
    return out


def _train(
    init_ckpt: Path,
    data_yaml: Path,
    epochs: int,
    imgsz: int,
    batch: int,
    seed: int,
    fraction: float,
    freeze: int,
    run_dir: Path,
    name: str,
    **overrides,
) -> None:
    from ultralytics import YOLO

    args = dict(
        data=str(data_yaml),
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        device="cpu",
        workers=2,
        seed=seed,
        deterministic=True,
        amp=False,
        plots=False,
        val=False,  # validate once, after the last epoch
        project=str(run_dir),
        name=name,
        exist_ok=True,
        pretrained=True,
        fraction=fraction,
        warmup_epochs=min(3.0, epochs / 4),
        close_mosaic=max(1, epochs // 5),
        freeze=freeze or None,
        verbose=True,
    )
    YOLO(str(init_ckpt)).train(trainer=_vehicle_trainer(), **(args | overrides))


def day_training_set(
    start: str | Path, shared: str | Path | None, data_dir: str | Path | None, needed: Sequence[str] = ()
) -> tuple[Path, Path, list[Path]]:
    """What the recipes that continue ``start`` share: the inputs checked (the shared detection images and
    ``needed``, paths relative to the shared root; ``start``), then the day data set built (reused when already
    built). Returns the shared root, the data folder and the day set's training images."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    shared = Path(shared) if shared else shared_root()
    for path in (shared / "data" / "detection", *(shared / n for n in needed)):
        if not path.exists():
            raise TrainingError(f"{path}: shared training data not found (set AIRPATROL_SHARED)")
    if not Path(start).is_file():
        raise TrainingError(f"{start}: start weights not found")
    data_dir = Path(data_dir or DEFAULT_DATA_DIR).expanduser().resolve()
    teacher = LabelTeacher(make_init_checkpoint("coco_int8", data_dir / "init", shared / DEFAULT_ONNX))
    build_dataset(shared / "data" / "detection", data_dir, teacher=teacher)
    return shared, data_dir, sorted((data_dir / "images" / "train").glob("*.jpg"))


def finetune_for_low_light(
    out_weights: Path,
    start: Path,
    night: Sequence[tuple[Path, Path, tuple[int, int]]],
    data_dir: Path | None = None,
    shared: Path | None = None,
    epochs: int = 4,
    day_images: int = 700,
    low_light_images: int = 350,
    night_repeat: int = 2,
    night_step: int = 2,
    batch: int = DEFAULT_BATCH,
    freeze: int = DEFAULT_FREEZE,
    seed: int = 0,
) -> Path:
    """Continue training ``start`` (the shipped day detector) for night and low light, keeping day accuracy.

    Training set: ``day_images`` of the day data set (as built for ``train_detector``), ``low_light_images`` other
    day images turned night-like (``lowlight.low_light``), and real night frames — ``night`` lists (video or image
    folder, UAVDT *_gt_whole.txt, (first, last) frame) — every ``night_step``-th frame, listed ``night_repeat``
    times. Which frames were used goes into ``training_set.json`` beside the run and into the docs; frames that score
    a figure must never be among them.
    """
    import json

    import numpy as np

    from vision.training.detector.lowlight import low_light_copies, uavdt_frames

    shared, data_dir, day = day_training_set(start, shared, data_dir)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(day))
    day_pick = [day[i] for i in sorted(order[:day_images])]
    dark_pick = [day[i] for i in sorted(order[day_images : day_images + low_light_images])]
    work = data_dir / "low_light"
    shutil.rmtree(work, ignore_errors=True)
    low_light_copies(dark_pick, data_dir / "labels" / "train", work / "dark", seed=seed)
    night_images: list[Path] = []
    for source, gt, frames in night:
        folder = work / f"night_{Path(gt).name.split('_')[0]}_{frames[0]}_{frames[1]}"
        uavdt_frames(Path(source), Path(gt), frames, folder, step=night_step)
        night_images += sorted((folder / "images").glob("*.jpg"))
    train_list = work / "train.txt"
    lines = [
        *map(str, day_pick),
        *map(str, sorted((work / "dark" / "images").glob("*.jpg"))),
        *[str(p) for _ in range(night_repeat) for p in night_images],
    ]
    train_list.write_text("\n".join(lines) + "\n")
    import yaml

    yaml_path = work / "data.yaml"
    yaml_path.write_text(
        yaml.safe_dump(
            {
                "path": str(data_dir),
                "train": str(train_list),
                "val": "images/val",
                "names": dict(enumerate(CLASS_NAMES)),
            },
            sort_keys=False,
        )
    )
    (work / "training_set.json").write_text(
        json.dumps(
            {
                "start": portable_path(Path(start)),
                "day_images": len(day_pick),
                "low_light_copies": len(dark_pick),
                "night": [
                    {
                        "source": portable_path(s),
                        "gt": portable_path(g),
                        "frames": list(f),
                        "step": night_step,
                        "repeat": night_repeat,
                    }
                    for s, g, f in night
                ],
                "night_images": len(night_images),
                "epochs": epochs,
                "freeze": freeze,
                "seed": seed,
            },
            indent=1,
        )
    )
    run_dir = data_dir / "runs"
    name = f"lowlight_e{epochs}_f{freeze}_s{seed}"
    shutil.rmtree(run_dir / name, ignore_errors=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    started = time.monotonic()
    _train(Path(start), yaml_path, epochs, 640, batch, seed, 1.0, freeze, run_dir, name)
    best = run_dir / name / "weights" / "last.pt"
    out_weights = Path(out_weights)
    out_weights.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(best, out_weights)
    shutil.copyfile(work / "training_set.json", out_weights.with_suffix(".training_set.json"))
    print(f"fine-tuned {epochs} epochs for low light in {(time.monotonic() - started) / 60:.1f} min -> {out_weights}")
    return out_weights
