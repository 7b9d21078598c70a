"""Client tests run against a real `airpatrol serve` process on 127.0.0.1 (fake-detector pipeline, fresh database)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.edge.service.conftest import clip, settings_factory, template_db  # noqa: F401  (fixtures)

HERE = Path(__file__).resolve().parent
SERVICE_TESTS = HERE.parent / "service"
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))


def client_env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(SERVICE_TESTS)]), "YOLO_OFFLINE": "1", **extra}


@pytest.fixture
def served(settings_factory, tmp_path):  # noqa: F811
    """(base URL, device token of DRONE-1, settings) of a running `airpatrol serve`."""
    import service_helpers
    from service_helpers import free_port, wait_for

    settings = settings_factory()
    port = free_port()
    config = tmp_path / "airpatrol.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": settings.database_url, "data_dir": settings.data_dir,
        "pipeline": settings.pipeline.model_dump(mode="json", include={"calibration"}),
        "service": {**settings.service.model_dump(mode="json", exclude_none=True),
                    "pipeline_factory": "service_fakes:make_pipeline"}}))
    proc = subprocess.Popen([sys.executable, "-m", "edge.cli", "serve", "--config", str(config), "--port", str(port),
                             "--log-level", "warning"], env=client_env(), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, proc.stderr.read()
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False
    try:
        wait_for(up, 90, "`airpatrol serve` to start", every=0.3)
        yield base, service_helpers.DEVICE_TOKENS["DRONE-1"], settings
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
