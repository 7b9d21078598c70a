"""Resumable uploads: an upload cut off mid-chunk resumes from the offset the server reports and becomes a batch job
that runs to completion; sizes, offsets, names and contents are checked."""

from __future__ import annotations

import hashlib
import socket

import cv2
import httpx
import numpy as np
import pytest
from service_helpers import wait_for
from sqlalchemy import func, select

from db.models import ProcessingRun, TrackRow


def _start_raw_patch(addr: str, path: str, headers: dict, body: bytes, send: int) -> socket.socket:
    """A PATCH that announces the whole body but sends only ``send`` bytes of it (the caller then cuts the line)."""
    host, port = addr.split(":")
    head = [
        f"PATCH {path} HTTP/1.1",
        f"Host: {addr}",
        "Upload-Offset: 0",
        f"Content-Length: {len(body)}",
        "Content-Type: application/offset+octet-stream",
    ] + [f"{k}: {v}" for k, v in headers.items()]
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body[:send])
    return sock


def test_interrupted_upload_resumes_and_becomes_a_completed_job(server, clip):
    app, addr, creds = server
    base, data = f"http://{addr}", clip.read_bytes()
    r = httpx.post(
        f"{base}/api/uploads",
        headers=creds.device,
        json={
            "kind": "video",
            "filename": "DJI_0001.MP4",
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )
    assert r.status_code == 201, r.text
    up = r.json()
    assert r.headers["Location"] == up["upload_url"] and up["offset"] == 0

    def server_offset() -> int:
        return int(httpx.head(f"{base}{up['upload_url']}", headers=creds.device).headers["Upload-Offset"])

    half = len(data) // 2
    sock = _start_raw_patch(addr, up["upload_url"], creds.device, data, send=half)
    wait_for(lambda: server_offset() == half, 10, "the first half to be stored while the request is still open")
    sock.close()  # the link dies mid-request
    offset = server_offset()
    assert offset == half  # what arrived is kept
    early = httpx.post(f"{base}{up['upload_url']}/complete", headers=creds.device, json={})
    assert early.status_code == 409 and "incomplete" in early.text
    wrong = httpx.patch(f"{base}{up['upload_url']}", headers={**creds.device, "Upload-Offset": "0"}, content=data)
    assert wrong.status_code == 409 and f"{offset} bytes" in wrong.text  # resuming from the wrong place is refused

    r = httpx.patch(
        f"{base}{up['upload_url']}",
        content=data[offset:],
        headers={**creds.device, "Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"},
    )
    assert r.status_code == 204 and int(r.headers["Upload-Offset"]) == len(data)
    r = httpx.post(f"{base}{up['upload_url']}/complete", headers=creds.device, json={"speed_limit_kmh": 40})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["upload"]["status"] == "complete" and done["upload"]["info"]["width"] == 320
    job = done["job"]
    assert job["status"] == "queued" and job["params"]["speed_limit_kmh"] == 40

    final = wait_for(
        lambda: (
            (j := httpx.get(f"{base}/api/jobs/{job['id']}", headers=creds["viewer"]).json())["status"]
            in ("complete", "failed")
            and j
        ),
        60,
        "the batch job",
    )
    assert final["status"] == "complete", final["error"]
    assert final["attempts"] == 1 and final["progress"] == 1.0 and final["frames_done"] == 100
    with app.state.ctx.sessions() as s:
        run = s.get(ProcessingRun, final["run_id"])
        assert run.status == "complete" and run.frames_done == 100
        assert s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run.id)) >= 3
        assert run.summary_json["violations"] >= 1  # the 54 km/h vehicle


@pytest.fixture
def upload(client):
    def create(filename="flight.mp4", size=1000, who="DRONE-1", kind="video", **extra):
        return client.post(
            "/api/uploads", headers=client.creds[who], json={"kind": kind, "filename": filename, "size": size, **extra}
        )

    return create


def _send(client, up, data, who="DRONE-1", offset=0):
    return client.patch(up["upload_url"], content=data, headers={**client.creds[who], "Upload-Offset": str(offset)})


def test_limits_names_and_ownership(client, upload, settings_factory):
    big = upload(size=10**13)
    assert big.status_code == 413 and "exceeds" in big.text
    assert upload(filename="tool.exe").status_code == 415
    evil = upload(filename="../../etc/cron.d/x..\\..\\evil .mp4").json()
    assert evil["filename"] == "evil .mp4"  # display name only: the file is stored under the random id
    root = client.app.state.ctx.uploads.root
    assert [p.name for p in root.iterdir() if evil["id"] in p.name] == [f"{evil['id']}.mp4"]
    assert not (root.parent.parent / "etc").exists()

    up = upload(size=10).json()
    over = _send(client, up, b"x" * 11)
    assert over.status_code == 413 and "declared size" in over.text
    assert client.head(up["upload_url"], headers=client.creds.device).headers["Upload-Offset"] == "0"
    other = _send(client, up, b"x" * 5, who="DRONE-2")
    assert other.status_code == 403
    for bad_id in ("0" * 31, "../../etc/passwd", "G" * 32):
        assert client.head(f"/api/uploads/{bad_id}", headers=client.creds.device).status_code == 404


@pytest.mark.parametrize(
    "content, why",
    [
        (b"this is a text file renamed to .mp4\n" * 200, "not a readable video"),
        (cv2.imencode(".jpg", np.full((64, 64, 3), 128, np.uint8))[1].tobytes(), "still image"),
    ],
    ids=["text_file", "jpeg_image"],
)
def test_renamed_non_video_is_refused(client, upload, content, why):
    up = upload(size=len(content)).json()
    assert _send(client, up, content).status_code == 204
    r = client.post(f"{up['upload_url']}/complete", headers=client.creds.device, json={})
    assert r.status_code == 422 and why in r.text
    row = client.get(up["upload_url"], headers=client.creds["viewer"]).json()
    assert row["status"] == "rejected" and row["offset"] == 0  # the file is deleted
    assert client.get("/api/jobs", headers=client.creds["viewer"]).json() == []


def test_checksum_mismatch_is_refused(client, upload, clip):
    data = clip.read_bytes()
    up = upload(size=len(data), sha256="0" * 64).json()
    assert _send(client, up, data).status_code == 204
    r = client.post(f"{up['upload_url']}/complete", headers=client.creds.device, json={})
    assert r.status_code == 422 and "SHA-256 mismatch" in r.text


def test_video_with_flight_log_becomes_a_georeferenced_job(client, upload, clip, tmp_path):
    from service_fakes import write_dji_srt

    def send_all(kind, filename, data):
        up = upload(kind=kind, filename=filename, size=len(data)).json()
        assert _send(client, up, data).status_code == 204
        return up

    log = send_all("flight_log", "DJI_0001.SRT", write_dji_srt(tmp_path / "DJI_0001.SRT", 100).read_bytes())
    r = client.post(f"{log['upload_url']}/complete", headers=client.creds.device, json={})
    assert r.status_code == 200 and r.json()["job"] is None  # a log alone queues nothing
    assert r.json()["upload"]["info"] == {"format": "dji_srt", "samples": 100, "duration_s": 3.96, "complete": True}
    bad_log = send_all("flight_log", "notes.txt", b"just some notes, no telemetry\n")
    assert client.post(f"{bad_log['upload_url']}/complete", headers=client.creds.device, json={}).status_code == 422

    video = send_all("video", "DJI_0001.MP4", clip.read_bytes())
    r = client.post(
        f"{video['upload_url']}/complete", headers=client.creds.device, json={"log_upload_id": bad_log["id"]}
    )
    assert r.status_code == 409 and "rejected" in r.text  # a refused log cannot be used
    r = client.post(f"{video['upload_url']}/complete", headers=client.creds.device, json={"log_upload_id": log["id"]})
    assert r.status_code == 200, r.text
    job_id = r.json()["job"]["id"]
    final = wait_for(
        lambda: (
            (j := client.get(f"/api/jobs/{job_id}", headers=client.creds["viewer"]).json())["status"]
            in ("complete", "failed")
            and j
        ),
        60,
        "the batch job",
    )
    assert final["status"] == "complete", final["error"]
    with client.app.state.ctx.sessions() as s:
        run = s.get(ProcessingRun, final["run_id"])
        assert run.summary_json["telemetry"] is not None
        paths = s.scalars(select(TrackRow.path_geojson).where(TrackRow.run_id == run.id)).all()
        assert any(p and "LineString" in p for p in paths)  # tracks on the map: positions from the flight log
