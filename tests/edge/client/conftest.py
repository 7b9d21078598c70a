"""Client tests run against a real `airpatrol serve` process on 127.0.0.1 (fake-detector pipeline, fresh database)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

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

    settings = settings_factory()
    with service_helpers.serve_process(settings, tmp_path) as base:
        yield base, service_helpers.DEVICE_TOKENS["DRONE-1"], settings
