"""``airpatrol train-detector``: the command only; training (and its torch import) is loaded when it runs."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vision.detector import DEFAULT_BATCH, DEFAULT_EPOCHS, DEFAULT_FREEZE, DEFAULT_WEIGHTS, DEFAULT_WISE_ALPHA


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
    wise_alpha: Annotated[float, typer.Option("--wise-alpha", help="share of the fine-tuned weights averaged with "
                                              "the start point (1 = fine-tuned only)")] = DEFAULT_WISE_ALPHA,
) -> None:
    """Train the YOLOv8n vehicle detector on CPU from the shared drone data (no download)."""
    if init not in ("coco_int8", "scratch"):
        raise typer.BadParameter(f"--init must be coco_int8 or scratch, got {init!r}")
    from vision.detector.training import train_detector  # torch: only when the command runs

    try:
        path = train_detector(out, data_dir=data_dir, epochs=epochs, imgsz=imgsz, batch=batch, init=init,
                              extra_dirs=extra or (), seed=seed, freeze=freeze,
                              resume=resume, wise_alpha=wise_alpha)
    except ValueError as exc:  # TrainingError, OnnxWeightsError: bad options or data, one line, no traceback
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))
