"""Turn user mistakes into a one-line message and a non-zero exit, never a traceback.

Shared by every command group: ``db`` and ``dashboard`` define their own commands (composed by ``edge/cli.py``),
and layers only look down, so this lives in the lowest layer with commands; ``edge.commands.errors`` re-exports it.
"""

from __future__ import annotations

import functools
import sys

import typer

EXIT_USER_ERROR = 2  # bad input or usage: nothing (or nothing new) was written
EXIT_INCOMPLETE = 3  # the run finished, but part of its input was damaged: see "losses" in summary.json
EXIT_OUTPUT_ERROR = 4  # the results could not be written (disk full): nothing was replaced


class OutputWriteError(RuntimeError):
    """Results could not be written (disk full): nothing was committed (raised by ``edge.rundir``)."""


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
            raise typer.Exit(EXIT_USER_ERROR) from None
        except OutputWriteError as exc:
            typer.echo(f"airpatrol: error: {exc}", err=True)
            raise typer.Exit(EXIT_OUTPUT_ERROR) from None

    return wrapper


def fail(message: str, code: int = 2):
    typer.echo(f"airpatrol: error: {message}", err=True)
    sys.exit(code)
