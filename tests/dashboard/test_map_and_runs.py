"""Map layers, run import, run pages and exports against a run folder written by the pipeline's own sinks."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from tests.dashboard.dash_helpers import make_run_dir


def _features(client, query: str = "") -> dict:
    r = client.get("/dashboard/api/map" + query)
    assert r.status_code == 200, r.text
    return r.json()


def test_map_layers(client_for, imported, run_dir):
    c = client_for("viewer")
    data = _features(c)
    geo = json.loads((run_dir / "trajectories.geojson").read_text())
    assert len(data["trajectories"]["features"]) == len(geo["features"]) == 6
    by_no = {f["properties"]["track_no"]: f for f in data["trajectories"]["features"]}
    for feat in geo["features"]:  # same vehicles, same places as the pipeline's own GeoJSON
        mine = by_no[feat["properties"]["track_id"]]
        assert mine["geometry"]["coordinates"][0] == pytest.approx(feat["geometry"]["coordinates"][0], abs=1e-6)
        known = [v for v in mine["properties"]["speeds_kmh"] if v is not None]
        if feat["properties"]["moving"]:
            assert known and max(known) == pytest.approx(feat["properties"]["max_speed_kmh"], abs=0.1)
    assert len(data["violations"]["features"]) == 2
    assert {f["properties"]["flight_id"] for f in data["flights"]["features"]} == {imported.flight_id}
    assert data["drones"]["features"][0]["properties"]["serial"] == "TEST-DRONE-1"


def test_map_filters(client_for, imported, db_url):
    from db.crud import create_device
    from db.engine import session_scope

    with session_scope(db_url) as s:
        other = create_device(s, "OTHER-1").id
    c = client_for("viewer")
    assert _features(c, "?start=2024-05-01T09:00&end=2024-05-01T11:00")["trajectories"]["features"]
    empty = _features(c, "?start=2024-06-01T00:00")
    assert (
        not empty["trajectories"]["features"]
        and not empty["violations"]["features"]
        and not empty["flights"]["features"]
    )
    assert not _features(c, f"?device_id={other}")["trajectories"]["features"]
    assert _features(c, f"?run_id={imported.run_id}")["runs"][0]["run_id"] == imported.run_id
    r = c.get("/dashboard/api/map?start=yesterday")
    assert r.status_code == 400 and "start" in r.json()["detail"]


def test_track_profile(client_for, imported):
    c = client_for("viewer")
    feat = max(_features(c)["trajectories"]["features"], key=lambda f: f["properties"]["max_speed_kmh"] or 0)
    r = c.get(f"/dashboard/api/tracks/{feat['properties']['track_id']}/profile")
    body = r.json()
    assert body["max_speed_kmh"] == pytest.approx(120.0) and body["limit_kmh"] == 80.0
    fig = json.loads(body["figure"])
    assert fig["data"][0]["type"] == "scatter" and len(fig["data"][0]["x"]) == 60
    assert c.get("/dashboard/api/tracks/999999/profile").status_code == 404


def test_run_pages(client_for, imported):
    c = client_for("viewer")
    page = c.get(f"/dashboard/runs/{imported.run_id}")
    assert page.status_code == 200
    assert "6 (5 moving, 1 parked)" in page.text and "histogram-figure" in page.text
    assert page.text.count('km/h</td><td class="num" data-v="80.0">80 km/h') == 2  # the two violations
    runs = c.get("/dashboard/api/runs").json()["runs"]
    assert runs[0]["run_id"] == imported.run_id and runs[0]["status"] == "complete" and runs[0]["progress"] == 1.0


def test_compare_with_baseline(client_for, imported, tmp_path, db_url):
    from db.run_import import import_run_dir

    base_dir = make_run_dir(tmp_path / "baseline", speeds_kmh=(28.0, 50.0))
    summary = json.loads((base_dir / "summary.json").read_text())
    summary["mode"] = "baseline"
    (base_dir / "summary.json").write_text(json.dumps(summary))
    base = import_run_dir(base_dir, db_url, import_telemetry=False)
    c = client_for("viewer")
    r = c.get(f"/dashboard/runs/{imported.run_id}/compare?other={base.run_id}")
    assert r.status_code == 200
    assert "dual_layer" in r.text and "baseline" in r.text
    fig = json.loads(json.loads(r.text.split('id="compare-figure">', 1)[1].split("</script>", 1)[0]))
    assert sorted(len(t["x"]) for t in fig["data"]) == [2, 5]  # moving vehicles of each run
    assert c.get(f"/dashboard/runs/{imported.run_id}/compare").status_code == 404  # no run of the same video


def test_run_exports(client_for, imported, run_dir):
    c = client_for("viewer")
    r = c.get(f"/dashboard/runs/{imported.run_id}/export.mot")
    assert r.status_code == 200 and r.text == (run_dir / "tracks_mot.txt").read_text()
    rows = list(csv.DictReader(io.StringIO(c.get(f"/dashboard/runs/{imported.run_id}/export.csv").text)))
    assert len(rows) == len(list(csv.DictReader(open(run_dir / "tracks.csv"))))
    gj = c.get(f"/dashboard/runs/{imported.run_id}/export.geojson").json()
    assert len(gj["features"]) == 6
    kml = ET.fromstring(c.get(f"/dashboard/runs/{imported.run_id}/export.kml").content)
    assert len(kml.findall(".//{http://www.opengis.net/kml/2.2}LineString")) == 6
    assert c.get(f"/dashboard/runs/{imported.run_id}/export.xyz").status_code == 404


def test_flight_exports(client_for, imported):
    import gpxpy

    c = client_for("viewer")
    base = f"/dashboard/flights/{imported.flight_id}/export"
    gpx = gpxpy.parse(c.get(base + ".gpx").text)
    points = gpx.tracks[0].segments[0].points
    assert len(points) == 13 and points[0].time is not None and points[0].elevation == pytest.approx(520)
    rows = list(csv.DictReader(io.StringIO(c.get(base + ".csv").text)))
    assert len(rows) == 13 and rows[0]["lat"]
    assert len(c.get(base + ".geojson").json()["features"][0]["geometry"]["coordinates"]) == 13
    kml = ET.fromstring(c.get(base + ".kml").content)
    coords = kml.find(".//{http://www.opengis.net/kml/2.2}coordinates").text.split()
    assert len(coords) == 13


def test_flight_page(client_for, imported):
    c = client_for("viewer")
    page = c.get(f"/dashboard/flights/{imported.flight_id}")
    assert page.status_code == 200
    fig = json.loads(json.loads(page.text.split('id="telemetry-figure">', 1)[1].split("</script>", 1)[0]))
    assert len(fig["data"]) == 3 and len(fig["data"][0]["x"]) == 13  # altitude, speed, battery panels
    assert f"/dashboard/runs/{imported.run_id}" in page.text
    listing = c.get("/dashboard/flights?q=TEST-DRONE").text
    assert f"/dashboard/flights/{imported.flight_id}" in listing
    assert f"/dashboard/flights/{imported.flight_id}" not in c.get("/dashboard/flights?q=nothing-like-this").text


def test_run_page_names_the_scale_and_states_the_violation_rule(client_for, tmp_path, db_url):
    from db.run_import import import_run_dir

    run = make_run_dir(tmp_path / "sized", speeds_kmh=(80.0, 90.0))
    summary = json.loads((run / "summary.json").read_text())
    summary["scale"] = {"source": "size_prior", "detail": "size_prior (nadir, 57 vehicles, segment 0, +-9 %)"}
    (run / "summary.json").write_text(json.dumps(summary))
    imported = import_run_dir(run, db_url, speed_limit_kmh=85.0)
    page = client_for("viewer").get(f"/dashboard/runs/{imported.run_id}").text
    assert "size_prior (nadir, 57 vehicles, segment 0, +-9 %)" in page and "vehicles' own sizes" in page
    assert "speed - 2 sigma &gt; limit for at least 1 s" in page
    # 90 +- 1.5 km/h: 87 km/h even at 2 sigma below, over 85; 80 km/h is not
    assert imported.violations == 1 and "90.0 ± 1.5 km/h" in page and "87.0 km/h" in page


def test_incomplete_run_badge_and_lost_ranges(client_for, db_url, tmp_path):
    """A run over a damaged video is marked on the runs list and its page says what was lost."""
    import json

    from db.run_import import import_run_dir
    from tests.dashboard.dash_helpers import make_run_dir

    folder = make_run_dir(tmp_path / "damaged")
    summary = json.loads((folder / "summary.json").read_text())
    summary.update(
        status="incomplete",
        losses=[
            {
                "input": "video",
                "frames": [41, 60],
                "t_s": [4.0, 5.9],
                "reason": "decoding ended early: 40 of 60 declared frames decoded",
            }
        ],
    )
    (folder / "summary.json").write_text(json.dumps(summary))
    damaged = import_run_dir(folder, db_url, import_telemetry=False)
    intact = import_run_dir(make_run_dir(tmp_path / "intact"), db_url, import_telemetry=False)
    c = client_for("viewer")
    page = c.get("/dashboard/runs").text
    row_of = {
        rid: page.split(f'data-run="{rid}"', 1)[1].split("</tr>", 1)[0] for rid in (damaged.run_id, intact.run_id)
    }
    assert "badge incomplete" in row_of[damaged.run_id] and "badge incomplete" not in row_of[intact.run_id]
    run_page = c.get(f"/dashboard/runs/{damaged.run_id}").text
    assert 'id="run-losses"' in run_page and "video frames 41-60 (4.0-5.9 s): decoding ended early" in run_page
    assert 'id="run-losses"' not in c.get(f"/dashboard/runs/{intact.run_id}").text
    api = {r["run_id"]: r for r in c.get("/dashboard/api/runs").json()["runs"]}
    assert api[damaged.run_id]["completeness"] == "incomplete" and api[intact.run_id]["completeness"] == "complete"
