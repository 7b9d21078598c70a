"""Login, roles on every page and API, CSRF, session expiry."""

from __future__ import annotations

import re

import pytest

from tests.dashboard.dash_helpers import PASSWORDS, csrf_of, login

PREFIX = "/dashboard"
PUBLIC = {PREFIX + "/login"}


def _dashboard_routes(app, method: str):
    from dashboard.routes import all_routes

    for path, methods in all_routes():
        if method in methods and PREFIX + path not in PUBLIC and path != "/":
            yield PREFIX + path


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: "csv" if m.group(1) == "fmt" else "1", path)


def test_every_page_and_api_needs_login(app, client_for):
    anon = client_for(None)
    gets = list(_dashboard_routes(app, "GET"))
    assert len(gets) >= 20  # the route table is really being walked
    for path in gets:
        r = anon.get(_concrete(path), follow_redirects=False)
        if "/api/" in path:
            assert r.status_code == 401, path
        else:
            assert r.status_code == 303 and "/login?next=" in r.headers["location"], path


def test_every_post_needs_csrf(app, client_for):
    admin = client_for("admin")
    posts = list(_dashboard_routes(app, "POST"))
    assert len(posts) >= 15
    for path in posts:
        r = admin.post(_concrete(path), data={"name": "x"}, follow_redirects=False)
        assert r.status_code == 403, path
        assert "Form expired" in r.text or "CSRF" in r.text, path


def test_login_wrong_password_and_throttle(client_for):
    c = client_for(None)
    r = login(c, "viewer", "wrong-password")
    assert r.status_code == 401 and "wrong user name or password" in r.text
    for _ in range(5):
        login(c, "operator", "nope-nope")
    r = login(c, "operator", PASSWORDS["operator"])  # right password, but the name is locked for a while
    assert r.status_code == 429


def test_login_redirects_only_inside_dashboard(client_for):
    c = client_for(None)
    page = c.get("/dashboard/login")
    token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    r = c.post(
        "/dashboard/login",
        data={
            "username": "viewer",
            "password": PASSWORDS["viewer"],
            "csrf_token": token,
            "next": "https://evil.example/steal",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/dashboard/map"


@pytest.mark.parametrize(
    "role,path,allowed",
    [
        ("viewer", "/dashboard/users", False),
        ("operator", "/dashboard/users", False),
        ("admin", "/dashboard/users", True),
        ("viewer", "/dashboard/map", True),
        ("viewer", "/dashboard/devices", True),
    ],
)
def test_role_pages(client_for, role, path, allowed):
    r = client_for(role).get(path)
    assert r.status_code == (200 if allowed else 403)
    if not allowed:
        assert "needs the admin role" in r.text


@pytest.mark.parametrize("role,expected", [("viewer", 403), ("operator", 303), ("admin", 303)])
def test_role_writes(client_for, role, expected):
    c = client_for(role)
    r = c.post("/dashboard/tasks", data={"name": f"patrol by {role}", "csrf_token": csrf_of(c)}, follow_redirects=False)
    assert r.status_code == expected
    r = c.post("/dashboard/devices", data={"serial": f"DEV-{role}", "csrf_token": csrf_of(c)}, follow_redirects=False)
    assert r.status_code == (303 if role == "admin" else 403)


def test_api_forbidden_is_json(client_for):
    r = client_for("viewer").post("/dashboard/users", headers={"x-csrf-token": "bogus"})
    assert r.status_code == 403 and r.json()["detail"]


def test_logout_ends_session(client_for):
    c = client_for("viewer")
    assert c.get("/dashboard/api/runs").status_code == 200
    r = c.post("/dashboard/logout", data={"csrf_token": csrf_of(c)}, follow_redirects=False)
    assert r.status_code == 303
    assert c.get("/dashboard/api/runs").status_code == 401


def test_session_expires_after_absolute_lifetime(client_for, monkeypatch, settings):
    import dashboard.auth as auth

    c = client_for("viewer")
    assert c.get("/dashboard/api/runs").status_code == 200
    real = auth.time.time
    monkeypatch.setattr(auth.time, "time", lambda: real() + settings.session_absolute_s + 5)
    assert c.get("/dashboard/api/runs").status_code == 401


def test_password_change_and_deactivation_end_sessions(client_for, db_url):
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import User
    from db.security import hash_password

    viewer = client_for("viewer")
    operator = client_for("operator")
    with session_scope(db_url) as s:
        s.scalar(select(User).where(User.username == "viewer")).password_hash = hash_password("a-new-password")
        s.scalar(select(User).where(User.username == "operator")).active = False
    assert viewer.get("/dashboard/api/runs").status_code == 401
    assert operator.get("/dashboard/api/runs").status_code == 401


def test_cookie_flags(client_for):
    c = client_for(None)
    r = c.get("/dashboard/login")
    cookie = r.headers["set-cookie"]
    assert "airpatrol_dashboard=" in cookie and "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
