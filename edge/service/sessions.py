"""The service's database sessions (``service_sessions``): shared by the service process and its stream processes."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from db.engine import make_db_engine


def service_sessions(url: str) -> sessionmaker[Session]:
    """Sessions for the service's many threads (stream workers, job workers, requests) writing at once.

    On SQLite, ``db.engine`` opens transactions with a deferred ``BEGIN``: a transaction that reads and then writes
    fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT, the busy timeout does not apply) when another
    connection committed in between - which concurrent writers do all the time. ``BEGIN IMMEDIATE`` takes the write
    lock up front, so writers queue on the busy timeout instead. (MariaDB has row locks: nothing to change.)
    """
    from db.engine import _sqlite_begin

    engine = make_db_engine(url)
    if engine.dialect.name == "sqlite":
        event.remove(engine, "begin", _sqlite_begin)
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    return sessionmaker(engine, expire_on_commit=False)
