"""Schema migrations (Alembic) driven from code: ``upgrade()`` is what ``airpatrol db upgrade`` runs."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db.engine import database_url, make_db_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class SchemaOutOfDateError(ValueError):
    pass


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", database_url(url).replace("%", "%%"))  # ConfigParser interpolation
    return cfg


def upgrade(url: str | None = None, revision: str = "head") -> str | None:
    """Bring the database to ``revision``; returns the revision it is at afterwards."""
    cfg = alembic_config(url)
    engine = make_db_engine(url)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        return current_revision(url, engine)
    finally:
        engine.dispose()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(url: str | None = None, engine=None) -> str | None:
    own = engine is None
    engine = engine or make_db_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        if own:
            engine.dispose()


def require_current(url: str | None = None) -> None:
    """Raise a clear error when the schema is missing or older than this code (instead of SQL errors later)."""
    have, want = current_revision(url), head_revision()
    if have != want:
        state = "has no AirPatrol schema" if have is None else f"is at schema revision {have}, the code needs {want}"
        shown = make_db_engine(url).url.render_as_string(hide_password=True)
        raise SchemaOutOfDateError(f"database {shown} {state}; run `airpatrol db upgrade`")
