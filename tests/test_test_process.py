"""The test process itself (tests/conftest.py): it ends with pytest's status, and names threads a test left running."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _pytest(tmp_path: Path, body: str, **env: str) -> subprocess.CompletedProcess:
    """Run pytest on one test file of ``body`` in a fresh process, with this suite's conftest as a plugin."""
    (tmp_path / "test_one.py").write_text(body)
    environ = {**os.environ, "PYTHONPATH": str(TESTS), **env}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", str(tmp_path)]
    return subprocess.run(cmd, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("body", "status"), [("def test_ok():\n    pass\n", 0), ("def test_no():\n    assert 0\n", 1)])
def test_the_process_ends_with_pytests_status(tmp_path, body, status):
    r = _pytest(tmp_path, body)
    assert r.returncode == status, r.stdout + r.stderr
    assert ("1 passed" if status == 0 else "1 failed") in r.stdout  # the report came out before the process ended


def test_a_thread_left_running_is_named_at_exit(tmp_path):
    body = (
        "import threading, time\n"
        "def test_leaks():\n"
        "    threading.Thread(target=time.sleep, args=(60,), name='left-behind', daemon=True).start()\n"
    )
    r = _pytest(tmp_path, body)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "still running at exit: left-behind" in r.stderr
    # the usual teardown on request: the daemon thread does not hold the process, nothing is named
    r = _pytest(tmp_path, body, AIRPATROL_TEST_TEARDOWN="1")
    assert r.returncode == 0 and "still running" not in r.stderr
