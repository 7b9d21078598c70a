"""One definition of a counted vehicle: import, runs list, run page, map and exports give the same number, and
short track fragments are left out of all of them."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from tests.dashboard.dash_helpers import make_run_dir, write_gpx


def test_every_page_and_export_counts_the_same_vehicles(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir
    from db.vehicles import MIN_VEHICLE_S

    gpx = write_gpx(tmp_path / "flight.gpx", datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc))
    # 5 movers + 1 parked car over 6 s (60 frames at 10 fps), fragments of 3 frames (0.2 s) and 8 frames (0.7 s),
    # and a vehicle that drove in during the last 0.4 s (still tracked when the video ends: it counts)
    run_dir = make_run_dir(tmp_path / "run", telemetry=gpx, fragments=(3, 8, (56, 4)))
    assert 0.7 < MIN_VEHICLE_S
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, device_serial="TEST-DRONE-1")
    assert (imported.tracks, imported.fragments) == (7, 2)
    # the pipeline's own per-track file keeps the 3-frame fragment: the database count is the one shown
    with open(run_dir / "tracks_summary.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 9
    # ... and counts vehicles by the same rule for `airpatrol process`'s summary line
    assert json.loads((run_dir / "summary.json").read_text())["counts"]["vehicles"] == 7

    c = client_for("viewer")
    listed = {r["run_id"]: r for r in c.get("/dashboard/api/runs").json()["runs"]}
    assert listed[imported.run_id]["tracks"] == 7
    assert re.search(r'<td class="num" data-k="tracks">7</td>', c.get("/dashboard/runs").text)

    page = c.get(f"/dashboard/runs/{imported.run_id}").text
    assert 'data-vehicles="7"' in page and "2 short track fragments not counted" in page
    assert len(re.findall(r'<tr class="clickable" data-track="\d+" data-t="[\d.]+" data-class=', page)) == 7

    layers = c.get(f"/dashboard/api/map?run_id={imported.run_id}").json()
    assert [r["vehicles"] for r in layers["runs"]] == [7]
    assert len(layers["trajectories"]["features"]) == 7

    geo = json.loads(c.get(f"/dashboard/runs/{imported.run_id}/export.geojson").text)
    assert len(geo["features"]) == 7
    rows = list(csv.DictReader(io.StringIO(c.get(f"/dashboard/runs/{imported.run_id}/export.csv").text)))
    assert len({r["track_no"] for r in rows}) == 7
    kml = ET.fromstring(c.get(f"/dashboard/runs/{imported.run_id}/export.kml").content)
    assert len(kml.findall(".//{http://www.opengis.net/kml/2.2}Placemark")) == 7


def test_import_run_cli_prints_the_counted_vehicles(tmp_path, db_url):
    from typer.testing import CliRunner

    from edge.cli import app

    run_dir = make_run_dir(tmp_path / "run", fragments=(4,))
    r = CliRunner().invoke(app, ["import-run", str(run_dir), "--database-url", db_url, "--quiet"])
    assert r.exit_code == 0, r.output
    assert "6 vehicles" in r.output and "1 track fragments shorter than 1 s not counted" in r.output
