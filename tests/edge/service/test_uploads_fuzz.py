"""Property tests of the upload API: random and malformed bodies, headers, offsets, ids and file contents get an
answer below 500 (the TestClient re-raises any unhandled server exception), and the stored offset never runs past
the announced size. Bounded: a few dozen examples per property, each with a deadline."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import running_app

FUZZ = settings(
    max_examples=20,
    deadline=5000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=300),
    st.sampled_from(["video", "flight_log", "../../etc/passwd", "a" * 64]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
create_bodies = st.fixed_dictionaries(
    {}, optional={"kind": scalars, "filename": scalars, "size": scalars, "sha256": scalars, "extra": json_values}
)


@pytest.fixture
def client(settings_factory):
    """The fuzzer starts hundreds of uploads from one device: the per-device limits (test_upload_limits.py) are
    lifted here so every example reaches the code under test."""
    with running_app(settings_factory(open_uploads_per_device=100_000, uploads_per_window=100_000)) as c:
        yield c


def test_create_upload_with_random_bodies(client):
    dev = client.creds.device

    @FUZZ
    @given(body=st.one_of(create_bodies, json_values), raw=st.one_of(st.none(), st.binary(max_size=200)))
    def run(body, raw):
        if raw is None:
            r = client.post("/api/uploads", headers=dev, content=json.dumps(body, allow_nan=True))
        else:
            r = client.post("/api/uploads", headers={**dev, "Content-Type": "application/json"}, content=raw)
        assert r.status_code < 500, r.text
        if r.status_code == 201:
            up = r.json()
            assert up["offset"] == 0 and "/" not in up["id"] and ".." not in up["upload_url"]

    run()


def test_chunks_with_random_offsets_headers_and_ids(client):
    dev = client.creds.device
    size = 1000
    up = client.post("/api/uploads", headers=dev, json={"kind": "video", "filename": "a.mp4", "size": size}).json()

    @FUZZ
    @given(
        offset=st.one_of(st.integers(-5, 2 * size).map(str), st.text(max_size=20)),
        body=st.binary(max_size=1500),
        upload_id=st.one_of(st.just(up["id"]), st.text(max_size=40)),
        method=st.sampled_from(["PATCH", "PUT", "HEAD", "GET", "DELETE"]),
    )
    def run(offset, body, upload_id, method):
        if method == "DELETE" and upload_id == up["id"]:
            method = "HEAD"  # keep the upload under test
        headers = {**dev, "Content-Type": "application/offset+octet-stream"}
        try:
            headers["Upload-Offset"] = offset.encode("latin-1").decode("latin-1")
        except UnicodeEncodeError:
            pass
        try:
            r = client.request(method, f"/api/uploads/{quote(upload_id, safe='')}", headers=headers, content=body)
        except (UnicodeEncodeError, ValueError, httpx.InvalidURL):
            return  # the client itself cannot send this header or URL
        assert r.status_code < 500, r.text
        stored = int(client.head(f"/api/uploads/{up['id']}", headers=dev).headers["Upload-Offset"])
        assert 0 <= stored <= size

    run()


def test_complete_with_random_content_and_bodies(client):
    """Random bytes (or a cut real header) as a video or a flight log: completion answers 4xx with a reason."""
    dev = client.creds.device

    @FUZZ
    @given(
        kind=st.sampled_from(["video", "flight_log"]),
        content=st.one_of(
            st.binary(min_size=1, max_size=3000),
            st.binary(max_size=500).map(lambda b: b"\x00\x00\x00\x18ftypmp42" + b),
            st.binary(max_size=500).map(lambda b: b"ULog\x01\x125" + b),
            st.text(max_size=500).map(lambda t: ("1\n00:00:00,000 --> 00:00:00,033\n" + t).encode()),
        ),
        body=st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "enqueue": scalars,
                    "speed_limit_kmh": scalars,
                    "log_upload_id": scalars,
                    "baseline": scalars,
                },
            ),
            json_values,
        ),
    )
    def run(kind, content, body):
        name = "flight.mp4" if kind == "video" else "flight.SRT"
        r = client.post("/api/uploads", headers=dev, json={"kind": kind, "filename": name, "size": len(content)})
        assert r.status_code == 201, r.text
        url = r.json()["upload_url"]
        r = client.patch(
            url,
            headers={**dev, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
            content=content,
        )
        assert r.status_code == 204, r.text
        r = client.post(f"{url}/complete", headers=dev, content=json.dumps(body))
        assert r.status_code < 500, r.text
        if r.status_code >= 400:
            assert r.json()["detail"]  # a reason, not an empty error

    run()
