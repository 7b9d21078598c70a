"""`airpatrol process` on a truncated video: completes what it can, says what it lost, exits 3 (EXIT_INCOMPLETE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from db.models import ProcessingRun
from edge.commands.errors import EXIT_INCOMPLETE
from tests.conftest import make_test_clip


def test_truncated_video_run_is_incomplete_everywhere(tmp_path):
    clip = tmp_path / "clip.mp4"
    make_test_clip(clip, frames=60)
    data = clip.read_bytes()
    cut = tmp_path / "flight.mp4"
    cut.write_bytes(data[: len(data) // 2])
    env = {**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": os.getcwd()}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge.cli",
            "process",
            str(cut),
            "--out",
            str(tmp_path / "run"),
            "--no-video",
            "--no-road",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == EXIT_INCOMPLETE == 3, r.stderr
    assert "Traceback" not in r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("airpatrol: warning:")]
    assert len(warning) == 1 and "flight.mp4" in warning[0] and "INCOMPLETE" in warning[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    decoded = summary["counts"]["frames"]
    assert 5 < decoded < 60
    assert summary["status"] == "incomplete"
    [loss] = summary["losses"]
    assert loss["input"] == "video" and loss["frames"] == [decoded + 1, 60] and "ended early" in loss["reason"]
    assert f"frames {decoded + 1}-60" in warning[0]

    # the same run imported into the database carries the flag, and the dashboard's run page shows it
    from db.engine import session_scope
    from db.migrate import upgrade
    from db.run_import import import_run_dir

    url = f"sqlite:///{tmp_path / 'ap.db'}"
    upgrade(url)
    import_run_dir(tmp_path / "run", url)
    with session_scope(url) as s:
        run = s.query(ProcessingRun).one()
        assert run.status == "complete" and run.completeness == "incomplete"
        assert run.losses_json == summary["losses"]
