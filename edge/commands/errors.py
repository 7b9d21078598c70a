"""Turn user mistakes into a one-line message and a non-zero exit: moved to :mod:`db.cli_errors` (``db`` and
``dashboard`` commands use it too, and layers only look down); re-exported here so existing imports keep working."""

from __future__ import annotations

from db.cli_errors import EXIT_INCOMPLETE, EXIT_OUTPUT_ERROR, EXIT_USER_ERROR, OutputWriteError, fail, user_errors

__all__ = ["EXIT_INCOMPLETE", "EXIT_OUTPUT_ERROR", "EXIT_USER_ERROR", "OutputWriteError", "fail", "user_errors"]
