"""`airpatrol import-log`, `airpatrol import-run` and `airpatrol db upgrade|backup|restore` (registered in edge/cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from db.cli_errors import EXIT_INCOMPLETE, EXIT_USER_ERROR, user_errors


def _connection_errors(url: str | None):
    """Turn 'cannot connect' driver errors into one line naming the database (password hidden)."""
    from contextlib import contextmanager

    from sqlalchemy.exc import InterfaceError, OperationalError

    from db.engine import DatabaseConfigError, database_url

    @contextmanager
    def guard():
        try:
            yield
        except (OperationalError, InterfaceError) as exc:
            from sqlalchemy.engine import make_url

            shown = make_url(database_url(url)).render_as_string(hide_password=True)
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc).splitlines()[0]
            raise DatabaseConfigError(f"database {shown}: {reason}") from None

    return guard()


def ensure_schema(url: str | None = None) -> None:
    """Create the schema on a brand-new database; refuse (with the fix) when an existing one is out of date."""
    from sqlalchemy import inspect

    from db.engine import make_db_engine
    from db.migrate import require_current, upgrade

    engine = make_db_engine(url)
    try:
        empty = not inspect(engine).get_table_names()
    finally:
        engine.dispose()
    if empty:
        upgrade(url)
    require_current(url)


@user_errors
def cli_import_log(
    files: Annotated[
        list[Path], typer.Argument(help="flight logs: DJI SRT/CSV, PX4 ULog, MAVLink tlog, ArduPilot BIN, GPX")
    ],
    flight: Annotated[
        Optional[int], typer.Option(help="attach the log to this existing flight (one file only)")
    ] = None,
    device: Annotated[
        Optional[str], typer.Option(help="serial number of the aircraft (when the log does not name it)")
    ] = None,
    create_device: Annotated[
        bool, typer.Option("--create-device", help="register an unknown device instead of failing")
    ] = False,
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Import flight logs into the database: one flight each, with all telemetry samples (same file twice: no-op)."""
    from db.importer import import_flight_log_file

    if flight is not None and len(files) > 1:
        raise ValueError("--flight takes exactly one log file")
    with _connection_errors(database_url):
        ensure_schema(database_url)
    failed = incomplete = 0
    for path in files:
        try:
            with _connection_errors(database_url):
                result = import_flight_log_file(
                    database_url,
                    path,
                    device_serial=device,
                    flight_id=flight,
                    create_device=create_device,
                    progress=not quiet,
                )
        except ValueError as exc:
            typer.echo(f"airpatrol: error: {exc}", err=True)
            failed += 1
            continue
        if result.created:
            typer.echo(f"{path}: flight {result.flight_id}, {result.samples} samples, {result.status}")
        else:
            typer.echo(f"{path}: already imported as flight {result.flight_id} (same checksum), nothing added")
        if result.status.startswith("partial"):  # damaged log: imported up to the damage, never silently
            typer.echo(
                f"airpatrol: warning: {path}: log INCOMPLETE, only the samples before the damage were "
                f"imported ({result.status.removeprefix('partial: ')})",
                err=True,
            )
            incomplete += 1
    if failed:
        raise typer.Exit(EXIT_USER_ERROR)
    if incomplete:
        raise typer.Exit(EXIT_INCOMPLETE)


@user_errors
def cli_db_upgrade(
    revision: Annotated[str, typer.Argument(help="target schema revision")] = "head",
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
    data_dir: Annotated[
        Optional[Path],
        typer.Option(
            help="data folder whose counting_lines.json / stream_calibrations.json are imported "
            "(default: AIRPATROL_DATA_DIR or the user's data folder)"
        ),
    ] = None,
) -> None:
    """Create or migrate the database schema (Alembic) to the latest revision; counting lines and stream
    calibrations still in JSON files of the data folder are then moved into the database (once)."""
    from sqlalchemy.engine import make_url

    from db.engine import database_url as resolve
    from db.engine import default_data_dir
    from db.json_import import import_data_folder
    from db.migrate import upgrade

    with _connection_errors(database_url):
        rev = upgrade(database_url, revision)
        moved = import_data_folder(database_url, data_dir or default_data_dir(), log_messages=False)
    typer.echo(f"{make_url(resolve(database_url)).render_as_string(hide_password=True)}: schema at revision {rev}")
    for line in moved:
        typer.echo(line)


@user_errors
def cli_db_backup(
    file: Annotated[
        Path, typer.Argument(help="backup file to write (SQLite: a database file; MariaDB: SQL, .gz to compress)")
    ],
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
) -> None:
    """Back up the whole database (consistent while the service runs; MariaDB via mariadb-dump)."""
    from db.backup import backup

    with _connection_errors(database_url):
        path = backup(database_url, file)
    typer.echo(f"{path}: backup written ({path.stat().st_size / 1e6:.1f} MB)")


@user_errors
def cli_db_restore(
    file: Annotated[Path, typer.Argument(help="a file written by `airpatrol db backup`")],
    yes: Annotated[bool, typer.Option("--yes", help="confirm: everything now in the database is replaced")] = False,
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
) -> None:
    """Replace the database's whole content by a backup (stop the service first), then bring it to the current schema."""
    from sqlalchemy.engine import make_url

    from db.backup import restore
    from db.engine import database_url as resolve
    from db.migrate import upgrade

    shown = make_url(resolve(database_url)).render_as_string(hide_password=True)
    if not yes:
        raise ValueError(f"restoring {file} replaces everything in {shown}; add --yes to confirm")
    with _connection_errors(database_url):
        restore(database_url, file)
        rev = upgrade(database_url)
    typer.echo(f"{shown}: restored from {file}, schema at revision {rev}")


@user_errors
def cli_import_run(
    run_dir: Annotated[
        Path, typer.Argument(help="output folder of `airpatrol process` (summary.json, tracks.csv, ...)")
    ],
    flight: Annotated[Optional[int], typer.Option(help="attach the run to this existing flight")] = None,
    device: Annotated[
        Optional[str], typer.Option(help="serial of the aircraft when the run's flight log does not name it")
    ] = None,
    speed_limit: Annotated[Optional[float], typer.Option(help="km/h; faster vehicles become violations")] = None,
    task_round: Annotated[
        Optional[int], typer.Option(help="task round the run belongs to (its task's limit applies)")
    ] = None,
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    no_orthophoto: Annotated[
        bool, typer.Option("--no-orthophoto", help="do not project the video onto the ground for the map")
    ] = False,
) -> None:
    """Store a processed run in the database so the dashboard shows it (map, runs, exports)."""
    from db.cli import _connection_errors, ensure_schema
    from db.run_import import import_run_dir
    from db.vehicles import MIN_VEHICLE_S

    with _connection_errors(database_url):
        ensure_schema(database_url)
        result = import_run_dir(
            run_dir,
            database_url,
            flight_id=flight,
            device_serial=device,
            speed_limit_kmh=speed_limit,
            task_round_id=task_round,
            progress=not quiet,
            orthophoto=not no_orthophoto,
        )
    typer.echo(
        f"{run_dir}: run {result.run_id}, {result.tracks} vehicles, {result.violations} violations"
        + (f", flight {result.flight_id}" if result.flight_id else "")
        + (
            f" ({result.fragments} track fragments shorter than {MIN_VEHICLE_S:g} s not counted)"
            if result.fragments
            else ""
        )
    )
    if result.orthophoto:
        typer.echo(f"{run_dir}: {result.orthophoto}")
    if result.violations:
        typer.echo(
            f"{run_dir}: {result.snapshots} violation snapshots and {result.clips} clips in {run_dir / 'evidence'}"
        )
