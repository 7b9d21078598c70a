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
