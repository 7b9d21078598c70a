"""Turn user mistakes into a one-line message and a non-zero exit, never a traceback."""
from __future__ import annotations

import functools
import sys

import typer


def user_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            typer.echo("airpatrol: interrupted; nothing was written", err=True)
            raise typer.Exit(130) from None
        except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as exc:
            typer.echo(f"airpatrol: error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def fail(message: str, code: int = 2):
    typer.echo(f"airpatrol: error: {message}", err=True)
    sys.exit(code)
