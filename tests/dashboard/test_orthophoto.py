"""The orthophoto: a run's own video projected to the ground lies under its tracks (the road under the cars)."""

from __future__ import annotations

import json

import cv2
import numpy as np

from tests.dashboard.dash_helpers import FIELD_BGR, ROAD_BGR, _metres_to_latlon, make_run_dir


def _pixel(ortho: np.ndarray, bounds, lon: float, lat: float) -> np.ndarray:
    (s, w), (n, e) = bounds
    h, wd = ortho.shape[:2]
    u, v = int((lon - w) / (e - w) * wd), int((n - lat) / (n - s) * h)
    return ortho[v, u]


def test_import_makes_an_orthophoto_with_the_road_under_the_tracks(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    run_dir = make_run_dir(tmp_path / "run", video=True)
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0)
    assert imported.orthophoto.startswith("orthophoto of ")
    meta = json.loads((run_dir / "ortho.json").read_text())
    ortho = cv2.imread(str(run_dir / "ortho.png"), cv2.IMREAD_UNCHANGED)
    assert ortho.shape[2] == 4 and meta["metres_per_pixel"] > 0
    # every lane (north 0 to 20 m) is road; 40 m north and 10 m south of it is the field
    for east in (-10.0, 20.0, 60.0):
        for north in (0.0, 8.0, 16.0, 20.0):
            px = _pixel(ortho, meta["bounds"], *reversed(_metres_to_latlon(east, north)))
            road = np.abs(px[:3].astype(int) - ROAD_BGR).max() <= 30
            assert px[3] == 255 and (road or px[:3].min() > 200), (east, north, px)  # road, or a car on it
        for north in (40.0, -10.0):
            px = _pixel(ortho, meta["bounds"], *reversed(_metres_to_latlon(east, north)))
            assert px[3] == 255 and np.abs(px[:3].astype(int) - FIELD_BGR).max() <= 30, (east, north, px)

    c = client_for("viewer")
    layers = c.get(f"/dashboard/api/map?run_id={imported.run_id}").json()
    assert [im["run_id"] for im in layers["imagery"]] == [imported.run_id]
    png = c.get(f"/dashboard/runs/{imported.run_id}/ortho.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    # every track point lies inside the imagery (the vehicles are in the frame all along)
    (s, w), (n, e) = layers["imagery"][0]["bounds"]
    points = [p for f in layers["trajectories"]["features"] for p in f["geometry"]["coordinates"]]
    assert len(points) > 30 and all(s <= lat <= n and w <= lon <= e for lon, lat in points)


def test_a_run_without_positions_or_video_is_imported_without_one(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    imported = import_run_dir(make_run_dir(tmp_path / "run"), db_url)  # no video file
    assert imported.orthophoto.startswith("no orthophoto: ") and "video" in imported.orthophoto
    assert not (tmp_path / "run" / "ortho.png").exists()
    c = client_for("viewer")
    assert c.get(f"/dashboard/api/map?run_id={imported.run_id}").json()["imagery"] == []
    assert c.get(f"/dashboard/runs/{imported.run_id}/ortho.png").status_code == 404


def test_an_operator_makes_them_later_from_the_run_page(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir
    from tests.dashboard.dash_helpers import csrf_of

    run_dir = make_run_dir(tmp_path / "run", video=True)
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, orthophoto=False)
    for f in (run_dir / "evidence").glob("*.jpg"):  # as if the run came from a service job without them
        f.unlink()
    viewer = client_for("viewer")
    assert 'id="make-artefacts"' not in viewer.get(f"/dashboard/runs/{imported.run_id}").text
    assert (
        viewer.post(f"/dashboard/runs/{imported.run_id}/artefacts", data={"csrf_token": csrf_of(viewer)}).status_code
        == 403
    )
    op = client_for("operator")
    assert 'id="make-artefacts"' in op.get(f"/dashboard/runs/{imported.run_id}").text
    r = op.post(f"/dashboard/runs/{imported.run_id}/artefacts", data={"csrf_token": csrf_of(op)}, follow_redirects=True)
    assert "orthophoto of " in r.text and "2 of 2 violation snapshots" in r.text
    assert (run_dir / "ortho.png").is_file() and len(list((run_dir / "evidence").glob("*.jpg"))) == 2
    assert 'id="make-artefacts"' not in op.get(f"/dashboard/runs/{imported.run_id}").text
