"""Database fixtures: every test that takes ``db_url`` runs on SQLite and on a real MariaDB server.

The MariaDB server is started once per session in a temporary folder (``mariadb-install-db`` + ``mariadbd`` on
127.0.0.1, a password user) and stopped at the end. Without ``mariadbd`` on the machine the MariaDB variants skip
locally; with ``AIRPATROL_REQUIRE_MARIADB=1`` (CI) they fail instead, so CI cannot silently skip them.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

from db.engine import dispose_engines, make_db_engine
from db.mariadb_server import MariaDBServer, MariaDBUnavailable, find_server_binaries
from db.migrate import upgrade
from db.models import Base

MARIADB_MISSING = (
    "mariadbd / mariadb-install-db not installed (Debian: apt-get install mariadb-server); "
    "MariaDB variants skipped locally - CI installs it and sets AIRPATROL_REQUIRE_MARIADB=1"
)


@pytest.fixture(scope="session")
def mariadb_server():
    if find_server_binaries() is None:
        if os.environ.get("AIRPATROL_REQUIRE_MARIADB") == "1":
            pytest.fail("AIRPATROL_REQUIRE_MARIADB=1 but " + MARIADB_MISSING)
        pytest.skip(MARIADB_MISSING)
    try:
        server = MariaDBServer(durable=False).start()
    except MariaDBUnavailable as exc:
        pytest.fail(f"could not start MariaDB: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _mariadb_migrated(mariadb_server):
    """One migrated database for the session; tests empty it instead of re-running the DDL (2 s on MariaDB)."""
    url = mariadb_server.create_database("airpatrol_shared")
    upgrade(url)
    return url


def _empty_all_tables(url: str) -> None:
    engine = make_db_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("SET FOREIGN_KEY_CHECKS=0"))
            for table in reversed(Base.metadata.sorted_tables):
                conn.execute(text(f"DELETE FROM {table.name}"))
            conn.execute(text("SET FOREIGN_KEY_CHECKS=1"))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "mariadb"])
def db_url(request, tmp_path):
    """A migrated, empty database URL on each back end."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'airpatrol.db'}"
        upgrade(url)
    else:
        url = request.getfixturevalue("_mariadb_migrated")
        _empty_all_tables(url)
    yield url
    dispose_engines()


@pytest.fixture(params=["sqlite", "mariadb"])
def empty_db_url(request, tmp_path):
    """A database with no schema at all (migration tests)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
    else:
        server = request.getfixturevalue("mariadb_server")
        name = f"empty_{os.getpid()}_{abs(hash(request.node.nodeid)) % 10**8}"
        yield server.create_database(name)
        server.drop_database(name)
    dispose_engines()
