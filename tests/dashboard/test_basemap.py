"""The operator's offline base map (PMTiles or MBTiles raster tiles), served by the app and drawn under the data."""

from __future__ import annotations

import math
import sqlite3

import cv2
import numpy as np
import pytest

from tests.dashboard.dash_helpers import ORIGIN, PASSWORDS, login

ZOOM = 16
GREEN = (40, 160, 60)  # BGR of every tile


def _tile_xy(lat: float, lon: float, z: int) -> tuple[int, int]:
    n = 2**z
    x = int((lon + 180) / 360 * n)
    y = int((1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n)
    return x, y


def _png(colour) -> bytes:
    img = np.empty((256, 256, 3), np.uint8)
    img[:] = colour
    return cv2.imencode(".png", img)[1].tobytes()


def _tiles():
    """3x3 tiles at ZOOM around the test road."""
    cx, cy = _tile_xy(*ORIGIN, ZOOM)
    return [(ZOOM, cx + dx, cy + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]


def write_pmtiles(path) -> None:
    from pmtiles.tile import Compression, TileType, zxy_to_tileid
    from pmtiles.writer import write

    with write(str(path)) as w:
        for tid in sorted(zxy_to_tileid(z, x, y) for z, x, y in _tiles()):
            w.write_tile(tid, _png(GREEN))
        w.finalize(
            {
                "tile_type": TileType.PNG,
                "tile_compression": Compression.NONE,
                "min_zoom": ZOOM,
                "max_zoom": ZOOM,
                "min_lon_e7": int((ORIGIN[1] - 0.01) * 1e7),
                "min_lat_e7": int((ORIGIN[0] - 0.01) * 1e7),
                "max_lon_e7": int((ORIGIN[1] + 0.01) * 1e7),
                "max_lat_e7": int((ORIGIN[0] + 0.01) * 1e7),
                "center_zoom": ZOOM,
            },
            {"attribution": "test tiles"},
        )


def write_mbtiles(path) -> None:
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE metadata (name text, value text); "
        "CREATE TABLE tiles (zoom_level integer, tile_column integer, tile_row integer, tile_data blob);"
    )
    con.executemany("INSERT INTO metadata VALUES (?, ?)", [("format", "png"), ("attribution", "test tiles")])
    con.executemany(
        "INSERT INTO tiles VALUES (?, ?, ?, ?)", [(z, x, 2**z - 1 - y, _png(GREEN)) for z, x, y in _tiles()]
    )
    con.commit()
    con.close()


@pytest.mark.parametrize("kind", ["pmtiles", "mbtiles"])
def test_offline_basemap_tiles_are_served(kind, tmp_path, settings, users):
    from fastapi.testclient import TestClient

    from dashboard.app import create_app

    path = tmp_path / f"region.{kind}"
    (write_pmtiles if kind == "pmtiles" else write_mbtiles)(path)
    with TestClient(create_app(settings.model_copy(update={"basemap_file": path}))) as c:
        login(c, "viewer", PASSWORDS["viewer"])
        z, x, y = _tiles()[4]
        r = c.get(f"/dashboard/basemap/{z}/{x}/{y}")
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        img = cv2.imdecode(np.frombuffer(r.content, np.uint8), cv2.IMREAD_COLOR)
        assert tuple(int(v) for v in img[128, 128]) == GREEN
        assert c.get(f"/dashboard/basemap/{z}/{x + 5}/{y}").status_code == 404  # outside the region
        page = c.get("/dashboard/map").text
        assert '"url": "/dashboard/basemap/{z}/{x}/{y}"' in page and '"attribution": "test tiles"' in page


def test_a_bad_basemap_file_is_reported_not_fatal(tmp_path, settings, users):
    from fastapi.testclient import TestClient

    from dashboard.app import create_app

    bad = tmp_path / "region.pmtiles"
    bad.write_bytes(b"not a tile archive at all")
    with TestClient(create_app(settings.model_copy(update={"basemap_file": bad}))) as c:
        login(c, "viewer", PASSWORDS["viewer"])
        page = c.get("/dashboard/map").text
        assert "Offline base map not used: " in page and "region.pmtiles: neither PMTiles nor MBTiles" in page
        assert c.get("/dashboard/basemap/16/1/1").status_code == 404


def test_the_map_draws_the_offline_basemap_under_the_run(tmp_path, template_db):
    import shutil

    from selenium.webdriver.common.by import By

    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from db.engine import dispose_engines
    from db.run_import import import_run_dir
    from tests.dashboard.browser import (
        browser_login,
        chromium,
        console_errors,
        require_browser,
        serve,
        wait_until,
    )
    from tests.dashboard.dash_helpers import make_run_dir

    require_browser()
    shutil.copyfile(template_db, tmp_path / "dash.db")
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    run = import_run_dir(make_run_dir(tmp_path / "run"), url)
    write_pmtiles(tmp_path / "region.pmtiles")
    app = create_app(
        DashboardSettings(
            database_url=url, data_dir=tmp_path / "data", secret_key="d" * 40, basemap_file=tmp_path / "region.pmtiles"
        )
    )
    try:
        with serve(app) as base, chromium(1200, 800) as d:
            browser_login(d, base, "viewer", PASSWORDS["viewer"])
            d.get(f"{base}/dashboard/map?run_id={run.run_id}")
            wait_until(d, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map")
            wait_until(
                d,
                lambda d: d.execute_script(
                    "return [...document.querySelectorAll('img.leaflet-tile.leaflet-tile-loaded')]"
                    ".filter((i) => i.src.includes('/dashboard/basemap/16/') && i.naturalWidth === 256).length"
                ),
                what="offline base-map tiles",
            )
            labels = " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, ".leaflet-control-layers-base label"))
            assert "Offline map" in labels and "Plain background" in labels
            assert not console_errors(d)
    finally:
        dispose_engines()
