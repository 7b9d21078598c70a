"""Fault tests reuse the service tests' fixtures: seeded template database, settings, the fake-detector clip;
``mariadb`` is a MariaDB server of this module's own, which the tests stop and start again."""

from __future__ import annotations

import os

import pytest

from tests.edge.service.conftest import clip, settings_factory, template_db  # noqa: F401


@pytest.fixture(scope="module")
def mariadb():
    """A durable MariaDB server (flushes every commit) that this module's tests may stop and start again."""
    from db.mariadb_server import MariaDBServer, MariaDBUnavailable, find_server_binaries
    from tests.db.conftest import MARIADB_MISSING

    if find_server_binaries() is None:
        if os.environ.get("AIRPATROL_REQUIRE_MARIADB") == "1":
            pytest.fail("AIRPATROL_REQUIRE_MARIADB=1 but " + MARIADB_MISSING)
        pytest.skip(MARIADB_MISSING)
    try:
        server = MariaDBServer(buffer_pool="64M", durable=True).start()
    except MariaDBUnavailable as exc:
        pytest.fail(f"could not start MariaDB: {exc}")
    yield server
    server.stop()
