"""Security headers, no inline script anywhere, Secure cookies over TLS, login throttle over HTTP."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.dashboard.dash_helpers import PASSWORDS, login

PAGES = [
    "/dashboard/login",
    "/dashboard/map",
    "/dashboard/runs",
    "/dashboard/flights",
    "/dashboard/tasks",
    "/dashboard/devices",
    "/dashboard/users",
    "/dashboard/field-tests",
    "/dashboard/live",
]


def test_security_headers_on_pages_api_and_static(client_for, imported):
    c = client_for("admin")
    for path in PAGES + [
        f"/dashboard/runs/{imported.run_id}",
        "/dashboard/api/runs",
        "/dashboard/static/app/common.js",
    ]:
        r = c.get(path)
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        script_src = re.search(r"script-src ([^;]*)", csp).group(1)
        assert script_src == "'self'", csp  # no 'unsafe-inline', no 'unsafe-eval'
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin" and r.headers["x-frame-options"] == "DENY"
        assert "strict-transport-security" not in r.headers  # plain HTTP


def test_no_page_has_inline_script(client_for, imported):
    """Every <script> either loads a file from this server or is a JSON data block (never executed)."""
    c = client_for("admin")
    pages = PAGES + [
        f"/dashboard/runs/{imported.run_id}",
        f"/dashboard/runs/{imported.run_id}/compare",
        f"/dashboard/flights/{imported.flight_id}",
    ]
    seen = 0
    for path in pages:
        html = c.get(path).text
        for tag, body in re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.S):
            seen += 1
            assert 'src="' in tag or 'type="application/json"' in tag, (path, tag, body[:80])
            if 'src="' in tag:
                assert body.strip() == ""
        assert not re.search(r"\son[a-z]+\s*=", html), path  # no inline event handlers either
    assert seen >= 10


def test_cookies_are_secure_over_tls(app):
    c = TestClient(app, base_url="https://airpatrol.example")
    r = login(c, "viewer", PASSWORDS["viewer"])
    assert r.status_code == 303
    cookie = r.headers["set-cookie"].lower()
    assert "secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie
    assert r.headers["strict-transport-security"].startswith("max-age=")
    plain = TestClient(app)
    cookie = login(plain, "viewer", PASSWORDS["viewer"]).headers["set-cookie"].lower()
    assert "secure" not in cookie and "httponly" in cookie  # a field laptop on plain HTTP still works


def test_stranger_cannot_lock_the_admin_out(app, settings):
    """Many wrong admin passwords from one address slow that address down; the admin, from an address they
    logged in from before, gets in at once - also through a second app on the same database (another worker)."""
    office = TestClient(app, client=("192.0.2.10", 40000))
    assert login(office, "admin", PASSWORDS["admin"]).status_code == 303
    stranger = TestClient(app, client=("198.51.100.66", 40000))
    codes = [login(stranger, "admin", f"guess-{i}").status_code for i in range(12)]
    assert codes[:5] == [401] * 5 and 429 in codes  # free tries, then refused (refusals are not counted)
    r = login(stranger, "admin", PASSWORDS["admin"])
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1  # even the right password waits
    from dashboard.app import create_app

    other_worker = create_app(settings, migrate=False)
    assert login(TestClient(other_worker, client=("198.51.100.66", 40001)), "viewer", "x").status_code == 429
    assert login(TestClient(other_worker, client=("192.0.2.10", 40001)), "admin", PASSWORDS["admin"]).status_code == 303
