"""Refresh the dashboard pictures of the docs from real processed runs, in real headless Chromium.

    python -m dashboard.screenshots RUN_DIR [RUN_DIR ...] [--out docs/img] [--speed-limit 80]

Each run folder (from ``airpatrol process``) is imported into a throw-away SQLite database (with its orthophoto),
the dashboard is served on a free local port and Chromium takes: the map of the last run at 1600x1000
(``dashboard_map_real.png``) and at 400x800 (``dashboard_map_phone.png``), its run page (``dashboard_run.png``), and a
frame from the middle of its annotated video (``annotated_frame.jpg``). Needs selenium and Debian's chromium +
chromium-driver (paths from ``AIRPATROL_CHROMIUM`` / ``AIRPATROL_CHROMEDRIVER``); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("AIRPATROL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AIRPATROL_CHROMEDRIVER", "/usr/bin/chromedriver")


@contextmanager
def _serve(app):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def _chromium(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="airpatrol-shots-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={max(width, 500)},{height}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    if width < 500:  # headless windows are at least 500 px wide: emulate the phone's viewport
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, condition, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)


def _login(driver, base: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/dashboard/login")
    driver.find_element(By.ID, "username").send_keys("admin")
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()
    _wait(driver, lambda d: "/login" not in d.current_url)


def _map(driver, url: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    _wait(driver, lambda d: d.find_element(By.ID, "map").get_attribute("data-loaded") == "1")
    time.sleep(1.0)  # the orthophoto and the fit animation


def video_frame(run_dir: Path, out: Path, crop: tuple[int, int] = (1280, 720)) -> bool:
    """The centre (``crop`` pixels, full resolution so labels stay readable) of the middle frame of the run's
    annotated video, as JPEG."""
    import av
    import cv2

    path = run_dir / "annotated.mp4"
    if not path.is_file():
        return False
    with av.open(str(path)) as c:
        n = c.streams.video[0].frames or 100
        for i, frame in enumerate(c.decode(video=0)):
            if i >= n // 2:
                img = frame.to_ndarray(format="bgr24")
                h, w = img.shape[:2]
                cw, ch = min(w, crop[0]), min(h, crop[1])
                img = img[(h - ch) // 2 : (h + ch) // 2, (w - cw) // 2 : (w + cw) // 2]
                return bool(cv2.imwrite(str(out), img, [cv2.IMWRITE_JPEG_QUALITY, 88]))
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "img")
    ap.add_argument("--speed-limit", type=float, default=80.0)
    args = ap.parse_args(argv)
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        print(f"screenshots need Chromium and its driver ({', '.join(missing)} missing)", file=sys.stderr)
        return 2
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from dashboard.users import DEMO_PASSWORD, ensure_demo_user
    from db.engine import dispose_engines, session_scope
    from db.run_import import RunImportError, import_run_dir

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="airpatrol-shots-") as tmp:
        url = f"sqlite:///{tmp}/shots.db"
        app = create_app(DashboardSettings(database_url=url, data_dir=Path(tmp) / "data", secret_key="s" * 40))
        with session_scope(url) as s:
            ensure_demo_user(s)
        runs = []
        for d in args.run_dirs:
            try:
                r = import_run_dir(d, url, speed_limit_kmh=args.speed_limit)
            except RunImportError as exc:
                print(exc, file=sys.stderr)
                return 2
            print(f"{d}: run {r.run_id}, {r.tracks} vehicles, {r.violations} violations; {r.orthophoto}")
            runs.append(r)
        last = runs[-1]
        written = []
        with _serve(app) as base:
            with _chromium(1600, 1000) as d:
                _login(d, base, DEMO_PASSWORD)
                _map(d, f"{base}/dashboard/map?run_id={last.run_id}")
                d.save_screenshot(str(args.out / "dashboard_map_real.png"))
                d.get(f"{base}/dashboard/runs/{last.run_id}")
                _wait(
                    d,
                    lambda d: d.execute_script(
                        "const h = document.getElementById('histogram'); return !h || h.dataset.plotted === '1'"
                    ),
                )
                d.save_screenshot(str(args.out / "dashboard_run.png"))
                written += ["dashboard_map_real.png", "dashboard_run.png"]
            with _chromium(400, 800) as d:
                _login(d, base, DEMO_PASSWORD)
                _map(d, f"{base}/dashboard/map?run_id={last.run_id}")
                d.save_screenshot(str(args.out / "dashboard_map_phone.png"))
                written.append("dashboard_map_phone.png")
        dispose_engines()
    if video_frame(args.run_dirs[-1], args.out / "annotated_frame.jpg"):
        written.append("annotated_frame.jpg")
    print(f"written to {args.out}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
