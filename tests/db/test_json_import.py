"""`airpatrol db upgrade` moves the JSON files of before revision 0004 (counting lines, stream calibrations) into
the database once, says so, and renames them; entries of sites or streams this database does not have are counted
as skipped."""

from __future__ import annotations

import json

from sqlalchemy import select
from typer.testing import CliRunner

from db import counting
from db.engine import session_scope
from db.json_import import import_data_folder
from db.models import CountingLine, ProcessingRun, Task
from db.service_models import StreamRow


def _cli():
    import typer

    from db import cli as db_cli

    app = typer.Typer()
    db_app = typer.Typer()
    db_app.command("upgrade")(db_cli.cli_db_upgrade)
    app.add_typer(db_app, name="db")
    app.command("noop")(lambda: None)
    return app


def test_upgrade_imports_the_json_files_once(db_url, tmp_path):
    with session_scope(db_url) as s:
        task, run = Task(name="gate"), ProcessingRun(status="complete")
        stream, other = (
            StreamRow(name="cam", kind="push", created_by="user:op"),
            StreamRow(name="cam2", kind="push", created_by="user:op"),
        )
        s.add_all([task, run, stream, other])
        s.flush()
        task_id, run_id, stream_id, other_id = task.id, run.id, stream.id, other.id
    lines = {
        f"task:{task_id}": [
            {
                "id": "a1b2c3d4e5f6",
                "name": "north gate",
                "kind": "line",
                "coordinates": [[8.54, 47.38], [8.541, 47.38]],
                "created_by": "operator",
                "created_at": "2026-11-20T10:11:12+00:00",
            }
        ],
        f"run:{run_id}": [
            {"id": "0f0f0f0f0f0f", "name": "yard", "kind": "zone", "coordinates": [[1, 2], [1, 3], [2, 3]]},
            {"id": "broken", "kind": "line"},  # no coordinates: skipped, counted
        ],
        "task:999999": [{"id": "ffffffffffff", "name": "x", "kind": "line", "coordinates": [[0, 0], [1, 1]]}],
    }
    calibrations = {str(stream_id): {"metres_per_pixel": 0.05}, "999999": {"metres_per_pixel": 0.1}}
    data = tmp_path / "data"
    data.mkdir()
    (data / "counting_lines.json").write_text(json.dumps(lines), encoding="utf-8")
    (data / "stream_calibrations.json").write_text(json.dumps(calibrations), encoding="utf-8")

    r = CliRunner().invoke(_cli(), ["db", "upgrade", "--database-url", db_url, "--data-dir", str(data)])
    assert r.exit_code == 0, r.output
    assert "imported 2 counting lines and zones into the database" in r.output
    assert "1 (task 999999 not in the database)" in r.output and "1 (not a line or zone)" in r.output
    assert "imported the calibrations of 1 streams" in r.output and "stream 999999 not in the database" in r.output
    assert sorted(p.name for p in data.iterdir()) == [
        "counting_lines.json.imported",
        "stream_calibrations.json.imported",
    ]

    with session_scope(db_url) as s:
        assert counting.site_lines(s, task_id, None) == [
            {
                "id": "a1b2c3d4e5f6",
                "name": "north gate",
                "kind": "line",
                "coordinates": [[8.54, 47.38], [8.541, 47.38]],
                "created_by": "operator",
                "created_at": "2026-11-20T10:11:12+00:00",
            }
        ]
        zone = counting.site_lines(s, None, run_id)
        assert [(z["id"], z["kind"], z["coordinates"]) for z in zone] == [
            ("0f0f0f0f0f0f", "zone", [[1, 2], [1, 3], [2, 3]])
        ]
        assert s.get(StreamRow, stream_id).calibration_json == {"metres_per_pixel": 0.05}
        assert s.get(StreamRow, other_id).calibration_json is None

    # never twice: nothing left to import, and a file put back adds nothing already there
    r = CliRunner().invoke(_cli(), ["db", "upgrade", "--database-url", db_url, "--data-dir", str(data)])
    assert r.exit_code == 0 and "imported" not in r.output, r.output
    (data / "counting_lines.json").write_text(json.dumps(lines), encoding="utf-8")
    (msg,) = import_data_folder(db_url, data)
    assert "imported 0 counting lines" in msg and "2 were there already" in msg
    assert (data / "counting_lines.json.imported.2").is_file()
    with session_scope(db_url) as s:
        assert len(s.scalars(select(CountingLine)).all()) == 2


def test_an_unreadable_file_is_named_and_kept(db_url, tmp_path):
    (tmp_path / "counting_lines.json").write_text("{broken", encoding="utf-8")
    (msg,) = import_data_folder(db_url, tmp_path)
    assert msg.startswith(str(tmp_path / "counting_lines.json")) and "not a readable JSON file" in msg
    assert (tmp_path / "counting_lines.json").is_file()
