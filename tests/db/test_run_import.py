"""Importing a processed run folder (`db.run_import`, `airpatrol import-run`), on SQLite and on MariaDB.

The run folder is the dashboard tests' one, written by the pipeline's own file sinks (tests/dashboard/dash_helpers.py).
"""

from __future__ import annotations

import csv
from datetime import datetime, timezone

import pytest
import typer
from typer.testing import CliRunner

from tests.dashboard.dash_helpers import make_run_dir, write_gpx


@pytest.fixture
def run_dir(tmp_path):
    start = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)
    gpx = write_gpx(tmp_path / "flight.gpx", start)
    return make_run_dir(tmp_path / "run", telemetry=gpx)


@pytest.fixture
def imported(db_url, run_dir):
    from db.run_import import import_run_dir

    return import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, device_serial="TEST-DRONE-1")


@pytest.fixture
def sqlite_url(tmp_path):
    """A fresh database, so its first flight has id 1 (MariaDB keeps counting after the tables are emptied)."""
    from db.engine import dispose_engines
    from db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'import.db'}"
    upgrade(url)
    yield url
    dispose_engines()


@pytest.fixture
def cli():
    from db.cli import cli_import_run

    app = typer.Typer()
    app.command("import-run")(cli_import_run)
    app.command("unused")(lambda: None)  # two commands: typer then keeps the command name on the line
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_import_run_dir_stores_tracks_speeds_and_violations(db_url, run_dir, imported):
    from sqlalchemy import func, select

    from db.engine import session_scope
    from db.models import Flight, ProcessingRun, TrackRow, TrackSpeed, Violation

    with session_scope(db_url) as s:
        run = s.get(ProcessingRun, imported.run_id)
        assert run.status == "complete" and run.flight_id == imported.flight_id
        assert run.summary_json["output_dir"] == str(run_dir.resolve())
        rows = list(csv.DictReader(open(run_dir / "tracks.csv")))
        assert s.scalar(select(func.count()).select_from(TrackSpeed)) == len(rows)
        assert s.scalar(select(func.count()).select_from(TrackRow)) == imported.tracks == 6
        fast = {round(t.median_speed_kmh) for t in s.scalars(select(TrackRow).where(TrackRow.moving.is_(True)))}
        assert fast == {30, 55, 75, 95, 120}
        speeds = sorted(round(v.speed_kmh) for v in s.scalars(select(Violation)))
        assert speeds == [95, 120]  # limit 80 km/h
        flight = s.get(Flight, imported.flight_id)
        assert flight.sample_count == 13 and flight.device.serial == "TEST-DRONE-1"


def test_import_run_dir_rejects_bad_folders(tmp_path, db_url):
    from db.run_import import RunImportError, import_run_dir

    with pytest.raises(RunImportError, match="summary.json: missing"):
        import_run_dir(tmp_path, db_url)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(RunImportError, match="summary.json: cannot parse"):
        import_run_dir(tmp_path, db_url)


def test_reimport_supersedes_the_older_result(db_url, run_dir, imported):
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import ProcessingRun
    from db.run_import import import_run_dir

    again = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, device_serial="TEST-DRONE-1")
    assert again.flight_id == imported.flight_id  # same log (checksum): same flight, not a second one
    with session_scope(db_url) as s:
        states = dict(s.execute(select(ProcessingRun.id, ProcessingRun.status)).all())
    assert states == {imported.run_id: "superseded", again.run_id: "complete"}


def test_import_run_command(cli, sqlite_url, run_dir):
    r = cli("import-run", run_dir, "--speed-limit", "80", "--device", "CLI-DRONE", "--database-url", sqlite_url, "-q")
    assert r.exit_code == 0, r.output
    assert "6 vehicles, 2 violations, flight 1" in r.output
    r = cli("import-run", run_dir.parent, "--database-url", sqlite_url, "-q")
    assert r.exit_code == 2 and "summary.json: missing" in r.output


def _run_processed_in(folder, recorded: str):
    """A run as `airpatrol process clip/video.mp4 --out run` leaves it when run in ``folder``: ``folder/run`` and the
    video (a real one, with the road under the tracks) in ``folder/clip``; ``recorded``: how its summary records the
    video: ``old`` as given (relative to ``folder``, as runs did before), ``new`` as runs do now."""
    import json

    from vision.run_inputs import record

    run_dir = make_run_dir(folder / "run", video=True)
    (folder / "clip").mkdir()
    (run_dir / "video.mp4").rename(folder / "clip" / "video.mp4")
    summary = json.loads((run_dir / "summary.json").read_text())
    if recorded == "old":
        summary["source"] = summary["video"]["path"] = "clip/video.mp4"
    else:
        path, from_run = record(folder / "clip" / "video.mp4", run_dir)
        summary["video"].update(path=path, path_from_run=from_run)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


@pytest.mark.parametrize("recorded", ["old", "new"])
def test_import_run_from_another_folder_finds_the_video(cli, sqlite_url, tmp_path, monkeypatch, recorded):
    """`import-run ../a/run` from another folder: the run's video is found (an old run's path relative to where
    `process` ran; a new run's path relative to the run folder, after the whole tree moved), so the orthophoto and
    the violations' snapshots are made; the video's row is the same one whichever folder imported it."""
    import shutil

    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import ProcessingRun, Video

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    run_dir = _run_processed_in(tmp_path / "a", recorded)
    if recorded == "new":  # the absolute path recorded is stale now: only the one relative to the run folder is right
        shutil.move(tmp_path / "a", tmp_path / "moved")
        run_dir = tmp_path / "moved" / "run"
    monkeypatch.chdir(tmp_path / "b")
    rel = f"../{run_dir.parent.name}/run"
    r = cli("import-run", rel, "--speed-limit", "80", "--database-url", sqlite_url, "-q")
    assert r.exit_code == 0, r.output
    assert f"{rel}: orthophoto of " in r.output, r.output
    assert "2 violation snapshots" in r.output, r.output
    assert (run_dir / "ortho.png").is_file() and len(list((run_dir / "evidence").glob("*.jpg"))) == 2

    monkeypatch.chdir(run_dir.parent)  # where `process` ran: the same video, the same row, the older run superseded
    r = cli("import-run", "run", "--speed-limit", "80", "--database-url", sqlite_url, "-q")
    assert r.exit_code == 0 and "run: orthophoto kept" in r.output, r.output
    with session_scope(sqlite_url) as s:
        assert s.scalars(select(Video.file_path)).all() == [str((run_dir.parent / "clip" / "video.mp4").resolve())]
        assert s.scalars(select(ProcessingRun.status).order_by(ProcessingRun.id)).all() == ["superseded", "complete"]
