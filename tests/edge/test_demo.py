"""The README's second command: a sample flight generated, processed, stored for the dashboard."""

import json
import os
import subprocess
import sys

from sqlalchemy import create_engine, text


def test_demo_end_to_end(tmp_path):
    db = tmp_path / "demo.db"
    env = dict(os.environ, YOLO_OFFLINE="1", AIRPATROL_DATABASE_URL=f"sqlite:///{db}", PYTHONPATH=os.getcwd())
    r = subprocess.run(
        [sys.executable, "-m", "edge.cli", "demo", "--out", str(tmp_path / "demo"), "--seconds", "2", "-q"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "demo" / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["frames"] == 50 and summary["telemetry"].endswith("video.SRT")
    assert "log in as admin / airpatrol-demo" in r.stdout
    with create_engine(f"sqlite:///{db}").connect() as c:
        assert c.execute(text("select count(*) from flights")).scalar() == 1
        assert c.execute(text("select status from processing_runs")).scalar() == "complete"
        assert c.execute(text("select role from users where username = 'admin'")).scalar() == "admin"
