"""Alembic environment: runs migrations on the connection handed over by db.migrate, or on the configured URL."""

from __future__ import annotations

from alembic import context

from db.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs) -> None:
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table instead
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from db.engine import make_db_engine

        with make_db_engine(config.get_main_option("sqlalchemy.url")).connect() as conn:
            _configure(connection=conn)
            with context.begin_transaction():
                context.run_migrations()
        return
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
