"""Traffic counts per direction and class, over time, on the run page and as CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.dashboard.dash_helpers import make_run_dir


@pytest.mark.parametrize(
    "d_lon,d_lat,want",
    [
        (0, 0.001, "northbound"),
        (0.001, 0, "eastbound"),
        (0, -0.001, "southbound"),
        (-0.001, 0, "westbound"),
        (0.00002, 0.00001, "unknown"),
    ],
)
def test_direction_of_travel(d_lon, d_lat, want):
    from dashboard.counts import direction

    path = json.dumps(
        {
            "type": "LineString",
            "coordinates": [[11.5, 48.1], [11.5 + d_lon / 2, 48.1 + d_lat / 2], [11.5 + d_lon, 48.1 + d_lat]],
        }
    )
    assert direction(path) == want
    assert direction(path, moving=False) == "parked"
    assert direction(None) == "no position"


def test_run_counts_on_the_page_and_in_the_export(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    # five vehicles driving east at 30 ... 120 km/h (cars and trucks alternating), one parked car, a fragment
    imported = import_run_dir(make_run_dir(tmp_path / "run", fragments=(4,)), db_url, speed_limit_kmh=80.0)
    c = client_for("viewer")
    rows = list(csv.reader(io.StringIO(c.get(f"/dashboard/runs/{imported.run_id}/export.counts").text)))
    header, table = rows[0], rows[1 : rows.index([])]
    got = {(r[0], r[1]): (int(r[2]), r[3], int(r[4])) for r in table}
    assert header == ["direction", "class", "vehicles", "mean_speed_kmh", "violations"]
    assert got == {
        ("eastbound", "car"): (3, "75.0", 1),  # 30, 75, 120 km/h
        ("eastbound", "truck"): (2, "75.0", 1),  # 55, 95 km/h
        ("parked", "truck"): (1, "", 0),
    }
    assert sum(v[0] for v in got.values()) == imported.tracks == 6  # the counted vehicles, no fragment
    bins = rows[rows.index([]) + 1 :]
    assert bins[0] == ["bin_start_s", "eastbound", "parked"] and bins[1] == ["0.0", "5", "1"]
    page = c.get(f"/dashboard/runs/{imported.run_id}").text
    assert 'id="counts-table"' in page and 'id="counts-figure"' in page and "eastbound" in page
