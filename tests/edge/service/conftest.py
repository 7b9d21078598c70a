"""Fixtures of the service tests: a settings object on a temporary SQLite database, users and a device with
credentials, the app with a fake-detector pipeline (TestClient or real uvicorn on 127.0.0.1), and test clips."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # service_fakes / service_helpers; the restart test's subprocess imports them too

import service_fakes  # noqa: E402
import service_helpers  # noqa: E402
from service_helpers import FAST, Credentials, live_server, running_app  # noqa: E402


def make_settings(folder: Path, **service):
    from edge.config import load_settings

    return load_settings(
        None,
        {
            "data_dir": str(folder / "data"),
            "database_url": f"sqlite:///{folder / 'airpatrol.db'}",
            "pipeline": {"calibration": {"metres_per_pixel": service_fakes.METRES_PER_PIXEL}},
            "service": {**FAST, **service},
        },
    )


@pytest.fixture(scope="session")
def template_db(tmp_path_factory) -> Path:
    """A migrated database with the test accounts, made once (migrations and Argon2 hashes take seconds)."""
    from db.engine import dispose_engines
    from edge.service.app import create_app

    folder = tmp_path_factory.mktemp("template")
    app = create_app(make_settings(folder), pipeline_factory=service_fakes.make_pipeline)
    service_helpers.DEVICE_TOKENS.update(service_helpers.seed_accounts(app))
    app.state.ctx.close()  # checkpoints SQLite's WAL into the file that is copied
    dispose_engines()
    return folder / "airpatrol.db"


@pytest.fixture
def settings_factory(tmp_path, template_db):
    """Settings on a fresh copy of the template database in ``tmp_path``; keyword arguments go to ``service``."""
    from db.engine import dispose_engines

    shutil.copy(template_db, tmp_path / "airpatrol.db")
    yield lambda **service: make_settings(tmp_path, **service)
    dispose_engines()


@pytest.fixture
def settings(settings_factory):
    return settings_factory()


@pytest.fixture
def client(settings):
    with running_app(settings) as c:
        yield c


@pytest.fixture
def server(settings):
    """(app, "127.0.0.1:PORT", credentials) of a real server."""
    from edge.service.app import create_app

    app = create_app(settings, pipeline_factory=service_fakes.make_pipeline)
    with live_server(app) as addr:
        yield app, addr, Credentials(app, service_helpers.DEVICE_TOKENS)


@pytest.fixture(scope="session")
def clip(tmp_path_factory) -> Path:
    """4 s H.264 clip, 320x240 @ 25 fps, three moving bright vehicles."""
    return service_fakes.write_clip(tmp_path_factory.mktemp("clips") / "traffic.mp4", 100)
