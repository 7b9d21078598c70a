"""`airpatrol user add NAME --role ROLE` (registered in edge/cli.py)."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from db.cli_errors import user_errors


@user_errors
def cli_user_add(
    name: Annotated[str, typer.Argument(help="login name (letters, digits, '.', '_', '@', '-')")],
    role: Annotated[str, typer.Option(help="admin | operator | viewer")] = "viewer",
    password: Annotated[
        Optional[str],
        typer.Option(help="password (at least 8 characters); default: AIRPATROL_USER_PASSWORD, else asked for twice"),
    ] = None,
    display_name: Annotated[Optional[str], typer.Option(help="name shown in the dashboard")] = None,
    database_url: Annotated[
        Optional[str], typer.Option(help="SQLAlchemy URL (default: AIRPATROL_DATABASE_URL or the local SQLite file)")
    ] = None,
) -> None:
    """Create a dashboard user (passwords are stored as Argon2id hashes only)."""
    from db.cli import _connection_errors, ensure_schema
    from db.crud import create_user
    from db.engine import session_scope
    from db.models import ROLES

    if role not in ROLES:
        raise ValueError(f"--role {role}: expected one of {', '.join(ROLES)}")
    password = password or os.environ.get("AIRPATROL_USER_PASSWORD")
    if not password:
        password = typer.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    with _connection_errors(database_url):
        ensure_schema(database_url)
        with session_scope(database_url) as session:
            user = create_user(session, name, password, role=role, display_name=display_name)
            uid = user.id
    typer.echo(f"user {name!r} created (id {uid}, role {role})")
