"""Login throttling shared by every worker and kept across restarts (table ``login_throttle``).

Two counters of failed logins, each with a delay that doubles per failure once its free attempts are used up:

- per **client address** (any user name): ``CLIENT_FREE`` free failures, then 1, 2, 4 ... s, at most
  ``CLIENT_MAX_DELAY_S``. A guesser slows only itself.
- per **account** (any address): ``ACCOUNT_FREE`` free failures, then 1, 2, 4 ... s, at most
  ``ACCOUNT_MAX_DELAY_S`` - a brake on guessing one password from many addresses. It is never a lock: the delay
  is short and capped, and it does not apply at all to an address the account logged in from successfully
  before (``trusted``, for ``TRUSTED_FOR``). So a stranger failing ``admin`` from anywhere cannot keep the real
  admin out: from a known address they get in at once, from a new one after at most a minute.

While a delay runs, attempts are refused before the password is checked (and are not counted: a refused attempt
does not extend anybody's delay). Counters are forgotten after ``FORGET_AFTER`` without a failure.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from db.engine import begin_write
from db.models import LoginThrottleRow, utcnow

CLIENT_FREE, CLIENT_MAX_DELAY_S = 5, 900.0
ACCOUNT_FREE, ACCOUNT_MAX_DELAY_S = 10, 60.0
FORGET_AFTER = timedelta(hours=1)
TRUSTED_FOR = timedelta(days=30)
PURGE_CHANCE = 0.02  # one failed login in 50 also deletes the forgotten rows


def delay_s(failures: int, free: int, cap: float) -> float:
    """Seconds to wait after ``failures`` failed logins: 0 for the first ``free``, then 1, 2, 4 ... up to ``cap``."""
    return 0.0 if failures < free else min(cap, 2.0 ** min(failures - free, 30))


def _key(text: str) -> str:
    """Keys fit the column whatever the input: long ones are hashed (a user name can be anything in a form)."""
    text = text.strip().lower()
    return text if len(text) <= 150 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _account(username: str) -> str:
    return _key(username)


def _trusted(username: str, client: str) -> str:
    return _key(f"{username.strip().lower()}@{client}")


class LoginThrottle:
    """``wait_s`` before checking a password; ``failed`` / ``succeeded`` after. All state is in the database."""

    def __init__(self, sessions: sessionmaker, clock=utcnow):
        self._sessions, self._now = sessions, clock

    def wait_s(self, client: str, username: str) -> float:
        """Seconds this client must wait before trying ``username`` again (0: go ahead)."""
        now = self._now()
        with self._sessions() as s:
            rows = {
                (r.scope, r.key): r
                for r in s.scalars(
                    select(LoginThrottleRow).where(
                        LoginThrottleRow.key.in_([_key(client), _account(username), _trusted(username, client)])
                    )
                )
            }
        wait = self._remaining(rows.get(("client", _key(client))), CLIENT_FREE, CLIENT_MAX_DELAY_S, now)
        trusted = rows.get(("trusted", _trusted(username, client)))
        if trusted is None or now - trusted.last_at > TRUSTED_FOR:
            wait = max(
                wait, self._remaining(rows.get(("account", _account(username))), ACCOUNT_FREE, ACCOUNT_MAX_DELAY_S, now)
            )
        return wait

    @staticmethod
    def _remaining(row: LoginThrottleRow | None, free: int, cap: float, now: datetime) -> float:
        if row is None or now - row.last_at > FORGET_AFTER:
            return 0.0
        until = row.last_at + timedelta(seconds=delay_s(row.failures, free, cap))
        return max(0.0, (until - now).total_seconds())

    def failed(self, client: str, username: str) -> None:
        now = self._now()
        for attempt in range(3):
            try:
                with self._sessions() as s, s.begin():
                    begin_write(s)
                    self._bump(s, "client", _key(client), now)
                    if username.strip():
                        self._bump(s, "account", _account(username), now)
                break
            except IntegrityError:  # another worker inserted the same counter first: count on top of it
                if attempt == 2:
                    raise
        if random.random() < PURGE_CHANCE:
            self.purge()

    def _bump(self, s: Session, scope: str, key: str, now: datetime) -> None:
        row = s.scalar(
            select(LoginThrottleRow)
            .where(LoginThrottleRow.scope == scope, LoginThrottleRow.key == key)
            .with_for_update()
        )
        if row is None:
            s.execute(insert(LoginThrottleRow).values(scope=scope, key=key, failures=1, last_at=now))
            return
        fresh = now - row.last_at > FORGET_AFTER
        s.execute(
            update(LoginThrottleRow)
            .where(LoginThrottleRow.id == row.id)
            .values(failures=1 if fresh else LoginThrottleRow.failures + 1, last_at=now)
        )

    def succeeded(self, client: str, username: str) -> None:
        """The right password: this client's counter and the account's are reset, the pair is trusted from now on."""
        now = self._now()
        with self._sessions() as s, s.begin():
            begin_write(s)
            s.execute(
                delete(LoginThrottleRow).where(
                    ((LoginThrottleRow.scope == "client") & (LoginThrottleRow.key == _key(client)))
                    | ((LoginThrottleRow.scope == "account") & (LoginThrottleRow.key == _account(username)))
                    | ((LoginThrottleRow.scope == "trusted") & (LoginThrottleRow.key == _trusted(username, client)))
                )
            )
            s.execute(
                insert(LoginThrottleRow).values(
                    scope="trusted", key=_trusted(username, client), failures=0, last_at=now
                )
            )

    def purge(self) -> int:
        """Delete forgotten counters and expired trust (called now and then; the table stays small)."""
        now = self._now()
        with self._sessions() as s, s.begin():
            begin_write(s)
            gone = s.execute(
                delete(LoginThrottleRow).where(
                    ((LoginThrottleRow.scope != "trusted") & (LoginThrottleRow.last_at < now - FORGET_AFTER))
                    | ((LoginThrottleRow.scope == "trusted") & (LoginThrottleRow.last_at < now - TRUSTED_FOR))
                )
            )
            return gone.rowcount or 0
