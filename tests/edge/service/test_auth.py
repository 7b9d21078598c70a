"""Every write needs a device token or an operator/admin user: unauthenticated -> 401, wrong role -> 403."""

from __future__ import annotations

import base64

import pytest

WRITES = [
    ("post", "/api/streams", {"kind": "push"}),
    ("delete", "/api/streams/1", None),
    ("post", "/api/uploads", {"kind": "video", "filename": "a.mp4", "size": 10}),
    ("patch", "/api/uploads/" + "a" * 32, None),
    ("post", "/api/uploads/" + "a" * 32 + "/complete", {}),
    ("post", "/api/jobs", {"video_upload_id": "a" * 32}),
    ("post", "/api/jobs/1/cancel", None),
    ("post", "/api/users", {"username": "eve", "password": "password123"}),
    ("post", "/api/devices", {"serial": "X1"}),
    ("post", "/api/devices/DRONE-1/tokens", None),
]


def _call(client, method, path, body, headers):
    kwargs = {"headers": {**headers, "Upload-Offset": "0"}}
    if body is not None:
        kwargs["json"] = body
    return client.request(method.upper(), path, **kwargs)


@pytest.mark.parametrize("method, path, body", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_writes_refused_without_credentials_or_role(client, method, path, body):
    r = _call(client, method, path, body, {})
    assert r.status_code == 401 and "WWW-Authenticate" in r.headers
    assert _call(client, method, path, body, {"Authorization": "Bearer forged"}).status_code == 401
    assert _call(client, method, path, body, {"Authorization": "Bearer apt_revoked-or-never-issued"}).status_code == 401
    assert _call(client, method, path, body, client.creds["viewer"]).status_code == 403
    if path.startswith(("/api/users", "/api/devices")):  # admin only
        assert _call(client, method, path, body, client.creds["operator"]).status_code == 403
        assert _call(client, method, path, body, client.creds.device).status_code == 403


def test_reads_need_a_login_too(client):
    assert client.get("/api/streams").status_code == 401
    assert client.get("/api/jobs").status_code == 401
    assert client.get("/api/streams", headers=client.creds["viewer"]).status_code == 200


def test_login_cookie_and_basic(client):
    assert client.post("/api/auth/login", json={"username": "operator", "password": "wrong"}).status_code == 401
    r = client.post("/api/auth/login", json={"username": "operator", "password": "operator-password"})
    assert r.status_code == 200 and r.json()["role"] == "operator"
    cookie = r.cookies.get("airpatrol_session")
    assert (
        cookie
        and "httponly" in r.headers["set-cookie"].lower()
        and "samesite=strict" in r.headers["set-cookie"].lower()
    )
    me = client.get("/api/auth/me", headers={"Authorization": f"Bearer {r.json()['access_token']}"}).json()
    assert me == {"kind": "user", "id": me["id"], "name": "operator", "role": "operator"}
    assert client.get("/api/auth/me").json()["name"] == "operator"  # the cookie the client kept
    client.cookies.clear()
    basic = base64.b64encode(b"viewer:viewer-password").decode()
    assert client.get("/api/auth/me", headers={"Authorization": f"Basic {basic}"}).json()["role"] == "viewer"
    assert client.get("/api/auth/me", headers={"Authorization": "Basic !!notbase64"}).status_code == 401
    assert client.get("/api/auth/me", headers=client.creds.device).json() == {
        "kind": "device",
        "id": 1,
        "name": "DRONE-1",
        "role": "device",
    }


def test_admin_issues_device_tokens_and_sessions_die_with_the_password(client):
    admin = client.creds["admin"]
    assert client.post("/api/devices", headers=admin, json={"serial": "GS-7", "kind": "edge_node"}).status_code == 201
    token = client.post("/api/devices/GS-7/tokens", headers=admin).json()["token"]
    assert (
        client.post("/api/streams", headers={"Authorization": f"Bearer {token}"}, json={"kind": "push"}).status_code
        == 201
    )
    # a device registers streams only for itself
    r = client.post(
        "/api/streams", headers={"Authorization": f"Bearer {token}"}, json={"kind": "push", "device_serial": "DRONE-1"}
    )
    assert r.status_code == 403
    # a changed password invalidates the sessions issued before
    from db.models import User
    from db.security import hash_password

    ctx = client.app.state.ctx
    with ctx.sessions() as s, s.begin():
        s.query(User).filter_by(username="viewer").one().password_hash = hash_password("a-new-password")
    assert client.get("/api/auth/me", headers=client.creds["viewer"]).status_code == 401


def test_stream_urls_are_checked(client, tmp_path):
    op = client.creds["operator"]
    for url, why in [
        ("file:///etc/passwd", "disabled"),
        ("/etc/passwd", "disabled"),
        ("concat:/etc/passwd|/etc/shadow", "not allowed"),
        ("rtsp://", "no host"),
        ("javascript:alert(1)", "not allowed"),
    ]:
        r = client.post("/api/streams", headers=op, json={"kind": "pull", "url": url})
        assert r.status_code == 422 and why in r.text, (url, r.text)
    r = client.post("/api/streams", headers=op, json={"kind": "pull", "url": "rtsp://cam:s3cret@127.0.0.1:9/live"})
    assert r.status_code == 201 and r.json()["source"] == "rtsp://cam:***@127.0.0.1:9/live"  # never shows a password


def test_login_and_basic_are_throttled_per_address_and_the_admin_still_gets_in(client):
    """Wrong passwords from one address: 401 five times, then 429 with Retry-After (also for HTTP Basic, also for
    the right password from that address); the admin from an address they used before is let in at once."""
    good = client.post("/api/auth/login", json={"username": "admin", "password": "admin-password"})
    assert good.status_code == 200  # from the test client's address: now a trusted one for "admin"
    from fastapi.testclient import TestClient

    stranger = TestClient(client.app, client=("198.51.100.66", 50000))  # no lifespan: the app already runs
    codes = [
        stranger.post("/api/auth/login", json={"username": "admin", "password": f"guess{i}"}).status_code
        for i in range(8)
    ]
    assert codes[:5] == [401] * 5 and codes[-1] == 429
    r = stranger.post("/api/auth/login", json={"username": "admin", "password": "admin-password"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    basic = base64.b64encode(b"admin:admin-password").decode()
    assert stranger.get("/api/auth/me", headers={"Authorization": f"Basic {basic}"}).status_code == 429
    r = client.post("/api/auth/login", json={"username": "admin", "password": "admin-password"})
    assert r.status_code == 200 and r.json()["role"] == "admin"
    assert "secure" not in r.headers["set-cookie"].lower()  # plain HTTP
    assert (
        r.headers["x-content-type-options"] == "nosniff"
        and "frame-ancestors 'none'" in r.headers["content-security-policy"]
    )


def test_api_admin_actions_are_audited(client):
    admin = client.creds["admin"]
    assert client.post("/api/devices", headers=admin, json={"serial": "AUD-API-1"}).status_code == 201
    token = client.post("/api/devices/AUD-API-1/tokens", headers=admin).json()["token"]
    assert (
        client.post("/api/users", headers=admin, json={"username": "auditee", "password": "password123"}).status_code
        == 201
    )
    from db.audit import recent

    with client.app.state.ctx.sessions() as s:
        entries = [(e.actor, e.action, e.target, (e.detail or {}).get("via")) for e in reversed(recent(s))]
    assert entries[-3:] == [
        ("user:admin", "device.create", "device:AUD-API-1", "api"),
        ("user:admin", "device.token_issue", "device:AUD-API-1", "api"),
        ("user:admin", "user.create", "user:auditee", "api"),
    ]
    assert all(token not in str(e) for e in entries)
