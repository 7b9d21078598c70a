"""In real headless Chromium: the study page of a junction run at 400 px (no sideways scroll, an arrow per movement
on the imagery, no console errors), an approach dragged on the map and saved for the site, and the printable report
(screenshots and a PDF as test artifacts)."""

from __future__ import annotations

import base64
import shutil

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
from tests.dashboard.dash_helpers import PASSWORDS
from tests.dashboard.study_helpers import make_junction_run_dir

pytest.importorskip("tracking.study", reason="the traffic study (tracking.study, issue 24) is not in this tree")


@pytest.fixture(scope="module")
def junction(tmp_path_factory, template_db):
    require_browser()
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from db.engine import dispose_engines
    from db.run_import import import_run_dir

    folder = tmp_path_factory.mktemp("study")
    shutil.copyfile(template_db, folder / "dash.db")
    url = f"sqlite:///{folder / 'dash.db'}"
    imported = import_run_dir(make_junction_run_dir(folder / "junction", video=True), url)
    app = create_app(DashboardSettings(database_url=url, data_dir=folder / "data", secret_key="s" * 40))
    with serve(app) as base:
        yield base, imported
    dispose_engines()


def _full_page_png(driver, path) -> None:
    """The whole page, not only the viewport (Chromium's DevTools screenshot beyond the viewport)."""
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))


def test_study_page_at_400_px_and_an_approach_dragged_on_the_map(junction, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    base, imported = junction
    page = f"{base}/dashboard/runs/{imported.run_id}/study"
    with chromium(400, 800) as d:
        browser_login(d, base, "operator", PASSWORDS["operator"])
        d.get(page)
        wait_until(d, lambda d: d.find_element(By.ID, "study-map").get_attribute("data-loaded") == "1", what="map")
        wait_until(
            d, lambda d: d.find_element(By.ID, "series-chart").get_attribute("data-plotted") == "1", what="chart"
        )
        inner, scroll = d.execute_script("return [window.innerWidth, document.documentElement.scrollWidth]")
        assert scroll <= inner + 1, f"the study page at 400 px scrolls sideways ({scroll} > {inner})"
        m = d.find_element(By.ID, "study-map")
        assert m.size["width"] >= inner - 40 and m.size["height"] >= 300, m.size
        n_moves = int(m.get_attribute("data-movements"))
        assert n_moves > 0
        assert len(d.find_elements(By.CSS_SELECTOR, "#study-map path.study-arrow")) == n_moves
        assert d.find_elements(By.CSS_SELECTOR, "#study-map img.ortho"), "no imagery under the movements"
        assert not console_errors(d)
        d.execute_script("document.getElementById('study-map-card').scrollIntoView()")
        save_screenshot(d, tmp_path / "study400.png", docs_name="dashboard_study_phone.png")
        _full_page_png(d, tmp_path / "study400_full.png")

        api = f"{base}/dashboard/api/runs/{imported.run_id}/study"
        fetch = "return fetch(arguments[0]).then((r) => r.json())"
        before = d.execute_script(fetch, api)
        assert before["saved"] is False
        marker = d.find_element(By.CSS_SELECTOR, ".approach-marker")
        key = marker.get_attribute("data-key")
        old = next(a for a in before["approaches"] if a["key"] == key)
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", marker)
        ActionChains(d).click_and_hold(marker).move_by_offset(10, 0).move_by_offset(20, 0).release().perform()
        wait_until(d, lambda d: d.execute_script(fetch, api)["saved"] is True, what="the dragged approach saved")
        after = {a["key"]: a for a in d.execute_script(fetch, api)["approaches"]}
        assert after[key]["lon"] > old["lon"] and abs(after[key]["lat"] - old["lat"]) < 2e-5  # moved east
        assert set(after) == {a["key"] for a in before["approaches"]}


def test_printable_report(junction, tmp_path):
    from selenium.webdriver.common.by import By

    base, imported = junction
    with chromium(1200, 1700) as d:
        browser_login(d, base, "viewer", PASSWORDS["viewer"])
        d.get(f"{base}/dashboard/runs/{imported.run_id}/study/report")
        wait_until(d, lambda d: d.find_element(By.ID, "od-heatmap").get_attribute("data-plotted") == "1", what="map")
        wait_until(
            d,
            lambda d: d.execute_script(
                "const i = document.querySelector('#movement-diagram image'); return !i || i.getBBox().width > 0"
            ),
            what="the diagram's imagery",
        )
        arrows = d.find_elements(By.CSS_SELECTOR, "#movement-diagram g.movement-arrow")
        assert arrows and not console_errors(d)
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        assert not d.find_element(By.ID, "print-study").is_displayed()  # controls are not printed
        _full_page_png(d, tmp_path / "report_print.png")
        save_screenshot(d, tmp_path / "report_top.png", docs_name="dashboard_study_report.png")
        pdf = base64.b64decode(d.execute_cdp_cmd("Page.printToPDF", {"printBackground": True})["data"])
        (tmp_path / "report.pdf").write_bytes(pdf)
        assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 2
