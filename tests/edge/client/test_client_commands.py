"""`airpatrol upload` and `airpatrol stream` as a ground station runs them, against a real `airpatrol serve` process,
through a proxy that drops the connection part-way."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta

import httpx
import pytest
from conftest import client_env
from cutting_proxy import CuttingProxy


def airpatrol(*args, token: str | None, data_dir, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = client_env(AIRPATROL_DATA_DIR=str(data_dir))
    env.pop("AIRPATROL_DEVICE_TOKEN", None)
    if token:
        env["AIRPATROL_DEVICE_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "edge.cli", *args], env=env, capture_output=True, text=True, timeout=timeout, **kw
    )


@pytest.fixture
def flight(clip, tmp_path):
    """The test clip with a DJI SRT next to it (hovering at 60 m, camera straight down)."""
    from service_fakes import write_dji_srt

    video = tmp_path / "DJI_0001.mp4"
    shutil.copy(clip, video)
    write_dji_srt(tmp_path / "DJI_0001.SRT", 100)
    return video


def test_upload_resumes_after_a_dropped_connection_and_follows_the_job(served, flight, tmp_path):
    base, token, settings = served
    proxy = CuttingProxy(int(base.rsplit(":", 1)[1]))
    size = flight.stat().st_size
    # The SRT (~20 KB) goes first; the cut falls in the video, part-way through its first 64 KiB chunk.
    proxy.cut_after(flight.with_suffix(".SRT").stat().st_size + 40_000)
    try:
        r = airpatrol(
            "upload",
            str(flight),
            "--server",
            f"http://127.0.0.1:{proxy.port}",
            "--chunk-mb",
            "0.0625",
            "--speed-limit",
            "40",
            token=token,
            data_dir=tmp_path / "client",
        )
    finally:
        proxy.close()
    assert r.returncode == 0, r.stderr
    assert proxy.cuts >= 1 and "resuming at byte" in r.stderr, r.stderr
    assert "checksum verified" in r.stderr and "flight log DJI_0001.SRT" in r.stderr
    job_id = int(r.stdout.split("job ")[1].split()[0])
    assert f"job {job_id} complete" in r.stdout
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        job = http.get(f"/api/jobs/{job_id}").json()
        assert job["status"] == "complete" and job["frames_done"] == 100 and job["log_upload_id"]
        assert job["params"]["speed_limit_kmh"] == 40
        up = http.get(f"/api/uploads/{job['video_upload_id']}").json()
    assert up["status"] == "complete" and up["size"] == size and up["offset"] == size
    stored = next((tmp_path / "data" / "uploads").glob(f"{job['video_upload_id']}.*"))
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == hashlib.sha256(flight.read_bytes()).hexdigest()


def test_client_errors_are_one_line(served, flight, tmp_path):
    base, token, _ = served
    r = airpatrol("upload", str(flight), "--server", base, token="apt_not-a-real-token", data_dir=tmp_path)
    assert r.returncode == 2 and "HTTP 401" in r.stderr and "device token" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = airpatrol("upload", str(flight), "--server", base, token=None, data_dir=tmp_path)
    assert r.returncode == 2 and "AIRPATROL_DEVICE_TOKEN" in r.stderr
    r = airpatrol("stream", str(tmp_path / "missing.mp4"), "--server", base, token=token, data_dir=tmp_path)
    assert r.returncode == 2 and "missing.mp4" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture
def long_flight(tmp_path):
    """A 10 s flight with its DJI SRT: the test clip's 4 s can be over before a reconnect on a loaded machine."""
    from service_fakes import write_clip, write_dji_srt

    video = write_clip(tmp_path / "DJI_0001.mp4", 250)
    write_dji_srt(tmp_path / "DJI_0001.SRT", 250)
    return video


def test_stream_publishes_a_file_with_telemetry_and_survives_a_dropped_link(served, long_flight, tmp_path):
    base, token, _ = served
    flight = long_flight
    proxy = CuttingProxy(int(base.rsplit(":", 1)[1]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edge.cli",
            "stream",
            str(flight),
            "--server",
            f"http://127.0.0.1:{proxy.port}",
            "--speed-limit",
            "40",
        ],
        env=client_env(AIRPATROL_DEVICE_TOKEN=token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    received_at_cut: list[int] = []

    def pushing() -> bool:  # the client's WebSocket is up and frames flow (its start-up time varies with the load)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
            live = [s["received"] for s in http.get("/api/streams").json() if s["state"] == "live"]
        received_at_cut[:] = live
        return bool(live) and live[0] >= 10

    try:
        from service_helpers import wait_for

        wait_for(pushing, 30, "the client to push frames")
        proxy.cut_now()  # mid-flight, the link drops once
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proxy.close()
    assert proc.returncode == 0, err
    assert "with telemetry from DJI_0001.SRT" in out
    sid = int(out.split("stream ")[1].split(":")[0])
    assert "connection lost" in err and "1 reconnects" in out and "skipped behind the recording" in out, (out, err)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        status = http.get(f"/api/streams/{sid}").json()
        latest = http.get(f"/api/streams/{sid}/latest").json()
    assert status["state"] == "finished" and status["kind"] == "push" and status["device_id"] is not None
    assert status["processed"] >= 2, status
    # Frames the client sent after the drop are processed too. (On a loaded machine the client's reconnect itself can
    # stall until the flight is over - it then skips the recording's rest as "behind", and says so - which leaves
    # nothing sent after the drop to check.)
    sent = int(out.split("ended: sent ")[1].split()[0])
    if sent > received_at_cut[0] + 5:
        assert latest["frame"] > received_at_cut[0], (status, latest["frame"], received_at_cut, out, err)
    assert latest["scale_source"] == "telemetry"  # the SRT's altitude and camera set the scale
    assert any(t["lat"] is not None and abs(t["lat"] - 47.3769) < 0.01 for t in latest["tracks"])
    _one_run(tmp_path, sid, status["run_id"])


def _one_run(tmp_path, sid: int, run_id: int) -> None:
    """The drop did not split the flight: the stream has one run, complete."""
    from sqlalchemy import create_engine, select

    from db.models import ProcessingRun, Video

    engine = create_engine(f"sqlite:///{tmp_path / 'airpatrol.db'}")
    with engine.connect() as c:
        runs = c.execute(
            select(ProcessingRun.id, ProcessingRun.status)
            .join(Video, Video.id == ProcessingRun.video_id)
            .where(Video.file_path.like(f"live:stream-{sid}:%"))
        ).all()
    engine.dispose()
    assert [tuple(r) for r in runs] == [(run_id, "complete")]


def airdata_csv(path, seconds: float, lat: float = 40.1, lon: float = -7.5, height_ft: float = 200.0):
    """A DJI flight log as Airdata exports it (CSV, feet and mph, every 100 ms): hovering, camera straight down."""
    rows = [
        "time(millisecond),datetime(utc),latitude,longitude,height_above_takeoff(feet),"
        "altitude_above_seaLevel(feet),speed(mph), zSpeed(mph), compass_heading(degrees),gimbal_heading(degrees),"
        "gimbal_pitch(degrees),battery_percent"
    ]
    t0 = datetime(2022, 5, 4, 17, 21, 57)
    for i in range(int(seconds * 10) + 1):
        rows.append(
            f"{i * 100},{t0 + timedelta(milliseconds=100 * i):%Y-%m-%d %H:%M:%S},{lat},{lon},{height_ft},"
            f"{height_ft + 1300},0,0,90,90,-90,87"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def _stream_and_check(base: str, token: str, args: list[str], lat: float, timeout: float = 90) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "edge.cli", "stream", *args, "--server", base],
        env=client_env(AIRPATROL_DEVICE_TOKEN=token),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    sid = int(proc.stdout.split("stream ")[1].split(":")[0])
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        status = http.get(f"/api/streams/{sid}").json()
        latest = http.get(f"/api/streams/{sid}/latest").json()
    assert status["state"] == "finished" and status["kind"] == "push" and status["processed"] >= 10, status
    assert latest["scale_source"] == "telemetry"  # the log's height and gimbal set the scale
    assert any(t["lat"] is not None and abs(t["lat"] - lat) < 0.01 for t in latest["tracks"]), latest["tracks"]
    return {"stdout": proc.stdout, "stderr": proc.stderr, "status": status}


def test_stream_publishes_a_file_with_a_flight_log(served, clip, tmp_path):
    """A recorded flight with its log given by --log (Airdata CSV, not the sidecar SRT): telemetry per frame."""
    base, token, _ = served
    log = airdata_csv(tmp_path / "flight.csv", 5)
    out = _stream_and_check(base, token, [str(clip), "--log", str(log)], lat=40.1)
    assert "with telemetry from flight.csv" in out["stdout"]


def test_stream_publishes_an_rtsp_camera_joined_mid_gop_with_a_flight_log(served, clip, tmp_path):
    """A live RTSP camera sending long-GOP H.264 (a keyframe every 3 s), already streaming when the client joins:
    the client waits for the keyframe and publishes its frames with the flight log's telemetry."""
    from live_sources import RtspCamera, long_gop_files, rtsp_camera_missing

    if rtsp_camera_missing():
        pytest.skip(
            f"RTSP camera: {rtsp_camera_missing()} (Debian: apt-get install python3-gi "
            "gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)"
        )
    base, token, _ = served
    camera = RtspCamera(long_gop_files(clip, tmp_path, loops=6), "h264").start()
    try:
        camera.watcher()
        time.sleep(4.5)  # mid-GOP (see test_lockon)
        log = airdata_csv(tmp_path / "flight.csv", 30, lat=40.2)
        out = _stream_and_check(base, token, [camera.url, "--log", str(log), "--duration", "6"], lat=40.2)
    finally:
        camera.stop()
    assert f"publishing {camera.url}" in out["stdout"] and "with telemetry from flight.csv" in out["stdout"]
    assert out["status"]["received"] >= 50  # ~6 s at 25 fps, less the wait for the keyframe


def test_a_client_back_after_a_drop_takes_over_the_connection_the_server_still_holds(served, clip):
    """Right after a link drop the server may not yet have noticed the old connection is dead: the client's new
    connection takes it over at once (the server closes the old one), so the client neither waits nor skips frames,
    and it does not count a drop."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from edge.client.api import Endpoint
    from edge.client.publish import Publisher, PublishOptions, open_frames

    base, token, _ = served
    ep = Endpoint(base, token)
    pub = Publisher(ep, PublishOptions(retry_initial_s=0.2), say=lambda s: None)
    stream = pub.register()
    with connect(ep.ws_base + stream["push_url"], additional_headers=ep.headers) as stale:  # the "old" connection
        stale.send('{"type": "hello", "fps": 25}')
        frames, rate = open_frames(str(clip), None)  # the 4 s clip at its own rate
        pub.run(frames, rate, None)
        with pytest.raises(ConnectionClosed):
            while True:
                stale.recv(timeout=5)
    assert stale.close_code == 1008 and "replaced by a newer connection" in stale.close_reason
    assert pub.reconnects == 0 and pub.sent >= 90 and pub.skipped < 10, (pub.sent, pub.skipped)
    with httpx.Client(base_url=base, headers=ep.headers) as http:
        # the stream's own process ends its run and reports it: the service's status follows within moments
        deadline = time.monotonic() + 10
        while True:
            status = http.get(f"/api/streams/{stream['id']}").json()
            if status["state"] == "finished" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert status["state"] == "finished" and status["received"] == pub.sent, status


def test_a_recording_published_by_a_client_that_fell_behind_counts_the_frames_it_skipped(clip):
    """A recording is published at its own rate; frames the client is too late for are skipped and counted (the
    summary line says how many), never silently lost."""
    from edge.client.publish import open_frames

    frames, rate = open_frames(str(clip), None)  # the 4 s clip, 100 frames at 25 fps
    got = 0
    for i, _ in enumerate(frames):
        got += 1
        if i == 10:
            time.sleep(1.0)  # stalled for a second (a reconnect): 25 frames' time
    assert rate == 25 and 15 <= frames.late <= 30 and got + frames.late == 100, (got, frames.late)
