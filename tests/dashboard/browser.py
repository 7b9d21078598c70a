"""Real headless Chromium for the browser tests (Debian's chromium + chromium-driver, driven by selenium).

Selenium Manager is never used (no driver downloads): the driver and browser paths are given explicitly.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import pytest

CHROMIUM = os.environ.get("AIRPATROL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AIRPATROL_CHROMEDRIVER", "/usr/bin/chromedriver")


def require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        pytest.skip(
            f"browser tests need Chromium and its driver ({', '.join(missing)} missing; "
            "Debian: apt-get install chromium chromium-driver)"
        )
    pytest.importorskip("selenium", reason="browser tests need selenium (pip install selenium)")


@contextmanager
def chromium(width: int = 1400, height: int = 900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="airpatrol-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    options.set_capability(
        "goog:loggingPrefs", {"browser": "ALL"}
    )  # console messages: CSP violations, console_errors()
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    if width < 500:  # headless Chromium's window is at least 500 px wide: emulate a phone's viewport instead
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver) -> list[str]:
    """Console errors (and failed loads) since the last call; reading the log clears it."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app, lifespan: Literal["auto", "on", "off"] = "on"):
    """uvicorn in a thread on a free 127.0.0.1 port; yields the base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def wait_until(driver, condition, timeout: float = 30.0, what: str = "the page"):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition, f"timed out waiting for {what}")


def browser_login(driver, base: str, username: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(f"{base}/dashboard/login")
    driver.find_element(By.ID, "username").send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()
    wait_until(driver, lambda d: "/login" not in d.current_url, what="the login to finish")


def save_screenshot(driver, path: Path, docs_name: str | None = None) -> Path:
    """Screenshot as a test artifact; with AIRPATROL_SAVE_SCREENSHOTS=1 also into docs/img for the README."""
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    if docs_name and os.environ.get("AIRPATROL_SAVE_SCREENSHOTS") == "1":
        docs = Path(__file__).resolve().parents[2] / "docs" / "img" / docs_name
        docs.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, docs)
    return path
