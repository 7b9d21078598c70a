"""`airpatrol user add NAME --role ROLE` and `airpatrol import-run RUN_DIR` (registered in edge/cli.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from db.cli_errors import user_errors


@user_errors
def cli_user_add(
    name: Annotated[str, typer.Argument(help="login name (letters, digits, '.', '_', '@', '-')")],
    role: Annotated[str, typer.Option(help="admin | operator | viewer")] = "viewer",
    password: Annotated[Optional[str], typer.Option(
        help="password (at least 8 characters); default: AIRPATROL_USER_PASSWORD, else asked for twice")] = None,
    display_name: Annotated[Optional[str], typer.Option(help="name shown in the dashboard")] = None,
    database_url: Annotated[Optional[str], typer.Option(
        help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")] = None,
) -> None:
    """Create a dashboard user (passwords are stored as Argon2id hashes only)."""
    from db.cli import _connection_errors, ensure_schema
    from db.crud import create_user
    from db.engine import session_scope
    from db.models import ROLES

    if role not in ROLES:
        raise ValueError(f"--role {role}: expected one of {', '.join(ROLES)}")
    password = password or os.environ.get("AIRPATROL_USER_PASSWORD")
    if not password:
        password = typer.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    with _connection_errors(database_url):
        ensure_schema(database_url)
        with session_scope(database_url) as session:
            user = create_user(session, name, password, role=role, display_name=display_name)
            uid = user.id
    typer.echo(f"user {name!r} created (id {uid}, role {role})")


@user_errors
def cli_import_run(
    run_dir: Annotated[Path, typer.Argument(help="output folder of `airpatrol process` (summary.json, tracks.csv, ...)")],
    flight: Annotated[Optional[int], typer.Option(help="attach the run to this existing flight")] = None,
    device: Annotated[Optional[str], typer.Option(
        help="serial of the aircraft when the run's flight log does not name it")] = None,
    speed_limit: Annotated[Optional[float], typer.Option(help="km/h; faster vehicles become violations")] = None,
    task_round: Annotated[Optional[int], typer.Option(help="task round the run belongs to (its task's limit applies)")] = None,
    database_url: Annotated[Optional[str], typer.Option(
        help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    no_orthophoto: Annotated[bool, typer.Option("--no-orthophoto", help="do not project the video onto the ground for the map")] = False,
) -> None:
    """Store a processed run in the database so the dashboard shows it (map, runs, exports)."""
    from db.cli import _connection_errors, ensure_schema
    from dashboard.run_import import import_run_dir
    from dashboard.vehicles import MIN_VEHICLE_S

    with _connection_errors(database_url):
        ensure_schema(database_url)
        result = import_run_dir(run_dir, database_url, flight_id=flight, device_serial=device,
                                speed_limit_kmh=speed_limit, task_round_id=task_round, progress=not quiet,
                                orthophoto=not no_orthophoto)
    typer.echo(f"{run_dir}: run {result.run_id}, {result.tracks} vehicles, {result.violations} violations"
               + (f", flight {result.flight_id}" if result.flight_id else "")
               + (f" ({result.fragments} track fragments shorter than {MIN_VEHICLE_S:g} s not counted)"
                  if result.fragments else ""))
    if result.orthophoto:
        typer.echo(f"{run_dir}: {result.orthophoto}")
    if result.violations:
        typer.echo(f"{run_dir}: {result.snapshots} violation snapshots and {result.clips} clips in "
                   f"{run_dir / 'evidence'}")
