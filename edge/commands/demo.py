"""`airpatrol demo`: generate a sample flight and process it — the first thing a new user runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


def demo_scene_config(duration_s: float = 8.0):
    """A fixed sample flight: highway at 60 m, nadir, with telemetry, parked cars and off-road clutter."""
    from vision.synth import SceneConfig

    return SceneConfig(
        scene="highway",
        seed=2026,
        duration_s=duration_s,
        fps=25,
        width=1280,
        height=720,
        altitude_m=60.0,
        gimbal_pitch_deg=-90.0,
        parked_vehicles=6,
        clutter_objects=6,
        road_mask_every=0,
    )


@user_errors
def cli_demo(
    out: Annotated[Optional[Path], typer.Option(help="folder for the sample and its results")] = None,
    seconds: Annotated[float, typer.Option(help="length of the generated clip", min=1, max=120)] = 8.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    store: Annotated[
        bool, typer.Option("--store/--no-store", help="store the flight and run in the database for the dashboard")
    ] = True,
) -> None:
    """Generate a sample flight (synthetic highway with DJI-style telemetry) and process it end to end."""
    from edge.commands.process import one_line_summary
    from edge.runner import process_video
    from vision.synth import generate_scene

    root = (out or Path("airpatrol-demo")).resolve()
    scene_dir = root / "sample_flight"
    typer.echo(f"generating a {seconds:.0f} s sample flight in {scene_dir} ...")
    generate_scene(demo_scene_config(seconds), scene_dir, progress=not quiet)
    outcome = process_video(
        scene_dir / "video.mp4", root / "run", telemetry=scene_dir / "video.SRT", progress=not quiet
    )
    typer.echo(one_line_summary(outcome.summary, outcome.out_dir))
    typer.echo(
        f"results: {outcome.out_dir} (annotated.mp4, tracks.csv, tracks_summary.csv, trajectories.geojson, summary.json)"
    )
    if store:
        store_in_database(outcome.out_dir, speed_limit_kmh=DEMO_SPEED_LIMIT_KMH)


DEMO_SPEED_LIMIT_KMH = 90.0


def store_in_database(run_dir: Path, speed_limit_kmh: float) -> None:
    """Put the demo flight and its run in the default database, with a demo login, so the dashboard shows them."""
    from dashboard.users import DEMO_PASSWORD, DEMO_USERNAME, ensure_demo_user
    from db.engine import database_url
    from db.migrate import upgrade
    from db.run_import import import_run_dir

    url = database_url()
    upgrade(url)
    imported = import_run_dir(run_dir, url, speed_limit_kmh=speed_limit_kmh)
    ensure_demo_user(url)
    typer.echo(
        f"database: {url} (flight {imported.flight_id}, run {imported.run_id}, {imported.tracks} vehicles, "
        f"{imported.violations} over {speed_limit_kmh:.0f} km/h)"
    )
    typer.echo(
        f"dashboard: run `airpatrol serve`, open http://127.0.0.1:8000/ and log in as {DEMO_USERNAME} / {DEMO_PASSWORD}"
    )
