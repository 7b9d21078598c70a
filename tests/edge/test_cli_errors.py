"""User mistakes end with one line on stderr naming the file, exit code 2, no traceback, nothing written."""

import os
import subprocess
import sys

import pytest


def _airpatrol(*args, cwd):
    env = dict(os.environ, YOLO_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "edge.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHONPATH": os.getcwd()},
    )


@pytest.mark.parametrize("content", [None, b"", b"not a video at all\n" * 100])
def test_bad_video(tmp_path, content):
    video = tmp_path / "flight.mp4"
    if content is not None:
        video.write_bytes(content)
    r = _airpatrol("process", str(video), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [l for l in r.stderr.strip().splitlines() if l]
    assert len(lines) == 1 and "flight.mp4" in lines[0] and lines[0].startswith("airpatrol: error:")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_bad_option_values(tmp_path):
    r = _airpatrol("process", str(tmp_path / "x.mp4"), "--device", "tpu", cwd=tmp_path)
    assert r.returncode == 2 and "--device tpu" in r.stderr and "Traceback" not in r.stderr
    r = _airpatrol("process", str(tmp_path / "x.mp4"), "--calibration", str(tmp_path / "cal.json"), cwd=tmp_path)
    assert r.returncode == 2 and "cal.json" in r.stderr and "Traceback" not in r.stderr


def test_help_lists_commands(tmp_path):
    r = _airpatrol("--help", cwd=tmp_path)
    assert r.returncode == 0
    for cmd in ("process", "demo"):
        assert cmd in r.stdout
