"""The dashboard inside the edge service app (`airpatrol serve`): same database, one login for pages and API."""

from __future__ import annotations

import shutil

import pytest

from tests.dashboard.dash_helpers import PASSWORDS, csrf_of, login


@pytest.fixture
def service_client(tmp_path, template_db):
    from fastapi.testclient import TestClient

    from db.engine import dispose_engines
    from edge.config import load_settings
    from edge.service.app import create_app

    shutil.copyfile(template_db, tmp_path / "airpatrol.db")
    settings = load_settings(
        None,
        {
            "data_dir": str(tmp_path / "data"),
            "database_url": f"sqlite:///{tmp_path / 'airpatrol.db'}",
            "service": {"job_workers": 0, "resume_streams": False, "secret_key": "service-test-secret-0123456789"},
        },
    )
    with TestClient(create_app(settings)) as client:
        yield client
    dispose_engines()


def test_root_leads_to_the_dashboard(service_client):
    r = service_client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/dashboard/"
    assert service_client.get("/healthz").status_code == 200  # the service's own routes are untouched


def test_dashboard_login_also_opens_the_service_api(service_client):
    c = service_client
    assert c.get("/api/auth/me").status_code == 401
    r = login(c, "operator", PASSWORDS["operator"])
    assert r.status_code == 303
    assert "airpatrol_session" in c.cookies and "airpatrol_dashboard" in c.cookies
    me = c.get("/api/auth/me")
    assert me.status_code == 200 and me.json()["name"] == "operator" and me.json()["role"] == "operator"
    c.post("/dashboard/logout", data={"csrf_token": csrf_of(c)})
    assert c.get("/api/auth/me").status_code == 401
    assert c.get("/dashboard/api/runs").status_code == 401


def test_service_pages(service_client):
    c = service_client
    login(c, "viewer", PASSWORDS["viewer"])
    runs = c.get("/dashboard/runs").text
    assert "Batch jobs of the edge service" in runs and 'id="job-upload"' not in runs  # viewers do not upload
    assert c.get("/dashboard/api/live").json() == {"attached": True, "streams": []}
    assert "No active stream" in c.get("/dashboard/live").text


def test_users_made_through_the_service_api_log_in_to_the_dashboard(service_client):
    c = service_client
    admin = c.post("/api/auth/login", json={"username": "admin", "password": PASSWORDS["admin"]}).json()["access_token"]
    r = c.post(
        "/api/users",
        json={"username": "pilot", "password": "pilot-password", "role": "operator"},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert r.status_code == 201, r.text
    c.cookies.clear()
    assert login(c, "pilot", "pilot-password").status_code == 303
    assert 'id="job-upload"' in c.get("/dashboard/runs").text


def test_mot_export_of_a_service_job_uses_the_job_folder(service_client, tmp_path, run_dir):
    """Runs of batch jobs do not carry their folder in the summary; the job row knows it."""
    from sqlalchemy import update

    from db.models import ProcessingRun
    from db.run_import import import_run_dir
    from edge.service.models import JobRow

    c = service_client
    sessions = c.app.state.ctx.sessions
    run = import_run_dir(run_dir, sessions, import_telemetry=False)
    with sessions() as s, s.begin():
        s.execute(
            update(ProcessingRun).where(ProcessingRun.id == run.run_id).values(summary_json={"mode": "dual_layer"})
        )
        s.add(
            JobRow(
                video_upload_id="0" * 32,
                created_by="user:operator",
                status="complete",
                run_id=run.run_id,
                out_dir=str(run_dir),
            )
        )
    login(c, "viewer", PASSWORDS["viewer"])
    r = c.get(f"/dashboard/runs/{run.run_id}/export.mot")
    assert r.status_code == 200 and r.text == (run_dir / "tracks_mot.txt").read_text()


def test_an_app_s_own_sync_http_error_handler_still_answers_outside_the_dashboard(settings, users):
    # found by mypy: the dashboard awaited the app's earlier HTTPException handler, a TypeError (500) when it was sync
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse
    from fastapi.testclient import TestClient
    from starlette.exceptions import HTTPException

    from dashboard.app import mount_dashboard

    app = FastAPI()

    @app.exception_handler(HTTPException)
    def plain(request, exc):  # a plain function: Starlette runs it in a thread and does not await it
        return PlainTextResponse(f"app says {exc.status_code}", status_code=exc.status_code)

    mount_dashboard(app, settings)
    with TestClient(app) as client:
        r = client.get("/no/such/page")
    assert r.status_code == 404 and r.text == "app says 404"
