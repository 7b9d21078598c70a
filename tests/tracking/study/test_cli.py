"""`airpatrol study RUN_DIR`: CSVs and GeoJSON from a run folder; bad input is one line and exit code 2."""

import csv
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from edge.cli import app

COLUMNS = [
    "frame",
    "t",
    "track_id",
    "class",
    "x1",
    "y1",
    "x2",
    "y2",
    "score",
    "moving",
    "speed_kmh",
    "ground_x_m",
    "ground_y_m",
    "lat",
    "lon",
]


def write_run(folder, trajs, ground=True):
    """A run folder as `airpatrol process` writes it (the columns the study reads, and a few others)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for tr in trajs:
        for t, (x, y) in zip(tr.t, tr.xy):
            rows.append(
                [
                    int(round(t * 10)) + 1,
                    f"{t:.4f}",
                    tr.track_id,
                    tr.vehicle_class,
                    0,
                    0,
                    1,
                    1,
                    0.9,
                    1,
                    "",
                    f"{x:.2f}" if ground else "",
                    f"{y:.2f}" if ground else "",
                    "",
                    "",
                ]
            )
    rows.sort(key=lambda r: (r[0], r[2]))
    with open(folder / "tracks.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        w.writerows(rows)
    return folder


def test_study_command_writes_tables_and_geojson(junction, tmp_path):
    trajs, _ = junction
    run = write_run(tmp_path / "run", trajs)
    out = tmp_path / "study"
    r = CliRunner().invoke(app, ["study", str(run), "--bin", "1m", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "4 approaches" in r.output and f"{len(trajs)} vehicles" in r.output
    with open(out / "turning_movements.csv") as fh:
        rows = list(csv.DictReader(fh))
    last = max(float(r["bin_start_s"]) for r in rows)
    assert {
        round(float(r["bin_end_s"]) - float(r["bin_start_s"]), 2) for r in rows if float(r["bin_start_s"]) < last
    } == {60.0}
    assert sum(int(r["count"]) for r in rows) == len(trajs)
    # the approaches written can be read back and edited: a study with them gives the same vehicles
    geo = json.loads((out / "study.geojson").read_text())
    approaches = {
        "type": "FeatureCollection",
        "features": [f for f in geo["features"] if f["properties"]["kind"] == "approach"],
    }
    (tmp_path / "approaches.geojson").write_text(json.dumps(approaches))
    r2 = CliRunner().invoke(
        app, ["study", str(run), "--approaches", str(tmp_path / "approaches.geojson"), "--out", str(tmp_path / "again")]
    )
    assert r2.exit_code == 0, r2.output
    assert (tmp_path / "again" / "vehicles.csv").read_text() == (out / "vehicles.csv").read_text()


def _airpatrol(*args, cwd):
    env = dict(os.environ, YOLO_OFFLINE="1", PYTHONPATH=os.getcwd())
    return subprocess.run(
        [sys.executable, "-m", "edge.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def _one_error_line(r, *needles):
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("airpatrol: error:"), r.stderr
    for n in needles:
        assert n in lines[0]


def test_run_without_ground_coordinates_is_one_line(junction, tmp_path):
    trajs, _ = junction
    run = write_run(tmp_path / "nogeo", trajs, ground=False)
    _one_error_line(_airpatrol("study", str(run), cwd=tmp_path), "tracks.csv", "no ground coordinates")
    assert not (run / "study").exists()


@pytest.mark.parametrize(
    ("setup", "args", "needles"),
    [
        ("none", [], ["not a folder"]),
        ("empty", [], ["tracks.csv", "missing"]),
        ("run", ["--bin", "15x"], ["--bin"]),
        ("run", ["--approaches", "far.json"], ["far.json", "outside the area the flight observed"]),
        ("run", ["--approaches", "broken.json"], ["broken.json", "cannot parse"]),
    ],
)
def test_bad_inputs_are_one_line(junction, tmp_path, setup, args, needles):
    trajs, _ = junction
    run = tmp_path / "run"
    if setup == "empty":
        run.mkdir()
    elif setup == "run":
        write_run(run, trajs)
    (tmp_path / "far.json").write_text(json.dumps([{"id": "A", "x_m": 800, "y_m": 800, "heading_deg": 90}]))
    (tmp_path / "broken.json").write_text("{not json")
    r = CliRunner().invoke(app, ["study", str(run), *[str(tmp_path / a) if a.endswith(".json") else a for a in args]])
    assert r.exit_code == 2
    assert r.exception is None or isinstance(r.exception, SystemExit)
    text = r.output.strip().splitlines()
    assert len(text) == 1 and text[0].startswith("airpatrol: error:")
    for n in needles:
        assert n in text[0]
