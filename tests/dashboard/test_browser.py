"""The dashboard in real headless Chromium: log in, the map draws a processed run, a flight page, a log upload,
and a viewer kept out of admin pages."""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timezone

import pytest

from tests.dashboard.browser import browser_login, chromium, require_browser, save_screenshot, serve, wait_until
from tests.dashboard.dash_helpers import PASSWORDS, make_run_dir, write_gpx


@pytest.fixture(scope="module")
def site(tmp_path_factory, template_db):
    """(base URL, imported run) of a dashboard on uvicorn with one processed run in its database."""
    require_browser()
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from db.engine import dispose_engines
    from db.run_import import import_run_dir

    folder = tmp_path_factory.mktemp("site")
    shutil.copyfile(template_db, folder / "dash.db")
    url = f"sqlite:///{folder / 'dash.db'}"
    gpx = write_gpx(folder / "flight.gpx", datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc), seconds=20)
    run = import_run_dir(
        make_run_dir(folder / "run", telemetry=gpx), url, speed_limit_kmh=80.0, device_serial="M3E-DEMO-01"
    )
    app = create_app(DashboardSettings(database_url=url, data_dir=folder / "data", secret_key="b" * 40))
    with serve(app) as base:
        yield base, run
    dispose_engines()


@pytest.fixture(scope="module")
def driver(site):
    with chromium() as d:
        yield d


def test_map_draws_the_processed_run(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    base, run = site
    browser_login(driver, base, "admin", PASSWORDS["admin"])
    driver.get(f"{base}/dashboard/map")
    wait_until(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map data")
    paths = driver.find_elements(By.CSS_SELECTOR, "#map svg path.trajectory")
    tracks = {re.search(r"traj-(\d+)", p.get_attribute("class")).group(1) for p in paths}
    assert len(tracks) == run.tracks == 6  # every vehicle of the run is drawn
    assert len(paths) >= len(tracks)
    colours = {p.get_attribute("stroke") for p in paths}
    assert len(colours) >= 5  # 30 ... 120 km/h fall in different speed classes
    assert len(driver.find_elements(By.CSS_SELECTOR, "#map path.violation")) == run.violations == 2
    assert len(driver.find_elements(By.CSS_SELECTOR, "#map path.flight-track")) == 1
    shot = save_screenshot(driver, tmp_path / "dashboard_map.png", docs_name="dashboard_map.png")
    assert shot.stat().st_size > 10_000

    fastest = max(paths, key=lambda p: p.size["width"])  # the fastest car drove the longest path
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", fastest)
    wait_until(
        driver,
        lambda d: d.find_element(By.ID, "profile-chart").get_attribute("data-plotted") == "1",
        timeout=60,
        what="the speed profile chart",
    )
    assert "km/h" in driver.find_element(By.ID, "profile-facts").text


def test_flight_page_and_log_upload(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    base, run = site
    browser_login(driver, base, "operator", PASSWORDS["operator"])
    driver.get(f"{base}/dashboard/flights/{run.flight_id}")
    wait_until(
        driver, lambda d: d.find_element(By.ID, "flight-map").get_attribute("data-loaded") == "1", what="the flight map"
    )
    wait_until(
        driver,
        lambda d: d.find_element(By.ID, "telemetry-chart").get_attribute("data-plotted") == "1",
        timeout=60,
        what="the telemetry chart",
    )
    assert driver.find_elements(By.CSS_SELECTOR, "#flight-map path.flight-track")

    gpx = write_gpx(tmp_path / "afternoon.gpx", datetime(2024, 5, 1, 15, 0, tzinfo=timezone.utc), seconds=40)
    driver.get(f"{base}/dashboard/flights")
    form = driver.find_element(By.ID, "upload-log")
    form.find_element(By.NAME, "log").send_keys(str(gpx))
    form.find_element(By.NAME, "device_serial").send_keys("M3E-DEMO-02")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(driver, lambda d: re.search(r"/flights/\d+$", d.current_url), what="the new flight page")
    assert f"/flights/{run.flight_id}" not in driver.current_url
    assert "41 samples" in driver.find_element(By.CSS_SELECTOR, ".flash").text
    assert "M3E-DEMO-02" in driver.find_element(By.ID, "flight-facts").text


def test_viewer_cannot_reach_admin_pages(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    browser_login(driver, base, "viewer", PASSWORDS["viewer"])
    nav = driver.find_element(By.CSS_SELECTOR, ".topbar nav").text
    assert "Map" in nav and "Users" not in nav
    driver.get(f"{base}/dashboard/users")
    assert driver.find_element(By.TAG_NAME, "h1").text == "Not allowed"
    driver.get(f"{base}/dashboard/devices")
    assert not driver.find_elements(By.ID, "device-form")
    driver.get(f"{base}/dashboard/flights")
    assert not driver.find_elements(By.ID, "upload-log")


def test_pages_run_under_the_content_security_policy(driver, site):
    """Chromium enforces the CSP (no inline script, scripts only from this server): no page logs a violation, and
    the scripts that draw the map and the charts did run."""
    from selenium.webdriver.common.by import By

    base, run = site
    browser_login(driver, base, "admin", PASSWORDS["admin"])
    driver.get_log("browser")  # drop what earlier tests logged
    for path in (
        "/dashboard/map",
        f"/dashboard/runs/{run.run_id}",
        "/dashboard/runs",
        f"/dashboard/flights/{run.flight_id}",
        "/dashboard/users",
        "/dashboard/live",
    ):
        driver.get(base + path)
        wait_until(driver, lambda d: d.execute_script("return document.readyState") == "complete", what=path)
        assert driver.execute_script("return typeof window.AIRPATROL === 'object' && !!window.AIRPATROL.csrf"), path
        if path == "/dashboard/map":
            wait_until(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1", what="map")
        if path.startswith("/dashboard/runs/"):  # the run page's own script (replay map, table tools) ran too
            wait_until(
                driver,
                lambda d: d.find_element(By.ID, "replay-map").get_attribute("data-loaded") != "0",
                what="the replay map",
            )
        violations = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
        assert violations == [], (path, violations)
