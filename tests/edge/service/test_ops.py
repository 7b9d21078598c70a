"""Operations: health, readiness, Prometheus metrics, OpenAPI docs, JSON logs, config from file + environment."""

from __future__ import annotations

import json
import logging

import pytest
from service_fakes import jpeg
from service_helpers import wait_for
from starlette.websockets import WebSocketDisconnect

from edge.service.logconf import JSONFormatter


def test_health_readiness_docs(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready" and ready.json()["job_workers"] == 1
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/api/streams", "/api/uploads/{upload_id}", "/api/jobs/{job_id}", "/metrics", "/readyz"):
        assert p in paths
    client.app.state.ctx.accepting = False  # what shutdown does first
    assert client.get("/readyz").status_code == 503
    assert client.post("/api/streams", headers=client.creds["operator"], json={"kind": "push"}).status_code == 503


def test_metrics_count_frames_latency_and_jobs(client):
    sid = client.post("/api/streams", headers=client.creds.device, json={"kind": "push"}).json()["id"]
    with client.websocket_connect(f"/api/streams/{sid}/push", headers=client.creds.device) as ws:
        for i in range(5):
            ws.send_text(json.dumps({"type": "frame", "t": i / 25}))
            ws.send_bytes(jpeg(i))
        ws.send_text('{"type": "end"}')
        with pytest.raises(WebSocketDisconnect):  # wait for the server's close: it has read every frame
            while True:
                ws.receive_text()

    def settled():  # frames sent faster than processed may be dropped (queue of 4): every frame accounted for
        st = client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json()
        return st["processed"] + st["dropped"] == 5 and st["processed"] > 0 and st

    st = wait_for(settled, 20, "the 5 frames to be processed or dropped")
    n, dropped = st["processed"], st["dropped"]
    text = client.get("/metrics").text
    assert f'airpatrol_stream_frames_received_total{{stream="{sid}"}} 5.0' in text
    assert f'airpatrol_stream_frames_processed_total{{stream="{sid}"}} {float(n)}' in text
    assert f'airpatrol_stream_frames_dropped_total{{stream="{sid}"}} {float(dropped)}' in text
    assert f'airpatrol_stream_queue_depth{{stream="{sid}"}} 0.0' in text
    assert f"airpatrol_frame_latency_seconds_count {float(n)}" in text
    assert f'airpatrol_stage_latency_seconds_count{{stage="detect"}} {float(n)}' in text
    assert "airpatrol_stream_fps{stream=" in text


def test_json_logs_carry_extra_fields():
    record = logging.LogRecord(
        "airpatrol.service.stream", logging.WARNING, __file__, 1, "stream %s %s", (3, "down"), None
    )
    record.stream = 3
    out = json.loads(JSONFormatter().format(record))
    assert (
        out["msg"] == "stream 3 down"
        and out["level"] == "warning"
        and out["stream"] == 3
        and out["ts"].endswith("+00:00")
    )


def test_service_config_from_file_and_environment(tmp_path, monkeypatch):
    from edge.config import load_settings

    cfg = tmp_path / "airpatrol.yaml"
    cfg.write_text("port: 9001\nservice:\n  queue_frames: 16\n  job_workers: 2\n")
    monkeypatch.setenv("AIRPATROL_SERVICE__QUEUE_FRAMES", "32")
    s = load_settings(cfg, {"host": "0.0.0.0"})
    assert (s.host, s.port, s.service.queue_frames, s.service.job_workers) == ("0.0.0.0", 9001, 32, 2)


def test_registered_streams_resume_after_a_restart(settings):
    from service_helpers import running_app

    with running_app(settings) as c:
        op = c.creds["operator"]
        pull = c.post("/api/streams", headers=op, json={"kind": "pull", "url": "rtsp://127.0.0.1:9/down"}).json()
        push = c.post("/api/streams", headers=c.creds.device, json={"kind": "push"}).json()
        ended = c.post("/api/streams", headers=c.creds.device, json={"kind": "push"}).json()
        with c.websocket_connect(f"/api/streams/{ended['id']}/push", headers=c.creds.device) as ws:
            ws.send_text('{"type": "end"}')  # this flight is over
            with pytest.raises(WebSocketDisconnect):
                ws.receive_text()
        deleted = c.post("/api/streams", headers=c.creds.device, json={"kind": "push"}).json()
        assert c.delete(f"/api/streams/{deleted['id']}", headers=c.creds.device).status_code == 200
        wait_for(lambda: c.app.state.ctx.stream(ended["id"]).finished, 10, "the ended stream to finish")
    with running_app(settings) as c:  # graceful restart: streams that were live come back, ended ones do not
        resumed = {s["id"]: s for s in c.get("/api/streams", headers=c.creds["viewer"]).json()}
        assert set(resumed) == {pull["id"], push["id"]}
        assert resumed[pull["id"]]["source"] == "rtsp://127.0.0.1:9/down" and resumed[push["id"]]["state"] == "waiting"
