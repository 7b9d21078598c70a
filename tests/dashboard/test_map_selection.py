"""The map opens on what was asked for (API side), and violation times say what the evidence supports."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from tests.dashboard.dash_helpers import make_run_dir, write_gpx

FAR = (52.52, 13.40)  # a second site ~500 km from the first


def _inside(bounds, lon, lat) -> bool:
    (s, w), (n, e) = bounds
    return s <= lat <= n and w <= lon <= e


def _coords(features):
    for f in features:
        c = f["geometry"]["coordinates"]
        yield from ([c] if f["geometry"]["type"] == "Point" else c)


def test_view_is_the_selected_run_or_the_latest(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    first = import_run_dir(make_run_dir(tmp_path / "a"), db_url, speed_limit_kmh=80.0)
    second = import_run_dir(make_run_dir(tmp_path / "b", origin=FAR), db_url, speed_limit_kmh=80.0)
    c = client_for("viewer")
    for run, other, query in (
        (first, second, f"?run_id={first.run_id}"),
        (second, first, f"?run_id={second.run_id}"),
        (second, first, ""),
    ):  # no filter: the latest run
        layers = c.get("/dashboard/api/map" + query).json()
        view = layers["view"]
        mine = [f for f in layers["trajectories"]["features"] if f["properties"]["run_id"] == run.run_id]
        assert len(mine) == 6
        assert all(_inside(view["bounds"], *p) for p in _coords(mine)), query
        (s, w), (n, e) = view["bounds"]
        assert n - s < 0.01 and e - w < 0.01, "the view is the run's few hundred metres, not the whole database"
        others = [f for f in layers["trajectories"]["features"] if f["properties"]["run_id"] == other.run_id]
        assert not any(_inside(view["bounds"], *p) for p in _coords(others))
        assert str(run.run_id) in view["what"]


def test_view_of_a_flight_holds_its_track_and_runs(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    gpx = write_gpx(tmp_path / "f.gpx", datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc))
    run = import_run_dir(make_run_dir(tmp_path / "a", telemetry=gpx), db_url, device_serial="D-1")
    import_run_dir(make_run_dir(tmp_path / "b", origin=FAR), db_url)
    layers = client_for("viewer").get(f"/dashboard/api/map?flight_id={run.flight_id}").json()
    pts = list(_coords(layers["flights"]["features"])) + list(
        _coords([f for f in layers["trajectories"]["features"] if f["properties"]["run_id"] == run.run_id])
    )
    assert pts and all(_inside(layers["view"]["bounds"], *p) for p in pts)


def test_map_page_offers_runs_and_flights_by_name(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    gpx = write_gpx(tmp_path / "f.gpx", datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc))
    run = import_run_dir(make_run_dir(tmp_path / "a", telemetry=gpx), db_url, device_serial="M3E-0042")
    page = client_for("viewer").get(f"/dashboard/map?run_id={run.run_id}").text
    assert re.search(
        rf'<option value="{run.run_id}" selected>#{run.run_id} · video.mp4 · \d{{4}}-\d\d-\d\d \d\d:\d\d · '
        r"AirPatrol</option>",
        page,
    )
    assert re.search(rf'<option value="{run.flight_id}" >M3E-0042 · 2024-05-01 10:00 · f.gpx</option>', page)


def test_violation_time_without_a_flight_log_is_the_video_time(tmp_path, db_url, client_for):
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import Violation
    from db.run_import import import_run_dir

    run = import_run_dir(make_run_dir(tmp_path / "a"), db_url, speed_limit_kmh=80.0)
    with session_scope(db_url) as s:
        rows = list(s.scalars(select(Violation).where(Violation.run_id == run.run_id)))
        assert len(rows) == 2 and all(v.occurred_at is None and v.time_is_estimate for v in rows)
    c = client_for("viewer")
    props = [f["properties"] for f in c.get(f"/dashboard/api/map?run_id={run.run_id}").json()["violations"]["features"]]
    assert len(props) == 2
    for p in props:
        assert re.fullmatch(r"video \d+\.\d s \(wall-clock unknown\)", p["when"]) and p["occurred_at"] is None
    page = c.get(f"/dashboard/runs/{run.run_id}").text
    assert page.count("(wall-clock unknown)") == 2


def test_violation_time_with_a_flight_log_is_the_flight_time(db_url, imported, client_for):
    props = [
        f["properties"]
        for f in client_for("viewer")
        .get(f"/dashboard/api/map?run_id={imported.run_id}")
        .json()["violations"]["features"]
    ]
    assert len(props) == 2
    for p in props:
        # GPX: UTC clock starting 2024-05-01 10:00:00; whole seconds, no microseconds
        assert re.fullmatch(r"2024-05-01 10:00:0\d UTC · video \d+\.\d s", p["when"]), p["when"]
        assert re.fullmatch(r"2024-05-01T10:00:0\d", p["occurred_at"])


def test_a_run_without_positions_says_so(tmp_path, db_url, client_for):
    import csv as _csv

    from db.run_import import import_run_dir

    run_dir = make_run_dir(tmp_path / "a")
    rows = list(_csv.DictReader(open(run_dir / "tracks.csv")))
    for r in rows:  # as processed without any scale: no lat/lon
        r["lat"] = r["lon"] = ""
    with open(run_dir / "tracks.csv", "w", newline="") as fh:
        w = _csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    run = import_run_dir(run_dir, db_url)
    view = client_for("viewer").get(f"/dashboard/api/map?run_id={run.run_id}").json()["view"]
    assert view["bounds"] is None and "has no map positions" in view["what"]
