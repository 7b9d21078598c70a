"""`airpatrol serve` killed with SIGKILL in the middle of an upload: after a restart the upload resumes from the
bytes that reached the disk, nothing half-received is shown as complete, and the job runs once (no duplicates)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from service_helpers import DEVICE_TOKENS, free_port, wait_for
from sqlalchemy import func, select

from db.engine import session_scope
from db.models import ProcessingRun, TrackRow
from db.service_models import JobRow, UploadRow

REPO = str(Path(__file__).resolve().parents[2])
SERVICE_TESTS = str(Path(__file__).resolve().parents[1] / "edge" / "service")


@contextmanager
def serve(settings, tmp_path: Path, port: int):
    """A real `airpatrol serve` process (fake detector); yields (process, base URL)."""
    config = tmp_path / "airpatrol.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "database_url": settings.database_url,
                "data_dir": settings.data_dir,
                "pipeline": settings.pipeline.model_dump(mode="json", include={"calibration"}),
                "service": {
                    **settings.service.model_dump(mode="json", exclude_none=True),
                    "pipeline_factory": "service_fakes:make_pipeline",
                },
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, SERVICE_TESTS]), "YOLO_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge.cli", "serve", "--config", str(config), "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def ready():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(ready, 120, "`airpatrol serve` to start", every=0.3)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.mark.slow
def test_upload_survives_sigkill_of_the_server(settings_factory, clip, tmp_path):
    settings = settings_factory(instance_id="node-k")
    device = {"Authorization": f"Bearer {DEVICE_TOKENS['DRONE-1']}"}
    data = clip.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    port = free_port()
    with serve(settings, tmp_path, port) as (proc, base):
        up = httpx.post(
            f"{base}/api/uploads",
            headers=device,
            json={"kind": "video", "filename": "flight.mp4", "size": len(data), "sha256": digest},
        ).json()
        url = up["upload_url"]
        # a PATCH announcing the whole file, of which only 60 % is sent before the server dies
        sent = len(data) * 6 // 10
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = [
            f"PATCH {url} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upload-Offset: 0",
            f"Content-Length: {len(data)}",
            "Content-Type: application/offset+octet-stream",
            f"Authorization: {device['Authorization']}",
        ]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data[:sent])
        offset = lambda: int(httpx.head(f"{base}{url}", headers=device).headers["Upload-Offset"])  # noqa: E731
        wait_for(lambda: offset() > 0, 20, "bytes of the open request to reach the disk")
        proc.send_signal(signal.SIGKILL)  # crash mid-request: no handler runs
        proc.wait(10)
        sock.close()

    with serve(settings, tmp_path, port) as (proc, base):
        status = httpx.get(f"{base}{url}", headers=device).json()
        assert status["status"] == "receiving"  # half an upload is never complete
        kept = offset()
        assert 0 < kept <= sent  # what reached the disk is kept, never more than was sent
        early = httpx.post(f"{base}{url}/complete", headers=device, json={})
        assert early.status_code == 409  # cannot be completed while bytes are missing
        r = httpx.patch(
            f"{base}{url}",
            content=data[kept:],
            headers={**device, "Upload-Offset": str(kept), "Content-Type": "application/offset+octet-stream"},
        )
        assert r.status_code == 204 and int(r.headers["Upload-Offset"]) == len(data)
        r = httpx.post(f"{base}{url}/complete", headers=device, json={}, timeout=60)
        assert r.status_code == 200, r.text  # the SHA-256 of the resumed file matches the original
        job = r.json()["job"]
        again = httpx.post(f"{base}{url}/complete", headers=device, json={}, timeout=60)
        assert again.status_code == 200 and again.json()["job"]["id"] == job["id"]  # a retry: the same job
        final = wait_for(
            lambda: (
                (j := httpx.get(f"{base}/api/jobs/{job['id']}", headers=device).json())["status"]
                in ("complete", "failed")
                and j
            ),
            120,
            "the job to finish",
        )
        assert final["status"] == "complete", final["error"]

    with session_scope(settings.database_url) as s:
        assert s.scalar(select(UploadRow.sha256).where(UploadRow.id == up["id"])) == digest
        assert s.scalar(select(func.count()).select_from(JobRow).where(JobRow.video_upload_id == up["id"])) == 1
        complete = list(s.scalars(select(ProcessingRun).where(ProcessingRun.status == "complete")))
        assert [r.id for r in complete] == [final["run_id"]]  # one result set
        tracks = s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == final["run_id"]))
        distinct = s.scalar(
            select(func.count(func.distinct(TrackRow.track_no))).where(TrackRow.run_id == final["run_id"])
        )
        assert tracks == distinct > 0  # no duplicated rows
