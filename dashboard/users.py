"""User accounts outside the web pages: the demo login and `airpatrol user add`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from db.crud import create_user
from db.models import User

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "airpatrol-demo"  # documented in docs/dashboard.md; for the local demo only


@contextmanager
def session_for(target) -> Iterator[Session]:
    """A session in a transaction for any of: Engine, sessionmaker, URL, None (committed here) or the caller's
    Session (flushed only: its transaction is the caller's to commit)."""
    if isinstance(target, Session):
        yield target
        target.flush()
        return
    if isinstance(target, Engine):
        maker = sessionmaker(target, expire_on_commit=False)
    elif isinstance(target, sessionmaker):
        maker = target
    else:
        from db.engine import session_factory

        maker = session_factory(target)
    with maker() as session, session.begin():
        yield session


def ensure_demo_user(session_or_engine=None, username: str = DEMO_USERNAME, password: str = DEMO_PASSWORD) -> User:
    """The demo admin account: created when missing; an existing account (and its password) is left as it is.

    With an Engine, sessionmaker, URL or None it is committed here; a Session passed in is only flushed.
    """
    with session_for(session_or_engine) as session:
        user = session.scalar(select(User).where(User.username == username))
        if user is None:
            user = create_user(session, username, password, role="admin", display_name="Demo administrator")
        return user
