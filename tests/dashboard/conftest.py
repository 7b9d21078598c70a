"""Dashboard fixtures: a migrated SQLite database with users, a processed run folder made by the real file sinks,
the app, and logged-in TestClients per role."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from db.engine import dispose_engines
from tests.dashboard.dash_helpers import PASSWORDS, login, make_run_dir, write_gpx  # noqa: F401


def _cheap_hasher():
    from argon2 import PasswordHasher

    return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


@pytest.fixture(autouse=True)
def cheap_password_hashing(monkeypatch):
    """Argon2 with its smallest cost in these tests (0.6 s per hash on a busy 2-core box otherwise).

    Verification reads the cost from each stored hash, so the code under test runs unchanged; the real hasher
    is back after each test, so other test folders never see this one.
    """
    import db.security

    monkeypatch.setattr(db.security, "_hasher", _cheap_hasher())


@pytest.fixture(scope="session")
def template_db(tmp_path_factory):
    """A migrated database with one user per role, built once and copied for each test."""
    import db.security
    from db.crud import create_user
    from db.engine import session_scope
    from db.migrate import upgrade

    path = tmp_path_factory.mktemp("template") / "dash.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    mp = pytest.MonkeyPatch()
    mp.setattr(db.security, "_hasher", _cheap_hasher())
    try:
        with session_scope(url) as s:
            for role, pw in PASSWORDS.items():
                create_user(s, role, pw, role=role)
    finally:
        mp.undo()
    dispose_engines()  # closes the file (and checkpoints SQLite's WAL) before it is copied
    return path


@pytest.fixture
def db_url(tmp_path, template_db):
    import shutil

    path = tmp_path / "dash.db"
    shutil.copyfile(template_db, path)
    yield f"sqlite:///{path}"
    dispose_engines()


@pytest.fixture
def users(db_url):
    return PASSWORDS


@pytest.fixture
def run_dir(tmp_path):
    start = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)
    gpx = write_gpx(tmp_path / "flight.gpx", start)
    return make_run_dir(tmp_path / "run", telemetry=gpx)


@pytest.fixture
def imported(db_url, run_dir):
    from db.run_import import import_run_dir

    return import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, device_serial="TEST-DRONE-1")


@pytest.fixture
def settings(db_url, tmp_path):
    from dashboard.settings import DashboardSettings

    return DashboardSettings(database_url=db_url, data_dir=tmp_path / "data", secret_key="x" * 40)


@pytest.fixture
def app(settings, users):
    from dashboard.app import create_app

    return create_app(settings)


@pytest.fixture
def client_for(app):
    from fastapi.testclient import TestClient

    clients = []

    def make(role: str | None):
        c = TestClient(app)
        clients.append(c)
        if role is not None:
            r = login(c, role, PASSWORDS[role])
            assert r.status_code == 303, r.text
        return c

    yield make
    for c in clients:
        c.close()
