"""The Live page inside the edge service, in real headless Chromium: a device pushes frames, the page shows the
service's annotated MJPEG preview and the live feed's vehicle count, speeds and fps."""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time

import pytest

from tests.dashboard.browser import browser_login, chromium, require_browser, save_screenshot, serve, wait_until
from tests.dashboard.dash_helpers import PASSWORDS

pytestmark = pytest.mark.slow


@pytest.fixture
def service_site(tmp_path, template_db):
    require_browser()
    fakes = pytest.importorskip(
        "tests.edge.service.service_fakes", reason="the service's test doubles (bright-box detector) are needed"
    )
    from db.engine import dispose_engines
    from edge.config import load_settings
    from edge.service.app import create_app

    shutil.copyfile(template_db, tmp_path / "airpatrol.db")
    settings = load_settings(
        None,
        {
            "data_dir": str(tmp_path / "data"),
            "database_url": f"sqlite:///{tmp_path / 'airpatrol.db'}",
            "pipeline": {"calibration": {"metres_per_pixel": fakes.METRES_PER_PIXEL}},
            "service": {
                "job_workers": 0,
                "resume_streams": False,
                "secret_key": "live-test-secret-0123456789",
                "preview_fps": 5.0,
            },
        },
    )
    app = create_app(settings, pipeline_factory=fakes.make_pipeline)
    with serve(app) as base:
        yield base, fakes
    dispose_engines()


def _pusher(base: str, stream_id: int, fakes, stop: threading.Event, fps: float = 10.0) -> None:
    """A ground station pushing the bright-box clip in real time until told to stop."""
    from websockets.sync.client import connect

    auth = base64.b64encode(f"operator:{PASSWORDS['operator']}".encode()).decode()
    url = base.replace("http://", "ws://") + f"/api/streams/{stream_id}/push"
    with connect(url, additional_headers={"Authorization": f"Basic {auth}"}) as ws:
        ws.send(json.dumps({"type": "hello", "fps": fps}))
        i, t0 = 0, time.monotonic()
        while not stop.is_set():
            ws.send(json.dumps({"type": "frame", "t": i / fps}))
            ws.send(fakes.jpeg(i))
            i += 1
            time.sleep(max(0.0, t0 + i / fps - time.monotonic()))
        ws.send(json.dumps({"type": "end"}))


def test_live_page_shows_a_pushed_stream(service_site, tmp_path):
    import httpx
    from selenium.webdriver.common.by import By

    base, fakes = service_site
    r = httpx.post(
        f"{base}/api/streams",
        auth=("operator", PASSWORDS["operator"]),
        json={"kind": "push", "name": "bridge cam", "speed_limit_kmh": 30},
    )
    assert r.status_code == 201, r.text
    stream_id = r.json()["id"]
    stop = threading.Event()
    pusher = threading.Thread(target=_pusher, args=(base, stream_id, fakes, stop), daemon=True)
    pusher.start()
    try:
        with chromium() as driver:
            browser_login(driver, base, "viewer", PASSWORDS["viewer"])
            driver.get(f"{base}/dashboard/live")
            card = wait_until(
                driver,
                lambda d: d.find_elements(By.CSS_SELECTOR, f"section.stream[data-stream='{stream_id}']"),
                what="the stream card",
            )[0]
            vehicles = card.find_element(By.CSS_SELECTOR, "[data-k=vehicles]")
            wait_until(
                driver,
                lambda d: vehicles.text.isdigit() and int(vehicles.text) >= 2,
                timeout=60,
                what="vehicles from the live feed",
            )
            img = card.find_element(By.CSS_SELECTOR, ".view img")
            wait_until(
                driver,
                lambda d: d.execute_script("return arguments[0].naturalWidth", img) > 0,
                timeout=30,
                what="the MJPEG preview",
            )
            wait_until(
                driver,
                lambda d: card.find_element(By.CSS_SELECTOR, "[data-k=fps]").text not in ("–", "0.0"),
                what="the fps figure",
            )
            assert card.find_element(By.CSS_SELECTOR, "[data-k=dropped]").text.isdigit()
            wait_until(
                driver,
                lambda d: card.find_elements(By.CSS_SELECTOR, "[data-k=speeds] li"),
                timeout=30,
                what="current speeds",
            )
            save_screenshot(driver, tmp_path / "dashboard_live.png", docs_name="dashboard_live.png")
    finally:
        stop.set()
        pusher.join(20)


def _telemetry_pusher(base: str, stream_id: int, fakes, stop: threading.Event, fps: float = 10.0) -> None:
    """Like _pusher, with a nadir flight log in every frame header, so the vehicles get map positions; leaves
    without an end message (a dropped link: the stream waits for the device to come back)."""
    from websockets.sync.client import connect

    telemetry = {
        "lat": 47.3769,
        "lon": 8.5417,
        "rel_alt_m": 60.0,
        "gimbal_pitch_deg": -90.0,
        "heading_deg": 0.0,
        "focal_len_mm": 24.0,
    }
    auth = base64.b64encode(f"operator:{PASSWORDS['operator']}".encode()).decode()
    url = base.replace("http://", "ws://") + f"/api/streams/{stream_id}/push"
    with connect(url, additional_headers={"Authorization": f"Basic {auth}"}) as ws:
        ws.send(json.dumps({"type": "hello", "fps": fps}))
        i, t0 = 0, time.monotonic()
        while not stop.is_set():
            ws.send(json.dumps({"type": "frame", "t": i / fps, "telemetry": telemetry}))
            ws.send(fakes.jpeg(i))
            i += 1
            time.sleep(max(0.0, t0 + i / fps - time.monotonic()))


def test_an_operator_adds_calibrates_and_stops_a_stream_on_the_live_page(service_site):
    import httpx
    from selenium.webdriver.common.by import By

    from tests.dashboard.browser import console_errors

    base, fakes = service_site
    auth = ("operator", PASSWORDS["operator"])
    with chromium() as driver:
        browser_login(driver, base, "operator", PASSWORDS["operator"])
        driver.get(f"{base}/dashboard/live")
        assert "airpatrol stream" in driver.find_element(By.ID, "live-empty").text  # the empty state says how
        form = driver.find_element(By.ID, "add-stream-form")
        form.find_element(By.NAME, "name").send_keys("gate cam")
        form.find_element(By.CSS_SELECTOR, "#add-kind option[value=push]").click()
        assert not driver.find_element(By.ID, "add-url").is_displayed()  # a push stream has no URL
        form.find_element(By.NAME, "speed_limit_kmh").send_keys("30")
        form.find_element(By.NAME, "metres_per_pixel").send_keys("0.05")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        card = wait_until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "section.stream"), what="the new card")[0]
        stream_id = int(card.get_attribute("data-stream"))
        (listed,) = [s for s in httpx.get(f"{base}/api/streams", auth=auth).json() if s["id"] == stream_id]
        assert listed["name"] == "gate cam" and listed["kind"] == "push" and listed["speed_limit_kmh"] == 30
        assert listed["calibration"] == "0.05 m per pixel"

        stop = threading.Event()
        pusher = threading.Thread(target=_telemetry_pusher, args=(base, stream_id, fakes, stop), daemon=True)
        pusher.start()
        try:
            vehicles = card.find_element(By.CSS_SELECTOR, "[data-k=vehicles]")
            wait_until(
                driver,
                lambda d: vehicles.text.isdigit() and int(vehicles.text) >= 2,
                timeout=60,
                what="vehicles from the live feed",
            )
            live_map = driver.find_element(By.ID, "live-map")
            wait_until(
                driver,
                lambda d: int(live_map.get_attribute("data-vehicles")) >= 1,
                timeout=30,
                what="live vehicles on the map",
            )
            assert driver.find_elements(By.CSS_SELECTOR, "#live-map path.live-vehicle")

            def events():
                return [
                    li.get_attribute("data-kind")
                    for li in card.find_elements(By.CSS_SELECTOR, "[data-k=events] li[data-kind]")
                ]

            wait_until(driver, lambda d: "state" in events() and "added" in events(), what="the events timeline")
            # the map page's live layer shows them too
            driver.get(f"{base}/dashboard/map")
            wait_until(
                driver,
                lambda d: int(d.find_element(By.ID, "map").get_attribute("data-live") or 0) >= 1,
                timeout=30,
                what="live vehicles on the map page",
            )
            driver.get(f"{base}/dashboard/live")
            card = wait_until(
                driver,
                lambda d: d.find_elements(By.CSS_SELECTOR, f"section.stream[data-stream='{stream_id}']"),
                what="the stream card again",
            )[0]
        finally:
            stop.set()
            pusher.join(20)

        card.find_element(By.CSS_SELECTOR, "[data-act=calibrate]").click()
        card.find_element(By.CSS_SELECTOR, ".calibrate-form input[name=mpp]").send_keys("0.1")
        card.find_element(By.CSS_SELECTOR, ".calibrate-form button[type=submit]").click()
        wait_until(driver, lambda d: "calibrated" in events(), what="the calibration event")
        assert httpx.get(f"{base}/api/streams/{stream_id}", auth=auth).json()["calibration"] == "0.1 m per pixel"

        with chromium(400, 800) as phone:  # the page with a stream, its forms and map fits a phone
            browser_login(phone, base, "operator", PASSWORDS["operator"])
            phone.get(f"{base}/dashboard/live")
            wait_until(phone, lambda d: d.find_elements(By.CSS_SELECTOR, "section.stream"), what="the card at 400 px")
            phone.find_element(By.CSS_SELECTOR, "[data-act=calibrate]").click()
            inner, scroll = phone.execute_script("return [window.innerWidth, document.documentElement.scrollWidth]")
            assert scroll <= inner + 1, f"the live page scrolls sideways at 400 px ({scroll} > {inner})"
            assert not [e for e in console_errors(phone) if "preview.mjpg" not in e]

        driver.execute_script("window.confirm = () => true")
        card.find_element(By.CSS_SELECTOR, "[data-act=stop]").click()
        wait_until(
            driver,
            lambda d: not d.find_elements(By.CSS_SELECTOR, f"section.stream[data-stream='{stream_id}']"),
            what="the card to go",
        )
        r = httpx.get(f"{base}/api/streams/{stream_id}", auth=auth)
        assert r.status_code == 404 or r.json()["state"] == "finished"
        assert not [e for e in console_errors(driver) if "preview.mjpg" not in e]
