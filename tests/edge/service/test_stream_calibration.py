"""A stream's own calibration: given when it is added or later (a new run with the new scale), kept in the database
for a resumed stream, refused with the reason when it is not one."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import service_fakes
from service_helpers import running_app, wait_for


def _recording_factory():
    """The fake pipeline, noting the calibration each stream pipeline was built with."""
    seen: list = []
    lock = threading.Lock()

    def make(config):
        with lock:
            seen.append(config.calibration.metres_per_pixel)
        return service_fakes.make_pipeline(config)

    return make, seen


def _stored(settings, stream_id: int) -> dict | None:
    """The calibration in the stream's database row (``service_streams.calibration_json``)."""
    from db.engine import session_scope
    from db.service_models import StreamRow

    with session_scope(settings.database_url) as s:
        return s.get(StreamRow, stream_id).calibration_json


def test_a_stream_is_added_and_recalibrated_with_its_own_scale(settings):
    make, seen = _recording_factory()
    with running_app(settings, pipeline_factory=make) as client:
        r = client.post(
            "/api/streams",
            headers=client.creds["operator"],
            json={"kind": "push", "name": "gate", "calibration": {"metres_per_pixel": 0.2}},
        )
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        assert r.json()["calibration"] == "0.2 m per pixel"
        wait_for(lambda: 0.2 in seen, timeout=30, what="the stream pipeline with its calibration")
        assert _stored(settings, sid) == {"metres_per_pixel": 0.2}

        r = client.post(
            f"/api/streams/{sid}/calibration",
            headers=client.creds["operator"],
            json={"corners_lonlat": [[8.54, 47.38], [8.541, 47.38], [8.541, 47.379], [8.54, 47.379]]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["calibration"] == "4 georeferenced points" and r.json()["state"] not in ("finished", "failed")
        wait_for(lambda: seen.count(None) >= 1 and len(seen) >= 2, timeout=30, what="a new pipeline with the corners")
        assert (
            client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json()["calibration"]
            == "4 georeferenced points"
        )
        assert len(_stored(settings, sid)["lonlat_points"]) == 4

        for body, code in (
            ({"metres_per_pixel": 0.2, "corners_lonlat": [[0, 0]] * 4}, 422),
            ({}, 422),
            ({"metres_per_pixel": -1}, 422),
            ({"corners_lonlat": [[200, 0]] * 4}, 422),
        ):
            assert (
                client.post(f"/api/streams/{sid}/calibration", headers=client.creds["operator"], json=body).status_code
                == code
            ), body
        assert (
            client.post(
                f"/api/streams/{sid}/calibration", headers=client.creds["viewer"], json={"metres_per_pixel": 0.1}
            ).status_code
            == 403
        )
        assert (
            client.post(
                "/api/streams/9999/calibration", headers=client.creds["operator"], json={"metres_per_pixel": 0.1}
            ).status_code
            == 404
        )
        assert client.delete(f"/api/streams/{sid}", headers=client.creds["operator"]).status_code == 200


def test_a_calibration_from_the_old_json_file_is_imported_at_start_and_the_resumed_stream_uses_it(settings):
    """An installation upgraded from before revision 0004: its ``stream_calibrations.json`` is moved into the
    database when the service starts (the file renamed, never read again) and the resumed stream measures with it."""
    from db.engine import session_scope
    from db.service_models import StreamRow

    with session_scope(settings.database_url) as s:
        row = StreamRow(name="gate", kind="push", created_by="user:operator", active=True)
        s.add(row)
        s.flush()
        sid = row.id
    data = Path(settings.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    (data / "stream_calibrations.json").write_text(json.dumps({str(sid): {"metres_per_pixel": 0.2}}))
    make, seen = _recording_factory()
    with running_app(settings, pipeline_factory=make) as client:  # resume_streams is on by default
        assert client.get(f"/api/streams/{sid}", headers=client.creds["viewer"]).json()["calibration"] == (
            "0.2 m per pixel"
        )
        wait_for(lambda: 0.2 in seen, timeout=30, what="the resumed stream's pipeline with its calibration")
        client.delete(f"/api/streams/{sid}", headers=client.creds["operator"])
    assert _stored(settings, sid) == {"metres_per_pixel": 0.2}
    assert sorted(p.name for p in data.glob("stream_calibrations*")) == ["stream_calibrations.json.imported"]


def test_a_push_client_streams_on_across_a_recalibration_on_one_time_axis(server):
    """A device pushes frames over a real WebSocket (the ``websockets`` client) to a real server while the stream is
    recalibrated: the push connection is not touched; a viewer's feed (a second real client) receives the results in
    order, the new run's id announced with its first result and in the stream's status; the new run goes on on the
    stream's time axis (frame numbers and times continue, not from 0), in the feed and in the database, so the two
    runs line up in a study or on the dashboard; each run measured with its own scale."""
    import time

    import httpx
    from service_fakes import jpeg
    from sqlalchemy import func, select
    from websockets.sync.client import connect

    from db.models import ProcessingRun, TrackRow, TrackSpeed

    app, addr, creds = server
    base = f"http://{addr}"
    r = httpx.post(
        f"{base}/api/streams", headers=creds.device, json={"kind": "push", "calibration": {"metres_per_pixel": 0.2}}
    )
    assert r.status_code == 201, r.text
    stream = r.json()
    messages: list[dict] = []

    def read_feed(feed) -> None:  # all along, so no result waits in the server's per-viewer queue
        while True:
            try:
                msg = json.loads(feed.recv(timeout=30))
            except Exception:
                return
            messages.append(msg)
            if msg["type"] == "status" and msg["state"] in ("finished", "failed"):
                return

    fps, frames, recalibrate_at = 25, 90, 40
    acks: list[dict] = []
    with (
        connect(f"ws://{addr}{stream['feed_url']}", additional_headers=creds["viewer"]) as feed,
        connect(f"ws://{addr}{stream['push_url']}", additional_headers=creds.device) as push,
    ):
        reader = threading.Thread(target=read_feed, args=(feed,), daemon=True)
        reader.start()
        push.send(json.dumps({"type": "hello", "fps": fps}))
        t0 = time.monotonic()
        for i in range(frames):
            if i == recalibrate_at:
                wait_for(lambda: any(m["type"] == "result" for m in messages), 30, "the first run's results")
                r = httpx.post(
                    f"{base}/api/streams/{stream['id']}/calibration",
                    headers=creds.device,
                    json={"metres_per_pixel": 0.1},
                    timeout=30,
                )
                assert r.status_code == 200, r.text
                t0 = time.monotonic() - i / fps  # real time goes on from here, like a drone that kept flying
            push.send(json.dumps({"type": "frame", "t": i / fps}))
            push.send(jpeg(i))
            time.sleep(max(0.0, t0 + (i + 1) / fps - time.monotonic()))
        push.send(json.dumps({"type": "end"}))
        while True:  # the server confirms the end by closing with 1000 (acks may come first)
            try:
                acks.append(json.loads(push.recv(timeout=30)))
            except Exception:
                break
        assert push.close_code == 1000 and push.close_reason == "run complete"  # one connection all along
        reader.join(60)
    assert acks and all(a["type"] == "ack" for a in acks)

    results = [m for m in messages if m["type"] == "result"]
    runs = list(dict.fromkeys(m["run_id"] for m in results))
    assert len(runs) == 2 and None not in runs, runs  # the first run, then the recalibrated one
    first, second = ([m for m in results if m["run_id"] == run] for run in runs)
    assert results == first + second  # every result of the first run before any of the second
    numbers, times = [m["frame"] for m in results], [m["t"] for m in results]
    assert numbers == sorted(set(numbers)) and times == sorted(set(times))  # in order, none twice
    assert all(abs(t * fps - round(t * fps)) < 1e-6 for t in times)  # the stream's own times (i / fps), kept
    # continued, not from 0 (frames still queued when the new scale came are the new run's first)
    assert first[-1]["frame"] < second[0]["frame"] and first[-1]["t"] < second[0]["t"] and len(first) >= 10
    assert {m["metres_per_pixel"] for m in first} == {0.2} and {m["metres_per_pixel"] for m in second} == {0.1}
    assert len(second) >= 10 and any(t["speed_kmh"] for m in second for t in m["tracks"])
    status = httpx.get(f"{base}/api/streams/{stream['id']}", headers=creds["viewer"]).json()
    assert status["run_id"] == runs[1] and status["calibration"] == "0.1 m per pixel"

    with app.state.ctx.sessions() as s:
        assert [s.get(ProcessingRun, run).status for run in runs] == ["complete", "complete"]
        rows = {  # (frame, time) of each run's per-frame rows
            run: sorted(
                s.execute(
                    select(TrackSpeed.frame, TrackSpeed.t_s).join(TrackRow).where(TrackRow.run_id == run).distinct()
                ).all()
            )
            for run in runs
        }
        first_t = s.scalar(select(func.min(TrackRow.first_t)).where(TrackRow.run_id == runs[1]))
    a, b = rows[runs[0]], rows[runs[1]]
    assert a and b and 0 < a[-1][0] < b[0][0] and a[-1][1] < b[0][1] == first_t  # the rows continue the axis too
    in_feed = {m["frame"]: m["t"] for m in results}
    shared = [(f, t) for f, t in a + b if f in in_feed]
    assert len(shared) >= 10 and all(round(t, 3) == in_feed[f] for f, t in shared)  # the same axis as the feed
