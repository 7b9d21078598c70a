"""`airpatrol demo`: generate a sample drone flight and process it — the first thing a new user runs."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


@user_errors
def cli_demo(
    out: Annotated[Optional[Path], typer.Option(help="folder for the sample and its results")] = None,
    seconds: Annotated[float, typer.Option(help="length of the generated clip")] = 8.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Generate a sample flight (synthetic highway with telemetry) and process it end to end."""
    from edge.runner import process_video
    from edge.commands.process import one_line_summary
    from vision.synth import demo_scene_config, generate_scene

    root = (out or Path("airpatrol-demo")).resolve()
    scene_dir = root / "sample_flight"
    typer.echo(f"generating a {seconds:.0f} s sample flight in {scene_dir} ...")
    generate_scene(demo_scene_config(duration_s=seconds), scene_dir, progress=not quiet)
    outcome = process_video(scene_dir / "video.mp4", root / "run", telemetry=scene_dir / "video.SRT", progress=not quiet)
    typer.echo(one_line_summary(outcome.summary, outcome.out_dir))
    typer.echo(f"results: {outcome.out_dir} (annotated.mp4, tracks.csv, tracks_summary.csv, trajectories.geojson, summary.json)")
