"""In real headless Chromium: the map opens on the selected run, "Show on the map" zooms to it, the run page's
tables sort, filter and seek the video, and every page is usable at 1600 and 400 px without console errors."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone

import pytest

from tests.dashboard.browser import (
    browser_login,
    chromium,
    console_errors,
    require_browser,
    save_screenshot,
    serve,
    wait_until,
)
from tests.dashboard.dash_helpers import PASSWORDS, make_run_dir, write_gpx

FAR = (52.52, 13.40)  # the second run's site, ~500 km from the first


def _h264(path, seconds: int = 6) -> None:
    """A small H.264 video standing in for the run's annotated.mp4 (real ffmpeg; skipped without it)."""
    if shutil.which("ffmpeg") is None:
        return
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"testsrc=size=320x180:rate=10:duration={seconds}",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            str(path),
        ],
        check=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory, template_db):
    require_browser()
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from db.engine import dispose_engines
    from db.run_import import import_run_dir

    folder = tmp_path_factory.mktemp("views")
    shutil.copyfile(template_db, folder / "dash.db")
    url = f"sqlite:///{folder / 'dash.db'}"
    gpx = write_gpx(folder / "flight.gpx", datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc), seconds=20)
    near_dir = make_run_dir(folder / "near", telemetry=gpx, fragments=(3,), video=True)
    _h264(near_dir / "annotated.mp4")
    near = import_run_dir(near_dir, url, speed_limit_kmh=80.0, device_serial="M3E-DEMO-01")
    far = import_run_dir(make_run_dir(folder / "far", origin=FAR), url, speed_limit_kmh=80.0)
    app = create_app(DashboardSettings(database_url=url, data_dir=folder / "data", secret_key="c" * 40))
    with serve(app) as base:
        yield base, near, far
    dispose_engines()


@pytest.fixture(scope="module")
def driver(site):
    with chromium(1600, 1000) as d:
        browser_login(d, site[0], "admin", PASSWORDS["admin"])
        yield d


def _load_map(driver, url):
    from selenium.webdriver.common.by import By

    driver.get(url)
    wait_until(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map data")


def _run_points_in_view(driver, run_id) -> tuple[int, int]:
    """(points of the run's trajectories inside the map's visible bounds, all its points)."""
    return tuple(
        driver.execute_script(
            """
        const b = window.AIRPATROL.map.getBounds(); let inside = 0, all = 0;
        return fetch(window.location.pathname.replace(/map$/, 'api/map') + '?run_id=' + arguments[0])
          .then((r) => r.json()).then((d) => {
            d.trajectories.features.forEach((f) => f.geometry.coordinates.forEach(([lon, lat]) => {
              all++; if (b.contains([lat, lon])) inside++; }));
            return [inside, all]; });
    """,
            run_id,
        )
    )


def test_map_opens_on_the_selected_run(driver, site):
    from selenium.webdriver.common.by import By

    base, near, far = site
    for run, other in ((near, far), (far, near)):
        _load_map(driver, f"{base}/dashboard/map?run_id={run.run_id}")
        inside, total = _run_points_in_view(driver, run.run_id)
        assert total > 20 and inside == total, f"run {run.run_id}: {inside} of {total} track points in view"
        outside, total_other = _run_points_in_view(driver, other.run_id)
        assert total_other > 20 and outside == 0
        assert driver.execute_script("return window.AIRPATROL.map.getZoom()") >= 15  # street level, not 1000 km
        assert f"run {run.run_id}" in driver.find_element(By.ID, "map-status").text
    # no filter: the latest run (the far one)
    _load_map(driver, f"{base}/dashboard/map")
    assert _run_points_in_view(driver, far.run_id)[0] > 20 and _run_points_in_view(driver, near.run_id)[0] == 0
    # scale bar and a coordinates readout that follows the pointer
    assert driver.find_element(By.CSS_SELECTOR, ".leaflet-control-scale-line").text.endswith(("m", "km"))
    assert "52.5" in driver.find_element(By.ID, "coords").text
    assert not console_errors(driver)


def test_imagery_from_the_video_lies_under_the_tracks(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    base, near, _ = site
    _load_map(driver, f"{base}/dashboard/map?run_id={near.run_id}")
    assert driver.find_element(By.ID, "map").get_attribute("data-imagery") == "1"
    img = driver.find_element(By.CSS_SELECTOR, "#map img.ortho")
    wait_until(
        driver,
        lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img),
        what="the orthophoto",
    )
    # the screen positions of the track vertices the camera saw fall on the image
    inside = driver.execute_script(
        """
        const m = window.AIRPATROL.map, r = arguments[0].getBoundingClientRect(), box = m.getContainer().getBoundingClientRect();
        return fetch(window.location.pathname.replace(/map$/, 'api/map') + '?run_id=' + arguments[1]).then((x) => x.json())
          .then((d) => d.trajectories.features.flatMap((f) => f.geometry.coordinates).map(([lon, lat]) => {
            const p = m.latLngToContainerPoint([lat, lon]);
            return [p.x + box.left >= r.left && p.x + box.left <= r.right && p.y + box.top >= r.top && p.y + box.top <= r.bottom, lon];
          }));""",
        img,
        near.run_id,
    )
    assert sum(ok for ok, _ in inside) > 0.6 * len(inside)
    labels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".leaflet-control-layers-overlays label")]
    assert "Imagery from the video" in " ".join(labels)
    save_screenshot(driver, tmp_path / "imagery.png")
    assert not console_errors(driver)


def test_show_on_the_map_and_the_run_picker(driver, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, near, far = site
    driver.get(f"{base}/dashboard/runs/{near.run_id}")
    driver.find_element(By.LINK_TEXT, "Show on the map").click()
    wait_until(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map data")
    inside, total = _run_points_in_view(driver, near.run_id)
    assert inside == total > 20
    # pick the other run by its name in the filter
    picker = Select(driver.find_element(By.ID, "run-select"))
    assert picker.first_selected_option.text.startswith(f"#{near.run_id} · video.mp4 · ")
    picker.select_by_visible_text(next(o.text for o in picker.options if o.text.startswith(f"#{far.run_id} ")))
    driver.find_element(By.CSS_SELECTOR, "#map-filter button[type=submit]").click()
    wait_until(driver, lambda d: f"run_id={far.run_id}" in d.current_url, what="the filtered map")
    wait_until(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map data")
    inside, total = _run_points_in_view(driver, far.run_id)
    assert inside == total > 20
    # vehicle filters: violations only leaves the two speeders, a speed threshold the ones above it
    assert driver.find_element(By.ID, "map").get_attribute("data-shown") == "6"
    driver.find_element(By.ID, "f-violations").click()
    assert driver.find_element(By.ID, "map").get_attribute("data-shown") == "2"
    driver.find_element(By.ID, "f-violations").click()
    driver.find_element(By.ID, "f-min-speed").send_keys("70")
    assert driver.find_element(By.ID, "map").get_attribute("data-shown") == "3"  # 75, 95, 120 km/h
    assert not console_errors(driver)


def test_run_page_tables_and_video(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    base, near, _ = site
    driver.get(f"{base}/dashboard/runs/{near.run_id}")
    table = driver.find_element(By.ID, "vehicle-table")

    def speeds():
        return [
            float(r.find_elements(By.TAG_NAME, "td")[4].text)
            for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")
            if r.is_displayed()
        ]

    head = table.find_elements(By.CSS_SELECTOR, "thead th")[4]
    head.click()
    assert speeds() == sorted(speeds()) and len(speeds()) == 6
    head.click()
    assert speeds() == sorted(speeds(), reverse=True)
    driver.find_element(By.ID, "v-search").send_keys("car")
    assert 0 < len(speeds()) < 6
    driver.find_element(By.ID, "v-search").clear()
    driver.find_element(By.ID, "v-violations").click()
    wait_until(driver, lambda d: table.get_attribute("data-shown") == "2", what="the violations filter")
    assert sorted(speeds()) == [95.0, 120.0]
    # the histogram has its limit line
    wait_until(
        driver,
        lambda d: d.find_element(By.ID, "histogram").get_attribute("data-plotted") == "1",
        timeout=60,
        what="the histogram",
    )
    assert "limit 80 km/h" in driver.find_element(By.ID, "histogram").text
    # the violations table sorts too (by speed, both ways)
    vt = driver.find_element(By.ID, "violations-table")

    def vspeeds():
        return [
            float(r.find_elements(By.TAG_NAME, "td")[2].get_attribute("data-v"))
            for r in vt.find_elements(By.CSS_SELECTOR, "tbody tr.clickable")
        ]

    vhead = vt.find_elements(By.CSS_SELECTOR, "thead th")[2]
    vhead.click()
    assert vspeeds() == sorted(vspeeds()) and len(vspeeds()) == 2
    vhead.click()
    assert vspeeds() == sorted(vspeeds(), reverse=True)
    # a violation row seeks the video and opens the speed profile with its ± σ band
    row = driver.find_element(By.CSS_SELECTOR, "#violations-table tbody tr.clickable")
    assert "wall-clock unknown" not in row.text and "UTC" in row.text
    row.click()
    wait_until(
        driver,
        lambda d: d.find_element(By.ID, "profile-chart").get_attribute("data-plotted") == "1",
        timeout=60,
        what="the speed profile",
    )
    assert "± σ" in driver.find_element(By.ID, "profile-chart").text
    if driver.find_elements(By.ID, "run-video"):
        t = driver.execute_script("return document.getElementById('run-video').currentTime")
        assert abs(t - float(row.get_attribute("data-t"))) < 0.5
    save_screenshot(driver, tmp_path / "run.png")
    assert not console_errors(driver)


def test_replay_slider_moves_markers_and_the_video(driver, site):
    from selenium.webdriver.common.by import By

    from tests.dashboard.dash_helpers import _metres_to_latlon

    base, near, _ = site
    driver.get(f"{base}/dashboard/runs/{near.run_id}")
    rel = driver.find_element(By.ID, "replay-map")
    wait_until(driver, lambda d: rel.get_attribute("data-loaded") == "1", what="the replay map")
    slide = (
        "const s = document.getElementById('replay-t'); s.value = arguments[0]; s.dispatchEvent(new Event('input'));"
    )
    positions = "return [...document.querySelectorAll('#replay-map path.replay-marker')].length"
    driver.execute_script(slide, 3.0)
    assert rel.get_attribute("data-markers") == "6" and driver.execute_script(positions) == 6
    # the 120 km/h car (track 5, lane 4 = 16 m north) is 100 m further east at t = 3 s than at t = 0
    fastest = (
        "const m = window.AIRPATROL.replayMap; let ll = null; m.eachLayer((l) => { if (l.options.className && "
        "l.options.className.includes('replay-5')) ll = l.getLatLng(); }); return ll && [ll.lat, ll.lng];"
    )
    lat, lon = driver.execute_script(fastest)
    want_lat, want_lon = _metres_to_latlon(-40 + 120 / 3.6 * 3.0, 16.0)
    assert abs(lat - want_lat) * 111_320 < 1.0 and abs(lon - want_lon) * 74_000 < 1.0
    driver.execute_script(slide, 1.0)
    lat1, lon1 = driver.execute_script(fastest)
    assert 60 < (lon - lon1) * 74_500 < 73  # 2 s at 33.3 m/s
    if driver.find_elements(By.ID, "run-video"):  # the video followed the slider; seeking it moves the slider
        assert abs(driver.execute_script("return document.getElementById('run-video').currentTime") - 1.0) < 0.1
        driver.execute_script("document.getElementById('run-video').currentTime = 4.5")
        wait_until(driver, lambda d: abs(float(rel.get_attribute("data-t")) - 4.5) < 0.1, what="the slider to follow")
        assert abs(float(driver.find_element(By.ID, "replay-t").get_attribute("value")) - 4.5) < 0.1
    assert not console_errors(driver)


def test_a_counting_line_drawn_on_the_map_counts_the_crossings(driver, site, tmp_path):
    """An operator draws a line across three of the lanes with two clicks on the replay map; the counts shown are
    the crossings of the run's trajectories, computed here with plain segment geometry."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from tests.dashboard.dash_helpers import _metres_to_latlon
    from tests.dashboard.test_counting_lines import expected_line_counts

    base, near, _ = site
    driver.get(f"{base}/dashboard/runs/{near.run_id}")
    rel, box = driver.find_element(By.ID, "replay-map"), driver.find_element(By.ID, "counting")
    wait_until(
        driver,
        lambda d: rel.get_attribute("data-loaded") == "1" and box.get_attribute("data-loaded") == "1",
        what="the replay map and its counting lines",
    )
    assert box.get_attribute("data-lines") == "0"
    a, b = _metres_to_latlon(0.0, 2.0), _metres_to_latlon(0.0, 14.0)  # (lat, lon): across the lanes at 4, 8, 12 m
    driver.execute_script(
        "window.AIRPATROL.replayMap.setView([arguments[0], arguments[1]], 19, {animate: false})",
        (a[0] + b[0]) / 2,
        a[1],
    )
    driver.find_element(By.ID, "counting-name").send_keys("test gate")
    driver.find_element(By.ID, "draw-line").click()
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", rel)  # offsets are from its in-view centre
    size = rel.size
    for lat, lon in (a, b):  # real clicks at the points' pixels (offsets from the map's centre)
        x, y = driver.execute_script(
            "const p = window.AIRPATROL.replayMap.latLngToContainerPoint([arguments[0], "
            "arguments[1]]); return [p.x, p.y];",
            lat,
            lon,
        )
        ActionChains(driver).move_to_element_with_offset(
            rel, int(x - size["width"] / 2), int(y - size["height"] / 2)
        ).click().perform()
    wait_until(
        driver,
        lambda d: box.get_attribute("data-lines") == "1" and box.get_attribute("data-loaded") == "1",
        what="the saved line's counts",
    )
    data = driver.execute_script(
        "return fetch(arguments[0]).then((r) => r.json())", f"{base}/dashboard/api/map?run_id={near.run_id}"
    )
    positions = {
        f["properties"]["track_id"]: [
            (t, lon, lat) for t, (lon, lat) in zip(f["properties"]["times"], f["geometry"]["coordinates"])
        ]
        for f in data["trajectories"]["features"]
    }
    saved = driver.execute_script(
        "return fetch(arguments[0]).then((r) => r.json())", f"{base}/dashboard/api/runs/{near.run_id}/counting"
    )["lines"][0]
    assert saved["name"] == "test gate"
    for (lon, lat), (want_lat, want_lon) in zip(saved["coordinates"], (a, b)):  # the clicks landed where aimed
        assert abs(lat - want_lat) * 111_320 < 1.0 and abs(lon - want_lon) * 74_000 < 1.0, (saved, a, b)
    want = expected_line_counts(positions, *saved["coordinates"])
    assert sum(want.values()) == 3  # the three middle lanes (a check of the test's own geometry)
    shown: dict[str, int] = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, ".counting-line tbody tr[data-direction]"):
        d = tr.get_attribute("data-direction")
        shown[d] = shown.get(d, 0) + int(tr.get_attribute("data-vehicles"))
    assert shown == dict(want)
    assert driver.find_element(By.CSS_SELECTOR, ".counting-line").get_attribute("data-total") == "3"
    assert len(driver.find_elements(By.CSS_SELECTOR, "#replay-map path.counting-shape")) == 1
    wait_until(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, ".counting-line .chart").get_attribute("data-plotted") == "1",
        timeout=60,
        what="the line's chart",
    )
    driver.execute_script(
        "window.AIRPATROL.replayMap.setView([arguments[0], arguments[1]], 18, {animate: false});"
        "document.getElementById('replay').scrollIntoView()",
        (a[0] + b[0]) / 2,
        a[1] + 0.0004,
    )
    save_screenshot(driver, tmp_path / "counting.png", docs_name="dashboard_counting.png")
    assert not console_errors(driver)
    driver.execute_script("window.confirm = () => true")  # deleted again: the other tests see the site as it was
    driver.find_element(By.CSS_SELECTOR, ".counting-line [data-delete]").click()
    wait_until(driver, lambda d: box.get_attribute("data-lines") == "0", what="the line to be deleted")


PAGES = [
    "/map",
    "/runs",
    "/runs/{run}",
    "/runs/{run}/study",
    "/runs/{run}/study/report",
    "/flights",
    "/flights/{flight}",
    "/live",
    "/tasks",
    "/field-tests",
    "/devices",
    "/users",
]


@pytest.mark.parametrize("width,height", [(1600, 1000), (400, 800)])
def test_every_page_fits_the_screen_without_console_errors(site, width, height, tmp_path):
    from selenium.webdriver.common.by import By

    base, near, _ = site
    with chromium(width, height) as d:
        browser_login(d, base, "admin", PASSWORDS["admin"])
        for page in PAGES:
            d.get(base + "/dashboard" + page.format(run=near.run_id, flight=near.flight_id))
            wait_until(d, lambda d: d.execute_script("return document.readyState") == "complete", what=page)
            if page == "/map":
                wait_until(d, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map")
            inner, scroll = d.execute_script("return [window.innerWidth, document.documentElement.scrollWidth]")
            assert scroll <= inner + 1, f"{page} at {width} px scrolls sideways ({scroll} > {inner})"
            bar = d.find_element(By.CSS_SELECTOR, ".topbar").size["height"]
            assert bar < 70, f"{page} at {width} px: the nav bar is {bar} px tall"
            if page == "/map":
                m = d.find_element(By.ID, "map").size
                assert m["width"] >= inner - 2 if width <= 700 else m["width"] > 1000
                assert m["height"] >= 0.5 * d.execute_script("return window.innerHeight"), f"map squeezed: {m}"
                if width == 400:
                    save_screenshot(d, tmp_path / "map400.png")
            errors = console_errors(d)
            assert not errors, f"{page} at {width} px: {errors}"
        if width <= 700:  # the menu button opens the nav
            d.find_element(By.ID, "menu-toggle").click()
            assert d.find_element(By.LINK_TEXT, "Flights").is_displayed()
