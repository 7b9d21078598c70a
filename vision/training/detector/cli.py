"""``airpatrol train-detector``: the command only; training (and its torch import) is loaded when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vision.training.detector import DEFAULT_BATCH, DEFAULT_EPOCHS, DEFAULT_FREEZE, DEFAULT_WEIGHTS, DEFAULT_WISE_ALPHA


def cli_train_detector(
    out: Annotated[Path, typer.Option("--out", help="where to write the trained weights (.pt)")] = DEFAULT_WEIGHTS,
    epochs: Annotated[int, typer.Option("--epochs", help="training epochs")] = DEFAULT_EPOCHS,
    imgsz: Annotated[int, typer.Option("--imgsz", help="training image size (tiles are 640)")] = 640,
    batch: Annotated[int, typer.Option("--batch", help="images per batch")] = DEFAULT_BATCH,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="work folder for the built data set")] = None,
    extra: Annotated[
        list[Path] | None, typer.Option("--extra", help="extra YOLO-format folder(s) for training")
    ] = None,
    init: Annotated[str, typer.Option("--init", help="coco_int8 (fine-tune) or scratch")] = "coco_int8",
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
    freeze: Annotated[int, typer.Option("--freeze", help="first layers kept frozen (10 = backbone)")] = DEFAULT_FREEZE,
    resume: Annotated[bool, typer.Option("--resume", help="continue an interrupted run with the same options")] = False,
    wise_alpha: Annotated[
        float,
        typer.Option(
            "--wise-alpha", help="share of the fine-tuned weights averaged with the start point (1 = fine-tuned only)"
        ),
    ] = DEFAULT_WISE_ALPHA,
    low_light: Annotated[
        bool,
        typer.Option(
            "--low-light",
            help="instead: continue training --start for night and "
            "low light (low-light copies of day images + the night dev sequence's "
            "training frames, docs/detector.md)",
        ),
    ] = False,
    across_scales: Annotated[
        bool,
        typer.Option(
            "--across-scales",
            help="instead: the shipped weights' run: continue --start on day + night data at several scales "
            "(--epochs defaults to 2 here; docs/detector.md)",
        ),
    ] = False,
    start: Annotated[
        Path, typer.Option("--start", help="--low-light / --across-scales: the weights to continue from")
    ] = DEFAULT_WEIGHTS,
    fraction: Annotated[float, typer.Option("--fraction", help="share of the training list (smoke runs)")] = 1.0,
    turned: Annotated[
        int, typer.Option("--turned", help="--across-scales: add this many day images turned by random angles")
    ] = 0,
    degrees: Annotated[
        float,
        typer.Option("--degrees", help="--across-scales: turn every training image by up to this many degrees"),
    ] = 0.0,
) -> None:
    """Train the YOLOv8n vehicle detector on CPU from the shared drone data (no download)."""
    if across_scales:
        _train_across_scales(out, start, data_dir, epochs, seed, fraction, turned, degrees)
        return
    if low_light:
        _train_low_light(out, start, data_dir, epochs, batch, freeze, seed)
        return
    if init not in ("coco_int8", "scratch"):
        raise typer.BadParameter(f"--init must be coco_int8 or scratch, got {init!r}")
    from vision.training.detector.training import train_detector  # torch: only when the command runs

    try:
        path = train_detector(
            out,
            data_dir=data_dir,
            epochs=epochs,
            imgsz=imgsz,
            batch=batch,
            init=init,  # type: ignore[arg-type]  # init: one of the two, checked above
            extra_dirs=extra or (),
            seed=seed,
            freeze=freeze,
            resume=resume,
            wise_alpha=wise_alpha,
        )
    except ValueError as exc:  # TrainingError, OnnxWeightsError: bad options or data, one line, no traceback
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


def _train_low_light(
    out: Path, start: Path, data_dir: Path | None, epochs: int, batch: int, freeze: int, seed: int
) -> None:
    from vision.training.detector import NIGHT_DEV_TRAIN_FRAMES
    from vision.training.detector.training import finetune_for_low_light, shared_root

    night = shared_root() / "data" / "mot" / "uavdt_M1003_night_dev"
    try:
        path = finetune_for_low_light(
            out,
            start,
            [(night / "video.mp4", night / "gt" / "M1003_gt_whole.txt", NIGHT_DEV_TRAIN_FRAMES)],
            data_dir=data_dir,
            epochs=epochs,
            batch=batch,
            freeze=freeze,
            seed=seed,
        )
    except ValueError as exc:
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


def _train_across_scales(
    out: Path,
    start: Path,
    data_dir: Path | None,
    epochs: int,
    seed: int,
    fraction: float,
    turned: int,
    degrees: float = 0.0,
) -> None:
    from vision.training.detector.recipe import AcrossScalesMix, train_across_scales

    defaults = AcrossScalesMix()
    mix = AcrossScalesMix(
        epochs=defaults.epochs if epochs == DEFAULT_EPOCHS else epochs,
        seed=seed,
        turned_images=turned,
        degrees=degrees,
    )
    if not 0.0 < fraction <= 1.0:
        typer.echo(f"airpatrol: error: --fraction must be in (0, 1], got {fraction}", err=True)
        raise typer.Exit(2)
    if turned < 0:
        typer.echo(f"airpatrol: error: --turned must be 0 or more, got {turned}", err=True)
        raise typer.Exit(2)
    if not 0.0 <= degrees <= 180.0:
        typer.echo(f"airpatrol: error: --degrees must be in [0, 180], got {degrees}", err=True)
        raise typer.Exit(2)
    try:
        path = train_across_scales(out, start, mix, data_dir=data_dir, fraction=fraction)
    except ValueError as exc:  # TrainingError and the data errors: one line, no traceback
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))
