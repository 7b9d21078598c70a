"""``airpatrol study RUN_DIR``: the traffic study of a processed run, as CSV tables and GeoJSON (docs/study.md)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tracking.study.model import StudyInputError

EXIT_USER_ERROR = 2
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """'15m', '900', '30s', '1h' -> seconds."""
    m = DURATION.match(text)
    if not m:
        raise StudyInputError(f"--bin {text!r}: expected a duration like 15m, 5m, 60s or 900")
    value = float(m.group(1))
    unit = (m.group(2) or "s").lower()
    seconds = value * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise StudyInputError(f"--bin {text!r}: must be longer than zero")
    return seconds


def cli_study(
    run_dir: Annotated[Path, typer.Argument(help="output folder of `airpatrol process` (tracks.csv with ground x/y)")],
    approaches: Annotated[
        Optional[Path], typer.Option(help="GeoJSON/JSON approaches (as study.geojson writes them); default: found")
    ] = None,
    bin: Annotated[str, typer.Option("--bin", help="table time bin: 15m, 5m, 60s ...")] = "15m",
    lines: Annotated[
        Optional[Path], typer.Option(help="GeoJSON/JSON counting lines in ground metres; pairs give section speeds")
    ] = None,
    ttc: Annotated[float, typer.Option(help="conflict threshold: time to collision, s")] = 1.5,
    pet: Annotated[float, typer.Option(help="conflict threshold: post-encroachment time, s")] = 1.0,
    out: Annotated[Optional[Path], typer.Option(help="output folder (default: RUN_DIR/study)")] = None,
) -> None:
    """Traffic study of a flight: turning movements, origin-destination, lane flows and speeds, headways, section
    speeds, density / level of service and conflicts, as CSVs plus GeoJSON of approaches and lanes."""
    from tracking.study.compute import compute_study
    from tracking.study.io import load_approaches, load_counting_lines, load_run_trajectories, write_study
    from tracking.study.model import StudyConfig

    try:
        started = time.perf_counter()
        cfg = StudyConfig(bin_s=parse_duration(bin), ttc_s=ttc, pet_s=pet)
        if lines is not None:
            cfg.counting_lines = load_counting_lines(lines)
        given = load_approaches(approaches) if approaches is not None else None
        trajs = load_run_trajectories(run_dir)
        try:
            study = compute_study(trajs, given, cfg)
        except StudyInputError as exc:
            if approaches is not None and str(exc).startswith("approach "):
                raise StudyInputError(f"{approaches}: {exc}") from None  # name the file that holds it
            raise
        target = out or Path(run_dir) / "study"
        try:
            paths = write_study(study, target)
        except OSError as exc:
            typer.echo(f"airpatrol: error: {target}: cannot write the study ({exc.strerror or exc})", err=True)
            raise typer.Exit(4) from None
    except StudyInputError as exc:
        typer.echo(f"airpatrol: error: {exc}", err=True)
        raise typer.Exit(EXIT_USER_ERROR) from None
    counted = sum(v.origin is not None and v.destination is not None for v in study.vehicles)
    typer.echo(
        f"{target}: {len(study.approaches)} approaches, {len(study.vehicles)} vehicles ({counted} with origin and "
        f"destination), {len(study.conflicts)} conflicts, {study.bin_s:g} s bins, {len(paths)} files "
        f"in {time.perf_counter() - started:.1f} s"
    )
    for w in study.warnings:
        typer.echo(f"note: {w}")
