"""RTMP publishers (what DJI/Autel controllers do): ffmpeg publishes the test clip to `airpatrol serve` with a
device's stream key, the link is cut, the device publishes again: one run, the gap recorded, track ids continuing.
A wrong key is refused before any video is relayed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from service_helpers import DEVICE_TOKENS, free_port, serve_process, wait_for

MODULE = "/usr/lib/nginx/modules/ngx_rtmp_module.so"
pytestmark = [
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed (Debian: apt-get install ffmpeg)"),
    pytest.mark.skipif(shutil.which("nginx") is None or not Path(MODULE).is_file(),
                       reason="nginx RTMP relay not installed (Debian: apt-get install nginx-light libnginx-mod-rtmp)"),
]
CUT_S = float(os.environ.get("AIRPATROL_TEST_PUBLISH_CUT_S", "3"))  # the 30 s: set it to 30


def publish(clip, url: str, loops: int = 3) -> subprocess.Popen:
    return subprocess.Popen(["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", str(loops), "-i",
                             str(clip), "-c", "copy", "-f", "flv", url],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


class Feed(threading.Thread):
    """Every result message of one stream's live feed, reconnecting to the feed as needed."""

    def __init__(self, url: str, headers: dict):
        super().__init__(daemon=True)
        self.url, self.headers, self.results, self.running = url, headers, [], True

    def run(self):
        while self.running:
            try:
                with connect(self.url, additional_headers=self.headers) as ws:
                    while self.running:
                        try:
                            msg = json.loads(ws.recv(timeout=1))
                        except TimeoutError:
                            continue
                        if msg["type"] == "result" and (not self.results or msg["frame"] > self.results[-1]["frame"]):
                            self.results.append(msg)  # (a reconnected feed repeats the latest result first)
            except Exception:
                time.sleep(0.2)


def test_rtmp_publisher_cut_and_back_continues_one_run(settings_factory, clip, tmp_path):
    settings = settings_factory()
    port = free_port()
    key = DEVICE_TOKENS["DRONE-1"]
    with serve_process(settings, tmp_path, rtmp_port=port) as base:
        device = {"Authorization": f"Bearer {key}"}
        wrong = publish(clip, f"rtmp://127.0.0.1:{port}/live/apt_not-a-valid-key", loops=0)
        assert wrong.wait(20) != 0, "a publisher with a wrong key must be refused"
        assert httpx.get(f"{base}/api/streams", headers=device).json() == []

        url = f"rtmp://127.0.0.1:{port}/live/{key}"
        first = publish(clip, url)
        feed = None
        try:
            stream = wait_for(lambda: (s := httpx.get(f"{base}/api/streams", headers=device).json()) and s[0], 20,
                              "the publish stream to appear")
            assert stream["kind"] == "publish" and stream["name"] == "DRONE-1 (RTMP)" and stream["device_id"]
            assert key not in json.dumps(stream)  # the stream key is never shown
            sid = stream["id"]
            feed = Feed(f"ws://{base[len('http://'):]}{stream['feed_url']}", device)
            feed.start()
            wait_for(lambda: len(feed.results) >= 40, 30, "results of the first publish")
            first.kill()  # the controller's link drops
            first.wait()
            cut_at = len(feed.results)  # (results of frames still queued at the cut may come after this)
            time.sleep(CUT_S)
            second = publish(clip, url)
            try:
                wait_for(lambda: len(feed.results) >= cut_at + 40, 30 + CUT_S, "results after publishing again")
            finally:
                second.kill()
                second.wait()
            status = httpx.get(f"{base}/api/streams/{sid}", headers=device).json()
            stopped = httpx.delete(f"{base}/api/streams/{sid}", headers=device, timeout=30).json()
        finally:
            first.kill()
            if feed is not None:
                feed.running = False
    results = feed.results
    assert {m["run_id"] for m in results} == {results[0]["run_id"]}, "publishing again must continue the run"
    assert stopped["state"] == "finished"
    gaps = [g for g in status["gaps"] if g["seconds"] >= CUT_S]
    assert gaps, f"the cut is not recorded: {status['gaps']}"
    # the run's clock includes the outage: the biggest step between consecutive results is the cut
    jump = max(range(1, len(results)), key=lambda i: results[i]["t"] - results[i - 1]["t"])
    assert results[jump]["t"] - results[jump - 1]["t"] >= CUT_S
    assert abs(results[jump - 1]["t"] - gaps[0]["t"]) < 1.0  # where the status says it was
    before, after = results[:jump], results[jump:]
    ids_before = {t["id"] for m in before for t in m["tracks"]}
    new_ids = {t["id"] for m in after for t in m["tracks"]} - ids_before
    assert ids_before and new_ids and min(new_ids) > max(ids_before), "track ids restarted: the tracker was reset"
    _run_summary_has_the_gap(tmp_path, results[0]["run_id"], CUT_S)


def _run_summary_has_the_gap(folder, run_id: int, cut_s: float) -> None:
    from sqlalchemy import create_engine, select

    from db.models import ProcessingRun

    engine = create_engine(f"sqlite:///{folder / 'airpatrol.db'}")
    with engine.connect() as c:
        status, summary = c.execute(select(ProcessingRun.status, ProcessingRun.summary_json)
                                    .where(ProcessingRun.id == run_id)).one()
    engine.dispose()
    summary = json.loads(summary) if isinstance(summary, str) else summary
    assert status == "complete" and any(g["seconds"] >= cut_s for g in summary["gaps"])
