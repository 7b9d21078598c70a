"""Push ingest: a device streams JPEG frames + per-frame telemetry over a WebSocket; bad messages close that
connection with a reason and never take the stream worker down."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from service_fakes import jpeg
from service_helpers import wait_for
from sqlalchemy import func, select
from starlette.websockets import WebSocketDisconnect
from websockets.sync.client import connect

from db.models import ProcessingRun, TrackRow

LAT, LON = 47.3769, 8.5417
TELEMETRY = {
    "lat": LAT,
    "lon": LON,
    "rel_alt_m": 60.0,
    "gimbal_pitch_deg": -90.0,
    "heading_deg": 0.0,
    "focal_len_mm": 24.0,
}


def frame_header(i: int, fps: float = 25.0) -> str:
    return json.dumps({"type": "frame", "t": i / fps, "telemetry": TELEMETRY})


def test_push_client_streams_frames_with_telemetry(server):
    app, addr, creds = server
    r = httpx.post(f"http://{addr}/api/streams", headers=creds.device, json={"kind": "push", "speed_limit_kmh": 50})
    assert r.status_code == 201, r.text
    stream = r.json()
    assert stream["state"] == "waiting" and stream["device_id"] is not None
    results: list[dict] = []
    acks: list[dict] = []
    with (
        connect(f"ws://{addr}{stream['feed_url']}", additional_headers=creds["viewer"]) as feed,
        connect(f"ws://{addr}{stream['push_url']}", additional_headers=creds.device) as push,
    ):
        push.send(json.dumps({"type": "hello", "fps": 25}))
        t0 = time.monotonic()
        for i in range(50):
            push.send(frame_header(i))
            push.send(jpeg(i))
            time.sleep(max(0.0, t0 + (i + 1) / 25 - time.monotonic()))  # real time, like a drone
        push.send(json.dumps({"type": "end"}))
        while True:  # the server confirms the end by closing with 1000 (acks may come first)
            try:
                acks.append(json.loads(push.recv(timeout=20)))
            except Exception:
                break
        assert push.close_code == 1000 and push.close_reason == "run complete"
        while len(results) < 200:
            msg = json.loads(feed.recv(timeout=20))
            if msg["type"] == "status" and msg["state"] == "finished":
                break
            if msg["type"] == "result":
                results.append(msg)
    assert acks and acks[-1]["type"] == "ack" and acks[-1]["received"] >= 25
    assert len(results) >= 10
    tracks = [t for m in results for t in m["tracks"] if t["speed_kmh"] is not None]
    assert tracks, "no speeds from pushed frames"
    # the telemetry georeferenced the frames: positions within ~100 m of the drone, scale from telemetry
    assert all(abs(t["lat"] - LAT) < 1e-3 and abs(t["lon"] - LON) < 1e-3 for t in tracks)
    assert results[-1]["scale_source"] == "telemetry"
    assert any(m["violations"] for m in results)  # at 60 m the 3 px/frame vehicle is ~70 km/h
    with app.state.ctx.sessions() as s:
        run = s.get(ProcessingRun, results[-1]["run_id"])
        assert run.status == "complete"
        assert s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run.id)) >= 3


def _push_stream(client, who="DRONE-1") -> int:
    r = client.post("/api/streams", headers=client.creds[who], json={"kind": "push"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _closed_with(ws) -> WebSocketDisconnect:
    with pytest.raises(WebSocketDisconnect) as info:
        for _ in range(10):  # acks may arrive before the close
            ws.receive_text()
    return info.value


@pytest.mark.parametrize(
    "messages, code, reason",
    [
        (["{not json"], 1003, "malformed JSON"),
        ([b"\xff\xd8 binary first"], 1003, "without a preceding frame header"),
        (['{"type": "frame", "t": 0}', b"this is not a jpeg"], 1003, "not a JPEG"),
        (['{"type": "selfdestruct"}'], 1003, "unknown message type"),
        (['{"type": "frame", "t": 0, "telemetry": {"lat": 123}}'], 1003, "telemetry.lat"),
        (['{"type": "frame", "t": 1}', "JPEG", '{"type": "frame", "t": 0.5}', "JPEG"], 1003, "not after the previous"),
        (['{"type": "frame", "t": 0}', '{"type": "frame", "t": 1}'], 1003, "expected the JPEG"),
        (["[1, 2, 3]"], 1003, "unknown message type"),
    ],
)
def test_malformed_messages_close_with_a_reason_and_the_worker_survives(client, messages, code, reason):
    sid = _push_stream(client)
    url = f"/api/streams/{sid}/push"
    with client.websocket_connect(url, headers=client.creds.device) as ws:
        for i, m in enumerate(messages):
            if m == "JPEG":
                ws.send_bytes(jpeg(i))
            elif isinstance(m, bytes):
                ws.send_bytes(m)
            else:
                ws.send_text(m)
        closed = _closed_with(ws)
    assert closed.code == code and reason in closed.reason
    # the stream is still there and takes a well-behaved client (same run)
    with client.websocket_connect(url, headers=client.creds.device) as ws:
        for i in range(3):
            ws.send_text(frame_header(i))
            ws.send_bytes(jpeg(i))
        ws.send_text('{"type": "end"}')
        assert _closed_with(ws).code == 1000
    status = wait_for(
        lambda: (
            (s := client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json())["state"] == "finished" and s
        ),
        20,
        "the run to finish",
    )
    assert status["processed"] >= 1 and status["errors"] == 0, status["last_error"]


def test_push_is_refused_to_strangers(client):
    sid = _push_stream(client)
    url = f"/api/streams/{sid}/push"
    cases = [
        ({}, "authentication required"),
        ({"Authorization": "Bearer apt_forged"}, "invalid or revoked"),
        (client.creds["viewer"], "may not push"),
        (client.creds["DRONE-2"], "belongs to another device"),
    ]
    for headers, reason in cases:
        with client.websocket_connect(url, headers=headers) as ws:
            closed = _closed_with(ws)
        assert closed.code == 1008 and reason in closed.reason, (headers, closed.reason)
    with (
        client.websocket_connect(url, headers=client.creds.device) as first,
        client.websocket_connect(url, headers=client.creds["operator"]) as second,
    ):
        closed = _closed_with(second)
        assert closed.code == 1008 and "already pushing" in closed.reason
        first.send_text('{"type": "end"}')
        assert _closed_with(first).code == 1000


@pytest.mark.parametrize("process_per_stream", [True, False], ids=["stream-process", "thread"])
def test_the_same_client_back_after_a_drop_takes_over_its_previous_connection(settings_factory, process_per_stream):
    """A device whose link dropped connects again while the server still holds its previous connection (it has not
    noticed the drop): the new connection takes over at once instead of being refused until a ping times out, the
    old one is closed with a reason, and the run goes on with the new connection's frames on its time axis."""
    from service_helpers import running_app

    with running_app(settings_factory(process_per_stream=process_per_stream)) as client:
        sid = _push_stream(client)
        url = f"/api/streams/{sid}/push"
        with client.websocket_connect(url, headers=client.creds.device) as old:
            old.send_text('{"type": "hello", "fps": 25}')
            for i in range(3):
                old.send_text(frame_header(i))
                old.send_bytes(jpeg(i))
            with client.websocket_connect(url, headers=client.creds.device) as new:
                for i in range(5):  # the client's clock restarts with its connection: the server places it after
                    new.send_text(frame_header(i))
                    new.send_bytes(jpeg(i))
                with client.websocket_connect(url, headers=client.creds["operator"]) as other:
                    assert "already pushing" in _closed_with(other).reason  # another client is still refused
                new.send_text('{"type": "end"}')
                assert _closed_with(new).code == 1000
            closed = _closed_with(old)
            assert closed.code == 1008 and "replaced by a newer connection" in closed.reason
        status = wait_for(
            lambda: (
                (s := client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json())["state"] == "finished"
                and s
            ),
            20,
            "the run to finish",
        )
        assert status["received"] == 8 and status["errors"] == 0, status


def test_oversized_frame_is_refused(settings_factory):
    from service_helpers import running_app

    with running_app(settings_factory(max_push_frame_bytes=4096, max_frame_pixels=100 * 100)) as client:
        sid = _push_stream(client)
        with client.websocket_connect(f"/api/streams/{sid}/push", headers=client.creds.device) as ws:
            ws.send_text(frame_header(0))
            ws.send_bytes(jpeg(0))  # 320x240 > 100x100 pixels
            closed = _closed_with(ws)
        assert closed.code == 1009 and "exceeds" in closed.reason


def test_shutdown_completes_live_runs(settings):
    """Graceful shutdown finishes in-flight live work: queued frames are processed and the run is completed."""
    from service_helpers import running_app

    with running_app(settings) as client:
        sid = _push_stream(client)
        with client.websocket_connect(f"/api/streams/{sid}/push", headers=client.creds.device) as ws:
            for i in range(8):
                ws.send_text(frame_header(i))
                ws.send_bytes(jpeg(i))
        worker = client.app.state.ctx.stream(sid)
        wait_for(lambda: worker.run_id is not None, 20, "the run to start")
        ctx = client.app.state.ctx
    assert worker.finished and worker.state == "finished"  # the TestClient's exit ran the lifespan shutdown
    with ctx.sessions() as s:
        run = s.get(ProcessingRun, worker.run_id)
        assert run.status == "complete" and run.frames_done == worker.frames_processed >= 1


def test_corrupt_jpeg_data_is_a_frame_error_not_a_disconnect(client):
    """The header is checked on arrival; the pixels are decoded later (only if not dropped): a JPEG whose data is
    truncated is counted as a frame error of the stream and the connection goes on."""
    sid = _push_stream(client)
    with client.websocket_connect(f"/api/streams/{sid}/push", headers=client.creds.device) as ws:
        for i in range(3):
            data = jpeg(i)
            ws.send_text(frame_header(i))
            ws.send_bytes(data[: len(data) // 2] if i == 1 else data)
            wait_for(lambda: not len(client.app.state.ctx.stream(sid).queue), 10, "the frame to be taken")
        ws.send_text('{"type": "end"}')
        assert _closed_with(ws).code == 1000
    status = wait_for(
        lambda: (
            (s := client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json())["state"] == "finished" and s
        ),
        20,
        "the run to finish",
    )
    assert status["errors"] == 1 and status["processed"] == 2 and "corrupt or truncated" in status["last_error"]


def test_feed_is_read_only_and_needs_a_login(client):
    sid = _push_stream(client)
    with client.websocket_connect(f"/api/streams/{sid}/feed") as ws:
        closed = _closed_with(ws)
    assert closed.code == 1008 and "authentication required" in closed.reason
    with client.websocket_connect(f"/api/streams/{sid}/feed", headers=client.creds["viewer"]) as ws:
        ws.send_text('{"type": "subscribe"}')
        closed = _closed_with(ws)
    assert closed.code == 1003 and "read-only" in closed.reason
    with client.websocket_connect("/api/streams/999/feed", headers=client.creds["viewer"]) as ws:
        assert "not running" in _closed_with(ws).reason
