"""DatabaseSink across connection failures (tests/faults/test_mariadb_restart.py stops a real server; these make
the two hard cases happen on every run): a transaction that failed before its COMMIT is written again, and one
whose COMMIT went through but whose answer was lost is *not* written again. Both back ends.

The lost answer is made with a session event that raises the driver's "lost connection" error right after the
real COMMIT (or right before it) - the database is real, only the moment of the failure is chosen."""

from __future__ import annotations

import itertools
import logging
import socket

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from db.engine import make_db_engine, session_scope
from db.models import ProcessingRun, TrackRow, TrackSpeed
from db.retry import DatabaseUnavailable, retry_db
from db.sink import DatabaseSink
from tests.db.test_sink import frames, info


def _lost_connection() -> OperationalError:
    return OperationalError(
        "COMMIT", None, Exception(2013, "Lost connection to server during query"), connection_invalidated=True
    )


@pytest.mark.parametrize("when", ["before_commit", "after_commit"])
def test_batches_survive_lost_connections_without_duplicates(db_url, when, caplog):
    engine = make_db_engine(db_url)
    maker = sessionmaker(engine, expire_on_commit=False)
    commits = itertools.count(1)
    # commit 1 is the run row; 90 rows in batches of 12: batches at 2 (-> 3), 4 (-> 5), 6, 7 (-> 8), 9, 10, 11;
    # 12 is the closing transaction
    failing = {2, 4, 7, 12}

    @event.listens_for(maker, when)
    def fail(session):
        if next(commits) in failing:
            raise _lost_connection()

    sink = DatabaseSink(session_maker=maker, batch_rows=12, retry_s=30)
    with caplog.at_level(logging.WARNING, logger="airpatrol.db"):
        sink.open(info())
        for r in frames(50):
            sink.write(r)
        sink.close({"mode": "dual_layer"})
    engine.dispose()
    retries = [r.getMessage() for r in caplog.records if "database unreachable while" in r.getMessage()]
    assert len(retries) == 4 and all("retry 1 in 0.5 s, giving up after 30 s" in m for m in retries), retries
    with session_scope(db_url) as s:
        run = s.get(ProcessingRun, sink.run_id)
        assert run.status == "complete" and run.frames_done == 50
        assert s.scalar(select(func.count()).select_from(TrackRow)) == 2
        # every (track, frame) row once: 50 of the car, 40 of the truck
        assert s.scalar(select(func.count()).select_from(TrackSpeed)) == 90
        pairs = s.execute(select(TrackSpeed.track_id, TrackSpeed.frame)).all()
        assert len(set(pairs)) == 90


def test_an_unreachable_database_is_given_up_after_the_budget(caplog):
    with socket.socket() as sock:  # a port nobody listens on: connection refused, a real driver error
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    engine = make_db_engine(f"mysql+pymysql://u:p@127.0.0.1:{port}/none")

    def connect():
        with engine.connect() as c:
            return c.exec_driver_sql("SELECT 1").scalar()

    waits: list[float] = []
    with caplog.at_level(logging.WARNING, logger="airpatrol.db"), pytest.raises(DatabaseUnavailable) as err:
        retry_db(connect, "testing", budget_s=8, sleep=waits.append)
    engine.dispose()
    assert waits == [0.5, 1.0, 2.0, 4.0]  # back-off, bounded by the budget (the next 5 s would pass 8 s)
    assert "database unreachable while testing" in str(err.value) and "2003" in str(err.value)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5 and "giving up" in lines[-1]


def test_other_errors_are_not_retried():
    engine = make_db_engine("sqlite://")
    calls = []

    def bad_sql():
        calls.append(1)
        with engine.connect() as c:
            c.exec_driver_sql("SELECT * FROM no_such_table")

    with pytest.raises(OperationalError):
        retry_db(bad_sql, "testing", budget_s=30, sleep=lambda s: None)
    assert calls == [1]
