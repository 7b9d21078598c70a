"""`airpatrol db backup` / `restore`: a round trip on SQLite and on a real MariaDB gives back every row."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import pytest
from sqlalchemy import Table, func, select
from typer.testing import CliRunner

from db.backup import BackupError, backup, restore
from db.engine import dispose_engines, session_scope
from db.migrate import current_revision, head_revision
from db.models import Device, Flight, ProcessingRun, TelemetrySampleRow
from db.service_models import JobRow

WHEN = datetime(2024, 5, 17, 10, 11, 12, 345678)


def _fill(url):
    with session_scope(url) as s:
        d = Device(serial="SN-ü-1", name="Drohne 🚁 Süd")
        s.add(d)
        s.flush()
        f = Flight(device_id=d.id, start_time=WHEN, home_lat=-35.363262123456, status="partial: line 13")
        s.add(f)
        s.flush()
        s.add_all(TelemetrySampleRow(flight_id=f.id, t_s=i * 0.1, lat=47.123456789) for i in range(500))
        s.add(
            ProcessingRun(
                status="complete",
                completeness="incomplete",
                losses_json=[{"input": "video", "frames": [123, 177], "t_s": [4.88, 7.04], "reason": "x"}],
            )
        )
        s.add(JobRow(video_upload_id="a" * 32, created_by="user:admin", params={"baseline": False}))


def _snapshot(url):
    with session_scope(url) as s:
        d = s.scalar(select(Device))
        f = s.scalar(select(Flight))
        run = s.scalar(select(ProcessingRun))
        return (
            d.serial,
            d.name,
            f.start_time,
            f.home_lat,
            f.status,
            s.scalar(select(func.count()).select_from(TelemetrySampleRow)),
            s.scalar(select(func.sum(TelemetrySampleRow.t_s))),
            run.completeness,
            run.losses_json,
            s.scalar(select(JobRow.params)),
        )


def _cli():
    import typer

    from db import cli as db_cli

    app = typer.Typer()
    db_app = typer.Typer()
    db_app.command("backup")(db_cli.cli_db_backup)
    db_app.command("restore")(db_cli.cli_db_restore)
    app.add_typer(db_app, name="db")
    app.command("noop")(lambda: None)
    return app


@pytest.mark.parametrize("suffix", [".bak", ".sql.gz"])
def test_round_trip(db_url, tmp_path, monkeypatch, suffix):
    if db_url.startswith("sqlite") and suffix == ".sql.gz":
        pytest.skip("compression applies to MariaDB dumps")
    _fill(db_url)
    before = _snapshot(db_url)
    assert before[0] == "SN-ü-1" and before[2] == WHEN and before[5] == 500
    monkeypatch.setenv("AIRPATROL_DATABASE_URL", db_url)
    runner, app = CliRunner(), _cli()
    file = tmp_path / f"airpatrol{suffix}"
    r = runner.invoke(app, ["db", "backup", str(file)])
    assert r.exit_code == 0, r.output
    assert "backup written" in r.output and file.stat().st_size > 1000
    assert runner.invoke(app, ["db", "backup", str(file)]).exit_code == 2  # never overwrites a backup

    with session_scope(db_url) as s:  # damage: rows deleted and changed after the backup
        s.execute(cast(Table, TelemetrySampleRow.__table__).delete().where(TelemetrySampleRow.t_s > 10))
        s.scalar(select(Device)).name = "changed"
    assert _snapshot(db_url) != before
    r = runner.invoke(app, ["db", "restore", str(file)])
    assert r.exit_code == 2 and "--yes" in r.output  # asks for confirmation, changes nothing
    r = runner.invoke(app, ["db", "restore", str(file), "--yes"])
    assert r.exit_code == 0, r.output
    dispose_engines()
    assert _snapshot(db_url) == before
    assert current_revision(db_url) == head_revision()


def test_refuses_wrong_files(db_url, tmp_path):
    junk = tmp_path / "junk.sql"
    junk.write_text("DROP DATABASE everything;\n")
    with pytest.raises(BackupError, match="not a"):
        restore(db_url, junk)
    with pytest.raises(BackupError, match="no such backup"):
        restore(db_url, tmp_path / "missing.bak")
    if db_url.startswith("sqlite"):
        other = tmp_path / "other.db"
        import sqlite3

        sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
        with pytest.raises(BackupError, match="not an AirPatrol database backup"):
            restore(db_url, other)
    else:
        with pytest.raises(BackupError, match="already exists"):
            backup(db_url, junk)
