"""Login throttle: per address and per account, increasing delays, shared through the database, no lock-out."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from db.engine import session_factory
from db.throttle import ACCOUNT_MAX_DELAY_S, CLIENT_FREE, FORGET_AFTER, LoginThrottle, delay_s


class Clock:
    def __init__(self):
        self.now = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self):
        return self.now

    def advance(self, seconds: float):
        self.now += timedelta(seconds=seconds)


def test_delay_grows_and_is_capped():
    assert [delay_s(n, 5, 60.0) for n in range(4, 13)] == [0, 1, 2, 4, 8, 16, 32, 60, 60]


@pytest.fixture
def throttles(db_url):
    """Two throttles on one database: two workers (or a restart) see the same counts."""
    clock = Clock()
    return LoginThrottle(session_factory(db_url), clock), LoginThrottle(session_factory(db_url), clock), clock


def test_address_delay_increases_and_is_shared_between_workers(throttles):
    a, b, clock = throttles
    waits = []
    for i in range(CLIENT_FREE + 4):
        (a if i % 2 else b).failed("10.0.0.66", f"user{i}")  # spraying many names from one address
        waits.append(a.wait_s("10.0.0.66", "anyone"))
    assert waits[: CLIENT_FREE - 1] == [0] * (CLIENT_FREE - 1)
    assert waits[CLIENT_FREE - 1 :] == [1, 2, 4, 8, 16]  # counted across both workers, doubling
    assert b.wait_s("10.0.0.66", "anyone") == 16
    assert a.wait_s("10.0.0.7", "anyone") == 0  # another address is not affected
    clock.advance(17)
    assert a.wait_s("10.0.0.66", "anyone") == 0  # the delay ran out: one more try


def test_a_stranger_cannot_lock_out_the_admin(throttles):
    a, b, clock = throttles
    a.failed("192.0.2.1", "admin")  # the admin mistypes once at the office, then logs in
    a.succeeded("192.0.2.1", "admin")
    for i in range(200):  # a botnet: 200 addresses, one wrong admin password each
        b.failed(f"198.51.100.{i}", "admin")
    assert a.wait_s("192.0.2.1", "admin") == 0  # the office address is trusted: straight in
    waited = a.wait_s("203.0.113.5", "admin")  # a new address: the account-wide brake, short and capped
    assert 0 < waited <= ACCOUNT_MAX_DELAY_S
    clock.advance(waited)
    assert a.wait_s("203.0.113.5", "admin") == 0
    assert a.wait_s("203.0.113.5", "operator") == 0  # other accounts: untouched


def test_success_resets_and_old_failures_are_forgotten(throttles):
    a, _, clock = throttles
    for _ in range(CLIENT_FREE + 2):
        a.failed("10.1.1.1", "viewer")
    assert a.wait_s("10.1.1.1", "viewer") > 0
    clock.advance(FORGET_AFTER.total_seconds() + 1)
    assert a.wait_s("10.1.1.1", "viewer") == 0
    a.failed("10.1.1.1", "viewer")  # counting starts again from one
    assert a.wait_s("10.1.1.1", "viewer") == 0
    assert a.purge() >= 0


def test_any_user_name_fits(throttles):
    a, _, _ = throttles
    for name in ["x" * 5000, "ü🚁'\";--", " admin ", ""]:
        a.failed("10.2.2.2", name)
        a.wait_s("10.2.2.2", name)
    assert a.wait_s("10.2.2.2", " ADMIN") == a.wait_s("10.2.2.2", "admin")
