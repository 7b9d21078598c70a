"""Which database, and how to connect to it.

``AIRPATROL_DATABASE_URL`` selects the database (``mysql+pymysql://user:pw@host/airpatrol`` for MariaDB/MySQL,
``sqlite:///path.db``); without it a SQLite file ``airpatrol.db`` lives in ``AIRPATROL_DATA_DIR`` or the user's
data folder (platformdirs). The same code and migrations run on both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker


class DatabaseConfigError(ValueError):
    pass


def default_data_dir() -> Path:
    env = os.environ.get("AIRPATROL_DATA_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("airpatrol", appauthor=False))


def database_url(url: str | None = None) -> str:
    """The URL to use: the argument, else ``AIRPATROL_DATABASE_URL``, else the default SQLite file."""
    url = url or os.environ.get("AIRPATROL_DATABASE_URL")
    if url:
        return url
    path = default_data_dir() / "airpatrol.db"
    return f"sqlite:///{path}"


def make_db_engine(url: str | None = None, echo: bool = False) -> Engine:
    """An engine with the settings both back ends need (utf8mb4 on MariaDB, foreign keys + WAL on SQLite)."""
    raw = database_url(url)
    try:
        parsed = make_url(raw)
    except ArgumentError:
        raise DatabaseConfigError(
            f"database URL {raw!r} is not a valid SQLAlchemy URL "
            "(e.g. mysql+pymysql://user:password@host/airpatrol or sqlite:///airpatrol.db)"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, echo=echo, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if backend in ("mysql", "mariadb"):
        if "charset" not in parsed.query:
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        return create_engine(parsed, echo=echo, pool_pre_ping=True, pool_recycle=3600)
    raise DatabaseConfigError(
        f"database URL {parsed.render_as_string(hide_password=True)}: "
        f"unsupported back end {backend!r} (use SQLite or MariaDB/MySQL)"
    )


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # pysqlite's own transaction handling is turned off so SQLAlchemy's BEGIN (below) is the only one.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


WRITE = {"sqlite_write": True}  # execution option: this transaction will write


def _sqlite_begin(conn) -> None:
    # Real transactions that include the SELECTs (pysqlite would otherwise start them only at the first write).
    # A transaction that reads and then writes must take the write lock up front (IMMEDIATE): in WAL mode a
    # deferred one fails at once with "database is locked" if another connection committed in between.
    # Read-only transactions stay deferred so they never wait for writers.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("sqlite_write") else "BEGIN")


_sessionmakers: dict[str, sessionmaker] = {}


def session_factory(url: str | None = None) -> sessionmaker[Session]:
    """One engine + sessionmaker per URL for the process."""
    key = database_url(url)
    if key not in _sessionmakers:
        _sessionmakers[key] = sessionmaker(make_db_engine(key), expire_on_commit=False)
    return _sessionmakers[key]


@contextmanager
def session_scope(url: str | None = None, write: bool = False) -> Iterator[Session]:
    """A session in one transaction: committed on success, rolled back on any exception.

    ``write=True`` for transactions that read before they write (SQLite: ``BEGIN IMMEDIATE``, see above).
    """
    with session_factory(url)() as session, session.begin():
        if write:
            begin_write(session)
        yield session


def begin_write(session: Session) -> None:
    """Start ``session``'s transaction as a writing one; call before its first statement."""
    session.connection(execution_options=WRITE)


def dispose_engines() -> None:
    """Close every cached engine (tests, or before forking worker processes)."""
    for maker in _sessionmakers.values():
        maker.kw["bind"].dispose()
    _sessionmakers.clear()
