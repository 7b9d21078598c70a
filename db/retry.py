"""Riding out a database that went away: retry a transaction while the server is unreachable, for a bounded time.

Only *connection* failures are retried (server stopped or restarting, network cut, connection killed): the
transaction never reached the server or was rolled back by it, so running it again is safe - provided the caller
can tell whether a commit whose answer was lost went through (``db.sink`` checks a marker it writes in the same
transaction). Any other error (a constraint, bad SQL, a full disk on the server) is raised at once.

Every retry logs one line, ``database unreachable while <what> (...); retry N in X s, giving up after Y s``, and
the first success after a failure logs ``database reachable again after X s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

log = logging.getLogger("airpatrol.db")

T = TypeVar("T")

DEFAULT_RETRY_S = 300.0  # how long a run waits for its database before it fails
FIRST_WAIT_S, MAX_WAIT_S = 0.5, 5.0

# MySQL/MariaDB client and server error codes that mean "the connection, not the statement, failed"
_CONNECTION_CODES = {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1927,  # connection was killed
    2002,
    2003,  # can't connect (socket / TCP)
    2006,  # server has gone away
    2013,  # lost connection during query
    2055,  # lost connection (system error)
}


_last_unreachable: float | None = None  # time.monotonic() of the last connection failure seen in this process


def note_unreachable() -> None:
    """Record that the database could not be reached (``retry_db`` does; so do callers that retry on their own)."""
    global _last_unreachable
    _last_unreachable = time.monotonic()


def reachable_for(since: float) -> float:
    """Seconds this process has reached the database without a connection failure, counting from ``since`` (a
    ``time.monotonic()`` value, e.g. when the caller started) at the earliest."""
    last = _last_unreachable
    return time.monotonic() - (since if last is None else max(since, last))


class DatabaseUnavailable(RuntimeError):
    """The database stayed unreachable for the whole retry budget."""


def is_connection_error(exc: BaseException) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", None)
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _CONNECTION_CODES:
        return True
    # PyMySQL: InterfaceError(0, '') on a socket that was closed under it
    return type(orig).__name__ == "InterfaceError"


def short(exc: BaseException) -> str:
    """One line: the driver's message without SQLAlchemy's statement dump and background link."""
    orig = getattr(exc, "orig", None) or exc
    return f"{type(orig).__name__}: {orig}".splitlines()[0][:300]


def retry_db(
    fn: Callable[[], T],
    what: str,
    budget_s: float = DEFAULT_RETRY_S,
    logger: logging.Logger = log,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, run again while it fails for want of a connection, for at most ``budget_s`` seconds in all.

    ``budget_s`` 0: one try; a connection failure raises :class:`DatabaseUnavailable` at once.
    """
    start = time.monotonic()
    wait, tries, slept = FIRST_WAIT_S, 0, 0.0
    while True:
        try:
            result = fn()
        except DBAPIError as exc:
            if not is_connection_error(exc):
                raise
            note_unreachable()
            tries += 1
            waited = max(time.monotonic() - start, slept)
            if waited + wait > budget_s:
                if budget_s > 0:
                    logger.error("database unreachable while %s for %.0f s (%s): giving up", what, waited, short(exc))
                raise DatabaseUnavailable(
                    f"database unreachable while {what} (for {waited:.0f} s, {tries} tries): {short(exc)}"
                ) from exc
            logger.warning(
                "database unreachable while %s (%s); retry %d in %.1f s, giving up after %.0f s",
                what,
                short(exc),
                tries,
                wait,
                budget_s,
            )
            sleep(wait)
            slept += wait
            wait = min(wait * 2, MAX_WAIT_S)
            continue
        if tries:
            logger.warning(
                "database reachable again after %.1f s (%s, %d retries)", time.monotonic() - start, what, tries
            )
        return result
