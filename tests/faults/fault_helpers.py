"""Helpers of the fault tests: a real ``airpatrol serve`` whose log goes to a file (a pipe nobody reads would block
a server that logs a lot)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml
from service_helpers import free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
SERVICE_TESTS = REPO / "tests" / "edge" / "service"


@contextmanager
def serve_logged(settings, folder: Path, env: dict | None = None, wrap: list[str] | None = None, **service):
    """A real `airpatrol serve` (fake detector; ``service`` overrides its settings); yields (process, base URL,
    log file). ``wrap``: a command the server is started under (e.g. ``unshare ...``). Killed at the end."""
    config = folder / "airpatrol-serve.yaml"
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
    port = free_port()
    log_path = folder / "serve.log"
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(SERVICE_TESTS)]),
        "YOLO_OFFLINE": "1",
        **(env or {}),
    }
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                *(wrap or []),
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
            env=full_env,
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    base = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, log_path.read_text()[-3000:]
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, 90, "`airpatrol serve` to start", every=0.3)
        yield proc, base, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
