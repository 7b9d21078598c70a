"""``airpatrol synth OUT_DIR``: render synthetic drone clips with exact ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from vision.synth.scene import SCENE_TYPES, SynthConfigError, load_config, sample_config


def cli_synth(
    out_dir: Annotated[Path, typer.Argument(help="folder to write (one clip), or parent folder when --count > 1")],
    scene: Annotated[Optional[str], typer.Option(help=f"one of: {', '.join(SCENE_TYPES)}")] = None,
    seconds: Annotated[Optional[float], typer.Option(help="clip length")] = None,
    fps: Annotated[Optional[float], typer.Option()] = None,
    width: Annotated[Optional[int], typer.Option()] = None,
    height: Annotated[Optional[int], typer.Option()] = None,
    altitude: Annotated[Optional[float], typer.Option(help="metres above the road")] = None,
    pitch: Annotated[Optional[float], typer.Option(help="gimbal pitch: -90 nadir ... -45 oblique")] = None,
    seed: Annotated[Optional[int], typer.Option(help="random seed (same seed + config = same ground truth)")] = None,
    config: Annotated[
        Optional[Path], typer.Option(help="JSON/YAML file with scene settings (see docs/synth.md)")
    ] = None,
    randomize: Annotated[
        bool, typer.Option(help="draw altitude, pitch, resolution, traffic ... from the seed")
    ] = False,
    count: Annotated[int, typer.Option(min=1, help="number of clips (seeds seed, seed+1, ...)")] = 1,
    near_misses: Annotated[
        Optional[int], typer.Option(help="script this many rear-end near-misses (truth in scene.json)")
    ] = None,
    yolo_every: Annotated[Optional[int], typer.Option(help="also write a YOLO image+label every N frames")] = None,
    no_video: Annotated[bool, typer.Option(help="ground truth only, no video.mp4")] = False,
    procedural: Annotated[bool, typer.Option(help="do not use real imagery from ../shared")] = False,
    quiet: Annotated[bool, typer.Option(help="no progress bar")] = False,
) -> None:
    """Render synthetic drone traffic clips: video.mp4, video.SRT, gt/gt.txt (MOTChallenge), gt/speeds.csv, ..."""
    from vision.synth.generator import generate_scene  # heavy imports only when the command runs

    overrides = dict(
        scene=scene,
        duration_s=seconds,
        fps=fps,
        width=width,
        height=height,
        altitude_m=altitude,
        gimbal_pitch_deg=pitch,
        yolo_every=yolo_every,
        near_misses=near_misses,
    )
    if no_video:
        overrides["write_video"] = False
    if procedural:
        overrides["use_shared_data"] = "off"
    try:
        base = load_config(config, **overrides, seed=seed)
        for k in range(count):
            s = base.seed + k
            if randomize:
                cfg = sample_config(s, **{key: v for key, v in overrides.items() if key != "scene"}, scene=scene)
            else:
                cfg = base.model_copy(update={"seed": s})
            target = out_dir if count == 1 else out_dir / f"{cfg.scene}_{s:04d}"
            res = generate_scene(cfg, target, progress=not quiet)
            typer.echo(
                f"{target}: {res.frame_count} frames {res.width}x{res.height} @ {res.fps:g} fps, "
                f"{res.vehicle_ids} vehicles, {res.metres_per_pixel * 100:.2f} cm/px, {res.seconds:.1f} s"
            )
    except SynthConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
