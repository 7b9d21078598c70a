"""`airpatrol user add` and the demo login (`airpatrol import-run`: tests/db/test_run_import.py)."""

from __future__ import annotations

import pytest
import typer
from sqlalchemy import select
from typer.testing import CliRunner

from dashboard.cli import cli_user_add


@pytest.fixture
def cli():
    app = typer.Typer()
    user = typer.Typer()
    user.command("add")(cli_user_add)
    app.add_typer(user, name="user")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_user_add(cli, db_url):
    from db.crud import authenticate_user
    from db.engine import session_scope

    r = cli("user", "add", "ana", "--role", "operator", "--password", "ana-password-1", "--database-url", db_url)
    assert r.exit_code == 0, r.output
    assert "user 'ana' created" in r.output
    with session_scope(db_url) as s:
        assert authenticate_user(s, "ana", "ana-password-1").role == "operator"


@pytest.mark.parametrize(
    "args,message",
    [
        (("--role", "root", "--password", "long-enough-1"), "--role root: expected one of admin, operator, viewer"),
        (("--password", "short"), "password"),
    ],
)
def test_user_add_refuses_bad_input_in_one_line(cli, db_url, args, message):
    r = cli("user", "add", "bob", *args, "--database-url", db_url)
    assert r.exit_code == 2 and message in r.output
    assert "Traceback" not in r.output


def test_user_add_refuses_duplicates(cli, db_url):
    r = cli("user", "add", "admin", "--password", "whatever-123", "--database-url", db_url)
    assert r.exit_code == 2 and "already exists" in r.output


def test_user_add_password_from_environment(cli, db_url, monkeypatch):
    monkeypatch.setenv("AIRPATROL_USER_PASSWORD", "from-the-env-1")
    assert cli("user", "add", "carl", "--database-url", db_url).exit_code == 0


def test_demo_user(db_url):
    from dashboard.users import DEMO_PASSWORD, DEMO_USERNAME, ensure_demo_user
    from db.crud import authenticate_user
    from db.engine import make_db_engine, session_scope
    from db.models import User

    with session_scope(db_url) as s:  # the template database has an 'admin' already: use a fresh name
        s.delete(s.scalar(select(User).where(User.username == DEMO_USERNAME)))
    engine = make_db_engine(db_url)
    try:
        first = ensure_demo_user(engine)
        again = ensure_demo_user(engine)
    finally:
        engine.dispose()
    assert first.id == again.id and first.role == "admin"
    with session_scope(db_url) as s:
        assert authenticate_user(s, DEMO_USERNAME, DEMO_PASSWORD) is not None
        ensure_demo_user(s)  # a Session works too
