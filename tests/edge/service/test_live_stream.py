"""A real stream end to end: ffmpeg serves MPEG-TS over TCP on 127.0.0.1, the service pulls it, the live feed carries
tracks and speeds; ffmpeg is killed and restarted mid-test and processing resumes in the same run."""

from __future__ import annotations

import json
import shutil
import subprocess

import cv2
import httpx
import numpy as np
import pytest
from service_helpers import free_port, wait_for
from sqlalchemy import func, select
from websockets.sync.client import connect

from db.models import ProcessingRun, TrackRow, Violation

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg not installed (Debian: apt-get install ffmpeg)"
)


def serve_clip(clip, port: int) -> subprocess.Popen:
    """ffmpeg as a live source: the clip looped at its real rate, MPEG-TS over TCP, waiting for one client."""
    return subprocess.Popen(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-re",
            "-stream_loop",
            "-1",
            "-i",
            str(clip),
            "-c",
            "copy",
            "-f",
            "mpegts",
            f"tcp://127.0.0.1:{port}?listen=1",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def read_results(ws, n: int, timeout: float = 30.0, after_frame: int = -1) -> list[dict]:
    out: list[dict] = []
    while len(out) < n:
        msg = json.loads(ws.recv(timeout=timeout))
        if msg["type"] == "result" and msg["frame"] > after_frame:
            out.append(msg)
    return out


@pytest.mark.slow
def test_pull_stream_reconnects_and_continues_the_same_run(server, clip):
    app, addr, creds = server
    base, port = f"http://{addr}", free_port()
    feed_url = None
    ffmpeg = serve_clip(clip, port)
    try:
        r = httpx.post(
            f"{base}/api/streams",
            headers=creds["operator"],
            json={"kind": "pull", "url": f"tcp://127.0.0.1:{port}", "name": "cam", "speed_limit_kmh": 40},
        )
        assert r.status_code == 201, r.text
        stream = r.json()
        sid, feed_url = stream["id"], f"ws://{addr}{stream['feed_url']}"

        def state():
            return httpx.get(f"{base}/api/streams/{sid}", headers=creds["viewer"]).json()

        with connect(feed_url, additional_headers=creds["viewer"]) as ws:
            before = read_results(ws, 30)
        run_id = before[-1]["run_id"]
        assert run_id is not None and all(m["run_id"] == run_id for m in before)
        assert any(t["speed_kmh"] for m in before for t in m["tracks"]), "no speeds in the live feed"
        ids_before = {t["id"] for m in before for t in m["tracks"]}

        ffmpeg.kill()  # the ground station's link drops
        ffmpeg.wait()
        wait_for(lambda: state()["state"] == "reconnecting", 15, "the service to notice the dropped stream")
        ffmpeg = serve_clip(clip, port)  # and comes back
        wait_for(lambda: state()["reconnects"] >= 1 and state()["state"] == "live", 20, "the reconnect")

        with connect(feed_url, additional_headers=creds["viewer"]) as ws:
            after = read_results(ws, 30, after_frame=before[-1]["frame"])
        assert {m["run_id"] for m in after} == {run_id}, "a reconnect must continue the same run"
        assert min(m["t"] for m in after) > max(m["t"] for m in before)  # one continuous time axis
        new_ids = {t["id"] for m in after for t in m["tracks"]} - ids_before
        assert new_ids and min(new_ids) > max(ids_before), "track ids restarted: the tracker was reset"
        violations = [v for m in before + after for v in m["violations"]]
        assert violations and all(v["speed_kmh"] > 40 for v in violations)  # the 54 and 45 km/h vehicles
        speeds = [t["speed_kmh"] for m in after for t in m["tracks"] if t["speed_kmh"]]
        assert min(speeds) < 40 < max(speeds)  # and the 36 km/h one is not a violation

        snap = httpx.get(f"{base}/api/streams/{sid}/snapshot.jpg", headers=creds["viewer"])
        assert snap.status_code == 200 and snap.headers["content-type"] == "image/jpeg"
        assert cv2.imdecode(np.frombuffer(snap.content, np.uint8), cv2.IMREAD_COLOR).shape == (240, 320, 3)
        assert _first_mjpeg_part(f"{base}/api/streams/{sid}/preview.mjpg", creds["viewer"]).shape == (240, 320, 3)

        r = httpx.delete(f"{base}/api/streams/{sid}", headers=creds["operator"], timeout=30)
        assert r.status_code == 200 and r.json()["state"] == "finished"
        status = r.json()
        assert status["processed"] + status["dropped"] <= status["received"]
    finally:
        ffmpeg.kill()
    with app.state.ctx.sessions() as s:
        run = s.get(ProcessingRun, run_id)
        assert run.status == "complete" and run.frames_done == status["processed"]
        assert s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run_id)) >= len(ids_before)
        assert s.scalar(select(func.count()).select_from(Violation).where(Violation.run_id == run_id)) >= 1


def _first_mjpeg_part(url: str, headers: dict) -> np.ndarray:
    buf = b""
    with httpx.stream("GET", url, headers=headers, timeout=15) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("multipart/x-mixed-replace")
        for chunk in r.iter_bytes():
            buf += chunk
            start = buf.find(b"\r\n\r\n")
            if start < 0:
                continue
            length = int(
                next(
                    line.split(b":")[1]
                    for line in buf[:start].split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            if len(buf) >= start + 4 + length:
                return cv2.imdecode(np.frombuffer(buf[start + 4 : start + 4 + length], np.uint8), cv2.IMREAD_COLOR)
    raise AssertionError("MJPEG stream ended before one frame")


def test_file_stream_inside_the_allowed_folder_plays_to_the_end(settings_factory, clip, tmp_path):
    import os

    from service_helpers import running_app

    from edge.service.models import StreamRow

    root = tmp_path / "recordings"
    root.mkdir()
    (root / "flight.mp4").write_bytes(clip.read_bytes())
    os.symlink(clip, root / "escape.mp4")  # points outside the folder
    with running_app(settings_factory(stream_file_root=str(root))) as client:
        op = client.creds["operator"]
        for url in ("../outside.mp4", "/etc/passwd", "escape.mp4", "missing.mp4"):
            assert client.post("/api/streams", headers=op, json={"kind": "pull", "url": url}).status_code == 422, url
        r = client.post("/api/streams", headers=op, json={"kind": "pull", "url": "flight.mp4"})
        assert r.status_code == 201 and r.json()["source"] == "flight.mp4"
        sid = r.json()["id"]
        final = wait_for(
            lambda: (s := client.get(f"/api/streams/{sid}", headers=op).json())["state"] == "finished" and s,
            30,
            "the file to play to its end",
        )  # played at its own rate: 4 s
        ctx = client.app.state.ctx
        with ctx.sessions() as s:
            assert s.get(ProcessingRun, final["run_id"]).status == "complete"
            assert not s.get(StreamRow, sid).active  # ended by itself: not resumed at the next start
    assert final["received"] == 100 and final["processed"] + final["dropped"] == 100
