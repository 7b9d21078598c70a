"""``airpatrol train-road``: the command only; training (and its torch import) is loaded when it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from vision.road import DEFAULT_WEIGHTS
from vision.training.road.labels import DRONE_LABELS


def cli_train_road(
    out: Annotated[Path, typer.Option(help="weights file to write")] = DEFAULT_WEIGHTS,
    data_dir: Annotated[
        Optional[list[Path]],
        typer.Option(help="EPFL-style folder with images/ and masks/ (repeatable; default: the shared EPFL tiles)"),
    ] = None,
    extra_dir: Annotated[
        Optional[list[Path]],
        typer.Option(help="extra image/mask folder for training, e.g. from `airpatrol synth` (repeatable)"),
    ] = None,
    labels: Annotated[Path, typer.Option(help="hand-made road labels of drone frames (JSON)")] = DRONE_LABELS,
    no_drone: Annotated[bool, typer.Option(help="train without the hand-labelled drone frames")] = False,
    epochs: Annotated[int, typer.Option(min=1)] = 40,
    steps_per_epoch: Annotated[int, typer.Option(min=1)] = 100,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    crop: Annotated[int, typer.Option(min=64, help="training crop side, px at the network's input scale")] = 160,
    lr: Annotated[float, typer.Option(min=0.0, help="peak learning rate (one-cycle schedule)")] = 5e-3,
    epfl_share: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="share of crops from EPFL tiles (rest: drone frames)")
    ] = 0.3,
    seed: int = 0,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for torch")] = 1,
    device: Annotated[str, typer.Option(help="cpu or cuda")] = "cpu",
    bf16: Annotated[bool, typer.Option(help="bfloat16 autocast (fast on CPUs with AVX512-BF16/AMX)")] = True,
) -> None:
    """Train the road-segmentation U-Net and print its validation IoU."""
    from vision.training.road.training import train_road  # torch: only when the command runs

    try:
        meta = train_road(
            out,
            data_dir,
            None if no_drone else labels,
            extra_dir or [],
            epochs,
            steps_per_epoch,
            batch_size,
            crop=crop,
            lr=lr,
            seed=seed,
            threads=threads,
            device=device,
            bf16=bf16,
            epfl_share=epfl_share,
        )
    except ValueError as exc:  # bad data folders or labels: one line, no traceback
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(2) from None
    print(
        json.dumps({"weights": str(out), "val_iou": meta["val_iou"], "train_seconds": meta["train_seconds"]}, indent=1)
    )
