"""The study approaches table (revision 0005): built by the migration on SQLite and MariaDB, one site per row
(a task or a run, never both or neither), removed with its site, and taken away again by the downgrade."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError, OperationalError

from db.engine import dispose_engines, make_db_engine, session_scope
from db.migrate import alembic_config, current_revision, head_revision, upgrade
from db.models import ProcessingRun, StudyApproach, Task


def _approach(**site) -> StudyApproach:
    return StudyApproach(key="A", name="north arm", lon=11.5, lat=48.1, heading_deg=180.0, radius_m=12.0, **site)


def _tables(url: str) -> set[str]:
    engine = make_db_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_approaches_upgrade_and_downgrade(empty_db_url):
    assert upgrade(empty_db_url) == head_revision()
    assert "study_approaches" in _tables(empty_db_url)
    with session_scope(empty_db_url) as s:
        task = Task(name="junction survey")
        run = ProcessingRun(status="complete")
        s.add_all([task, run])
        s.flush()
        s.add_all([_approach(task_id=task.id), _approach(run_id=run.id)])  # the same key at two sites
    with session_scope(empty_db_url) as s:
        rows = list(s.scalars(select(StudyApproach).order_by(StudyApproach.id)))
        assert [(r.task_id is not None, r.run_id is not None, r.name) for r in rows] == [
            (True, False, "north arm"),
            (False, True, "north arm"),
        ]
        assert rows[0].lat == 48.1 and rows[0].updated_at is not None
    dispose_engines()
    engine = make_db_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            cfg = alembic_config(empty_db_url)
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0004")
    finally:
        engine.dispose()
    assert current_revision(empty_db_url) == "0004"
    assert "study_approaches" not in _tables(empty_db_url)
    assert upgrade(empty_db_url) == head_revision()  # and up again on the downgraded database
    assert "study_approaches" in _tables(empty_db_url)


@pytest.mark.parametrize("site", ["both", "neither", "same key twice"])
def test_an_approach_belongs_to_exactly_one_site(db_url, site):
    with session_scope(db_url) as s:
        task, run = Task(name="t"), ProcessingRun(status="complete")
        s.add_all([task, run])
        s.flush()
        task_id, run_id = task.id, run.id
    with pytest.raises((IntegrityError, OperationalError)):  # MariaDB reports a failed CHECK as error 4025
        with session_scope(db_url) as s:
            if site == "both":
                s.add(_approach(task_id=task_id, run_id=run_id))
            elif site == "neither":
                s.add(_approach())
            else:
                s.add_all([_approach(run_id=run_id), _approach(run_id=run_id)])


def test_approaches_go_with_their_site(db_url):
    with session_scope(db_url) as s:
        task, run = Task(name="t"), ProcessingRun(status="complete")
        s.add_all([task, run])
        s.flush()
        s.add_all([_approach(task_id=task.id), _approach(run_id=run.id)])
    with session_scope(db_url) as s:
        s.delete(s.scalar(select(Task)))
    with session_scope(db_url) as s:
        assert [r.run_id is not None for r in s.scalars(select(StudyApproach))] == [True]
        s.delete(s.scalar(select(ProcessingRun)))
    with session_scope(db_url) as s:
        assert list(s.scalars(select(StudyApproach))) == []
