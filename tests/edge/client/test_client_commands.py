"""`airpatrol upload` and `airpatrol stream` as a ground station runs them, against a real `airpatrol serve` process,
through a proxy that drops the connection part-way."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import threading
import time

import httpx
import pytest

from conftest import client_env
from cutting_proxy import CuttingProxy


def airpatrol(*args, token: str | None, data_dir, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = client_env(AIRPATROL_DATA_DIR=str(data_dir))
    env.pop("AIRPATROL_DEVICE_TOKEN", None)
    if token:
        env["AIRPATROL_DEVICE_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "edge.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


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
        r = airpatrol("upload", str(flight), "--server", f"http://127.0.0.1:{proxy.port}", "--chunk-mb", "0.0625",
                      "--speed-limit", "40", token=token, data_dir=tmp_path / "client")
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


def test_stream_publishes_a_file_with_telemetry_and_survives_a_dropped_link(served, flight, tmp_path):
    base, token, _ = served
    proxy = CuttingProxy(int(base.rsplit(":", 1)[1]))
    timer = threading.Timer(2.0, proxy.cut_now)  # mid-flight, the link drops once
    proc = subprocess.Popen([sys.executable, "-m", "edge.cli", "stream", str(flight), "--server",
                             f"http://127.0.0.1:{proxy.port}", "--speed-limit", "40"],
                            env=client_env(AIRPATROL_DEVICE_TOKEN=token), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    timer.start()
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        timer.cancel()
        proc.kill()
        proxy.close()
    assert proc.returncode == 0, err
    assert "with telemetry from DJI_0001.SRT" in out
    sid = int(out.split("stream ")[1].split(":")[0])
    assert "connection lost" in err and "1 reconnects" in out, (out, err)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        status = http.get(f"/api/streams/{sid}").json()
        latest = http.get(f"/api/streams/{sid}/latest").json()
    assert status["state"] == "finished" and status["kind"] == "push" and status["device_id"] is not None
    assert status["processed"] >= 10
    assert latest["scale_source"] == "telemetry"  # the SRT's altitude and camera set the scale
    assert any(t["lat"] is not None and abs(t["lat"] - 47.3769) < 0.01 for t in latest["tracks"])
    _one_run(tmp_path, sid, status["run_id"])


def _one_run(tmp_path, sid: int, run_id: int) -> None:
    """The drop did not split the flight: the stream has one run, complete."""
    from sqlalchemy import create_engine, select

    from db.models import ProcessingRun, Video

    engine = create_engine(f"sqlite:///{tmp_path / 'airpatrol.db'}")
    with engine.connect() as c:
        runs = c.execute(select(ProcessingRun.id, ProcessingRun.status).join(Video, Video.id == ProcessingRun.video_id)
                         .where(Video.file_path.like(f"live:stream-{sid}:%"))).all()
    engine.dispose()
    assert [tuple(r) for r in runs] == [(run_id, "complete")]
