"""`airpatrol demo`: generate a sample flight and process it — the first thing a new user runs."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


def demo_scene_config(duration_s: float = 8.0):
    """A fixed sample flight: highway at 60 m, nadir, with telemetry, parked cars and off-road clutter."""
    from vision.synth import SceneConfig

    return SceneConfig(scene="highway", seed=2026, duration_s=duration_s, fps=25, width=1280, height=720,
                       altitude_m=60.0, gimbal_pitch_deg=-90.0, parked_vehicles=6, clutter_objects=6,
                       road_mask_every=0)


@user_errors
def cli_demo(
    out: Annotated[Optional[Path], typer.Option(help="folder for the sample and its results")] = None,
    seconds: Annotated[float, typer.Option(help="length of the generated clip", min=1, max=120)] = 8.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Generate a sample flight (synthetic highway with DJI-style telemetry) and process it end to end."""
    from edge.commands.process import one_line_summary
    from edge.runner import process_video
    from vision.synth import generate_scene

    root = (out or Path("airpatrol-demo")).resolve()
    scene_dir = root / "sample_flight"
    typer.echo(f"generating a {seconds:.0f} s sample flight in {scene_dir} ...")
    generate_scene(demo_scene_config(seconds), scene_dir, progress=not quiet)
    outcome = process_video(scene_dir / "video.mp4", root / "run", telemetry=scene_dir / "video.SRT", progress=not quiet)
    typer.echo(one_line_summary(outcome.summary, outcome.out_dir))
    typer.echo(f"results: {outcome.out_dir} (annotated.mp4, tracks.csv, tracks_summary.csv, trajectories.geojson, summary.json)")
