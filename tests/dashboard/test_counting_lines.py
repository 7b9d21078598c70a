"""Counting lines and zones of a site: stored in the data folder, counted with supervision on the stored ground-plane
trajectories; the expected counts come from the run's own per-frame positions with plain segment geometry here."""

from __future__ import annotations

import csv
import io
import math
from collections import Counter

import pytest
from sqlalchemy import select

from tests.dashboard.dash_helpers import _metres_to_latlon, csrf_of, make_run_dir


def _positions(db_url, run_id) -> dict[int, list[tuple[float, float, float]]]:
    """track_no -> [(t, lon, lat)] per frame, straight from the database (every track of the run)."""
    from db.engine import session_scope
    from db.models import TrackRow, TrackSpeed

    out: dict[int, list] = {}
    with session_scope(db_url) as s:
        for no, t, lon, lat in s.execute(
            select(TrackRow.track_no, TrackSpeed.t_s, TrackSpeed.lon, TrackSpeed.lat)
            .join(TrackRow, TrackRow.id == TrackSpeed.track_id)
            .where(TrackRow.run_id == run_id)
            .order_by(TrackSpeed.frame)
        ):
            if lat is not None:
                out.setdefault(no, []).append((t, lon, lat))
    return out


def expected_line_counts(positions, a_lonlat, b_lonlat) -> Counter:
    """Crossings of segment A-B by consecutive positions, by the compass side crossed to (independent geometry)."""
    lat0 = a_lonlat[1]
    kx, ky = 111_320.0 * math.cos(math.radians(lat0)), 111_320.0

    def xy(lon, lat):
        return ((lon - a_lonlat[0]) * kx, (lat - a_lonlat[1]) * ky)

    a, b = xy(*a_lonlat), xy(*b_lonlat)

    def side(p):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])

    got: Counter[str] = Counter()
    for pts in positions.values():
        for (_, lo0, la0), (_, lo1, la1) in zip(pts, pts[1:]):
            p, q = xy(lo0, la0), xy(lo1, la1)
            if side(p) * side(q) < 0:
                # where along A-B the move crosses it: inside the segment?
                s = side(p) / (side(p) - side(q))
                cx, cy = p[0] + s * (q[0] - p[0]), p[1] + s * (q[1] - p[1])
                along = ((cx - a[0]) * (b[0] - a[0]) + (cy - a[1]) * (b[1] - a[1])) / (
                    (b[0] - a[0]) ** 2 + (b[1] - a[1]) ** 2
                )
                if 0 <= along <= 1:
                    heading = math.degrees(math.atan2(q[0] - p[0], q[1] - p[1])) % 360
                    got[("northbound", "eastbound", "southbound", "westbound")[int(((heading + 45) % 360) // 90)]] += 1
    return got


def _import(tmp_path, db_url):
    from db.run_import import import_run_dir

    # five vehicles driving east at 30 ... 120 km/h in lanes 0, 4, ... 16 m north, one parked car (20 m north)
    return import_run_dir(
        make_run_dir(tmp_path / "run", fragments=(4,)), db_url, speed_limit_kmh=80.0, orthophoto=False
    )


def _lonlat(east, north):
    lat, lon = _metres_to_latlon(east, north)
    return [lon, lat]


def test_a_line_counts_the_vehicles_that_cross_it(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url)
    a, b = _lonlat(0.0, 2.0), _lonlat(0.0, 14.0)  # across the lanes at 4, 8 and 12 m only, drawn northward
    want = expected_line_counts(_positions(db_url, imported.run_id), a, b)
    assert sum(want.values()) >= 2  # the test road really crosses the line

    op = client_for("operator")
    r = op.post(
        f"/dashboard/api/runs/{imported.run_id}/counting-lines",
        headers={"X-CSRF-Token": csrf_of(op)},
        json={"kind": "line", "name": "gate", "coordinates": [a, b]},
    )
    assert r.status_code == 201, r.text
    data = client_for("viewer").get(f"/dashboard/api/runs/{imported.run_id}/counting").json()
    assert data["site"] == f"run:{imported.run_id}" and data["can_edit"] is False
    (line,) = data["lines"]
    got: Counter[str] = Counter()
    for row in line["rows"]:
        got[row["direction"]] += row["vehicles"]
    assert got == want
    assert line["total"] == sum(want.values())
    assert sum(sum(ys) for ys in line["series"].values()) == line["total"]
    assert line["figure"]["data"]
    # a violator (95 km/h > 80) crosses, with its speed near the crossing
    assert sum(r["violations"] for r in line["rows"]) >= 1
    assert all(r["mean_speed_kmh"] is not None for r in line["rows"])

    # the map page shows the site's lines too
    (feature,) = op.get(f"/dashboard/api/map?run_id={imported.run_id}").json()["counting_lines"]["features"]
    assert feature["properties"]["name"] == "gate" and feature["geometry"]["coordinates"] == [a, b]

    rows = list(csv.reader(io.StringIO(op.get(f"/dashboard/runs/{imported.run_id}/export.lines").text)))
    assert rows[0][:5] == ["line", "kind", "direction", "class", "vehicles"]
    events = rows[[i for i, r in enumerate(rows) if r[:3] == ["line", "kind", "vehicle"]][0] + 1 :]
    assert len(events) == line["total"]


def test_a_zone_counts_the_vehicles_found_inside(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url)
    box = [(10.0, -2.0), (30.0, -2.0), (30.0, 10.0), (10.0, 10.0)]  # lanes 0, 4, 8 m; 10 to 30 m east
    positions = _positions(db_url, imported.run_id)
    kx, ky = 111_320.0 * math.cos(math.radians(48.137)), 111_320.0
    lon0, lat0 = _lonlat(0.0, 0.0)
    inside = {
        no
        for no, pts in positions.items()
        if any(10 <= (lo - lon0) * kx <= 30 and -2 <= (la - lat0) * ky <= 10 for _, lo, la in pts)
    }
    # fragments (shorter than 1 s) are not counted vehicles: the fragment drives at 6 m south, outside the box
    op = client_for("operator")
    r = op.post(
        f"/dashboard/api/runs/{imported.run_id}/counting-lines",
        headers={"X-CSRF-Token": csrf_of(op)},
        json={"kind": "zone", "name": "box", "coordinates": [_lonlat(*p) for p in box]},
    )
    assert r.status_code == 201, r.text
    (zone,) = op.get(f"/dashboard/api/runs/{imported.run_id}/counting").json()["lines"]
    assert zone["total"] == len(inside) >= 1
    assert {row["direction"] for row in zone["rows"]} == {"eastbound"}

    # deleted: gone from the site
    r = op.post(
        f"/dashboard/api/runs/{imported.run_id}/counting-lines/{zone['id']}/delete",
        headers={"X-CSRF-Token": csrf_of(op)},
    )
    assert r.status_code == 200
    assert op.get(f"/dashboard/api/runs/{imported.run_id}/counting").json()["lines"] == []


@pytest.mark.parametrize(
    "body,why",
    [
        ({"kind": "line", "coordinates": [[11.5, 48.1]]}, "exactly 2"),
        ({"kind": "zone", "coordinates": [[11.5, 48.1], [11.6, 48.1]]}, "3 to"),
        ({"kind": "circle", "coordinates": []}, "kind"),
        ({"kind": "line", "coordinates": [[11.5, 148.1], [11.6, 48.1]]}, "latitude"),
        ({"kind": "line", "coordinates": "nope"}, "pairs"),
    ],
)
def test_bad_lines_are_refused_with_the_reason(tmp_path, db_url, client_for, body, why):
    imported = _import(tmp_path, db_url)
    op = client_for("operator")
    r = op.post(
        f"/dashboard/api/runs/{imported.run_id}/counting-lines", headers={"X-CSRF-Token": csrf_of(op)}, json=body
    )
    assert r.status_code == 422 and why in r.text


def test_viewers_cannot_draw_and_csrf_is_required(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url)
    line = {"kind": "line", "coordinates": [_lonlat(0, 0), _lonlat(0, 10)]}
    viewer = client_for("viewer")
    assert (
        viewer.post(
            f"/dashboard/api/runs/{imported.run_id}/counting-lines",
            headers={"X-CSRF-Token": csrf_of(viewer)},
            json=line,
        ).status_code
        == 403
    )
    op = client_for("operator")
    assert op.post(f"/dashboard/api/runs/{imported.run_id}/counting-lines", json=line).status_code in (400, 403)


def test_lines_are_kept_per_task_in_the_database(db_url):
    """Lines are rows: a task's lines are seen from each of its runs and from any other session (another dashboard
    process or host), a run's own lines only from it; deleting the task deletes its lines."""
    from dashboard import counting_store
    from db.engine import session_scope
    from db.models import CountingLine, ProcessingRun, Task

    with session_scope(db_url) as s:
        task, run_a, run_b = Task(name="gate"), ProcessingRun(status="complete"), ProcessingRun(status="complete")
        s.add_all([task, run_a, run_b])
        s.flush()
        key_a, key_b = counting_store.site_key(task.id, run_a.id), counting_store.site_key(task.id, run_b.id)
        assert key_a == key_b == f"task:{task.id}"
        run_key = counting_store.site_key(None, run_a.id)
        assert run_key == f"run:{run_a.id}"
        line = counting_store.add_line(s, key_a, {"kind": "line", "coordinates": [[1, 2], [1, 3]]}, "op")
        zone = counting_store.add_line(
            s, run_key, {"kind": "zone", "name": "yard", "coordinates": [[1, 2], [1, 3], [2, 3]]}, "op"
        )
        task_id = task.id
    with session_scope(db_url) as s:
        assert counting_store.site_lines(s, key_b) == [line]
        assert counting_store.site_lines(s, run_key) == [zone]
        assert zone["coordinates"] == [[1, 2], [1, 3], [2, 3]] and zone["created_by"] == "op"
        assert counting_store.site_lines(s, counting_store.site_key(None, run_b.id)) == []
        assert not counting_store.delete_line(s, key_a, zone["id"])  # not a line of that site
        assert counting_store.delete_line(s, run_key, zone["id"])
    with session_scope(db_url) as s:
        assert counting_store.site_lines(s, run_key) == []
        s.delete(s.get(Task, task_id))
    with session_scope(db_url) as s:
        assert s.scalars(select(CountingLine)).all() == []


def test_a_run_without_map_positions_says_so(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    run_dir = make_run_dir(tmp_path / "run")
    # strip the positions: what a run without telemetry or georeferenced calibration has
    text = (run_dir / "tracks.csv").read_text().splitlines()
    head = text[0].split(",")
    cols = [i for i, h in enumerate(head) if h in ("lat", "lon")]
    rows = [",".join("" if i in cols else v for i, v in enumerate(line.split(","))) for line in text[1:]]
    (run_dir / "tracks.csv").write_text("\n".join([text[0], *rows]) + "\n")
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, orthophoto=False)
    op = client_for("operator")
    assert (
        op.post(
            f"/dashboard/api/runs/{imported.run_id}/counting-lines",
            headers={"X-CSRF-Token": csrf_of(op)},
            json={"kind": "line", "coordinates": [_lonlat(0, 2), _lonlat(0, 14)]},
        ).status_code
        == 201
    )
    data = op.get(f"/dashboard/api/runs/{imported.run_id}/counting").json()
    assert data["positions"] is False and data["lines"][0]["total"] == 0
