"""Helpers of the service tests (imported by conftest and the test modules)."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import service_fakes

FAST = {  # short timings so the suite stays quick; behaviour is the same
    "queue_frames": 4,
    "reconnect_initial_s": 0.2,
    "reconnect_max_s": 1.0,
    "open_timeout_s": 5.0,
    "read_timeout_s": 2.0,
    "job_poll_s": 0.2,
    "job_heartbeat_s": 0.3,
    "job_lease_s": 3.0,
    "db_flush_s": 0.5,
    "min_over_limit_s": 0.2,
    "secret_key": "test-secret-key-0123456789",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ROLES = ("admin", "operator", "viewer")
DEVICES = ("DRONE-1", "DRONE-2")


def seed_accounts(app) -> dict[str, str]:
    """Users admin/operator/viewer (password '<role>-password') and two devices; returns the devices' tokens."""
    from db.crud import create_device, create_user, issue_device_token

    tokens = {}
    with app.state.ctx.sessions() as s, s.begin():
        for role in ROLES:
            create_user(s, role, f"{role}-password", role=role)
        for serial in DEVICES:
            tokens[serial] = issue_device_token(s, create_device(s, serial))
    return tokens


class Credentials:
    """Authorization headers of the seeded admin, operator, viewer (session tokens) and devices (API tokens)."""

    def __init__(self, app, device_tokens: dict[str, str]):
        from sqlalchemy import select

        from db.models import User

        ctx = app.state.ctx
        self.headers = {serial: {"Authorization": f"Bearer {tok}"} for serial, tok in device_tokens.items()}
        with ctx.sessions() as s:
            for user in s.scalars(select(User)):
                self.headers[user.username] = {"Authorization": f"Bearer {ctx.signer.issue(user)}"}
        self.device = self.headers["DRONE-1"]

    def __getitem__(self, who: str) -> dict[str, str]:
        return self.headers[who]


DEVICE_TOKENS: dict[str, str] = {}  # filled by the session fixture that seeds the template database


@contextmanager
def running_app(settings, pipeline_factory=service_fakes.make_pipeline):
    """TestClient with the app's lifespan (workers started and stopped); ``client.creds`` has the credentials."""
    from fastapi.testclient import TestClient

    from edge.service.app import create_app

    app = create_app(settings, pipeline_factory=pipeline_factory)
    with TestClient(app) as client:
        client.creds = Credentials(app, DEVICE_TOKENS)
        yield client


@contextmanager
def live_server(app):
    """uvicorn in a thread on a free 127.0.0.1 port; yields the base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", ws_max_size=2 * 1024 * 1024
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def serve_process(settings, folder, env: dict | None = None, **service):
    """A real `airpatrol serve` subprocess on a free 127.0.0.1 port with ``settings`` (+ ``service`` overrides) and
    the fake-detector pipeline; yields its base URL. Stopped with SIGTERM (graceful) at the end."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import httpx
    import yaml

    here = Path(__file__).resolve().parent
    port = free_port()
    config = Path(folder) / "airpatrol-serve.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "database_url": settings.database_url,
                "data_dir": settings.data_dir,
                "pipeline": settings.pipeline.model_dump(mode="json", include={"calibration"}),
                "service": {
                    **settings.service.model_dump(mode="json", exclude_none=True),
                    "pipeline_factory": "service_fakes:make_pipeline",
                    **service,
                },
            }
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(here.parents[2]), str(here)]),
        "YOLO_OFFLINE": "1",
        **(env or {}),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edge.cli",
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, proc.stderr.read()
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, 90, "`airpatrol serve` to start", every=0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
