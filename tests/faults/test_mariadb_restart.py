"""MariaDB stopped and started again while `airpatrol serve` is running a job: the job waits for the database
(one log line per retry), then completes with every result row written once - the database holds exactly the
per-frame rows the job's own ``tracks.csv`` has."""

from __future__ import annotations

import csv
import hashlib
import json
import time

import httpx
import pytest
from service_helpers import wait_for
from sqlalchemy import func, select

from db.crud import create_device, issue_device_token
from db.engine import dispose_engines, make_db_engine, session_scope
from db.migrate import upgrade
from db.models import ProcessingRun, TrackRow, TrackSpeed
from db.service_models import JobRow
from tests.faults.fault_helpers import serve_logged


def _frames_done(url: str, run_id: int) -> int:
    engine = make_db_engine(url)  # a fresh engine each time: the server is stopped and started under it
    try:
        with engine.connect() as c:
            return c.scalar(select(ProcessingRun.frames_done).where(ProcessingRun.id == run_id)) or 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_job_waits_for_a_restarted_mariadb_and_loses_nothing(mariadb, settings_factory, clip, tmp_path, how):
    url = mariadb.create_database()
    upgrade(url)
    with session_scope(url) as s:
        token = issue_device_token(s, create_device(s, "DRONE-DB"))
    device = {"Authorization": f"Bearer {token}"}
    settings = settings_factory().model_copy(update={"database_url": url})
    data = clip.read_bytes()
    # a slow fake detector (40 ms a frame): the 100-frame job takes seconds and writes a batch every 20 rows; the
    # lease is renewed rarely, so it is the result writes that meet the outage
    with serve_logged(
        settings,
        tmp_path,
        # results written as the job goes (whole-flight linking holds them all to the end of the flight and writes
        # them in one burst, which the outage below would have to hit by chance)
        env={"AIRPATROL_TEST_DETECT_DELAY_S": "0.04", "AIRPATROL_PIPELINE__LINKING__ENABLED": "false"},
        db_batch_rows=20,
        job_heartbeat_s=30,
        job_lease_s=120,
        db_retry_s=60,
    ) as (proc, base, log):
        up = httpx.post(
            f"{base}/api/uploads",
            headers=device,
            json={
                "kind": "video",
                "filename": "flight.mp4",
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
        ).json()
        httpx.patch(
            f"{base}{up['upload_url']}",
            content=data,
            headers={**device, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
        ).raise_for_status()
        job = httpx.post(f"{base}{up['upload_url']}/complete", headers=device, json={}, timeout=60).json()["job"]

        def running_run():
            with session_scope(url) as s:
                return s.scalar(select(JobRow.run_id).where(JobRow.id == job["id"]))

        run_id = wait_for(running_run, 30, "the job to start its run")
        wait_for(lambda: _frames_done(url, run_id) > 0, 30, "the first batch of rows in the database")
        dispose_engines()
        mariadb.shutdown(kill=how == "crash")  # SIGTERM: a clean stop; SIGKILL: a crash mid-transaction
        down_at = time.monotonic()
        time.sleep(2.0)  # the job goes on until its next write, then waits
        mariadb.start()
        wait_for(lambda: "database reachable again" in log.read_text(), 60, "the service to reconnect")
        recovered_s = time.monotonic() - down_at

        def finished():
            r = httpx.get(f"{base}/api/jobs/{job['id']}", headers=device)
            return r.status_code == 200 and r.json()["status"] in ("complete", "failed") and r.json()

        final = wait_for(finished, 60, "the job to finish")
        text = log.read_text()
        assert final["status"] == "complete", (final["error"], text[-3000:])
        assert final["attempts"] == 1  # it waited; it was not retried from the start

    # one clear line per retry, bounded, naming what it waits for
    retries = [
        json.loads(line)["msg"] if line.startswith("{") else line
        for line in text.splitlines()
        if "database unreachable while" in line
    ]
    assert retries and all("giving up after 60 s" in m for m in retries), text[-3000:]
    assert any(f"writing results of run {run_id}" in m for m in retries), retries
    print(f"database {how}: outage 2.0 s, job back to work {recovered_s:.1f} s after the stop, {len(retries)} retries")

    with open(tmp_path / "data" / "runs" / f"job-{job['id']}" / "tracks.csv", newline="") as f:
        in_files = sorted((int(r["track_id"]), int(r["frame"]) - 1) for r in csv.DictReader(f))  # 1-based
    with session_scope(url) as s:
        run = s.get(ProcessingRun, final["run_id"])
        assert run.status == "complete" and run.frames_done == 100
        rows = s.execute(
            select(TrackRow.track_no, TrackSpeed.frame)
            .join(TrackSpeed, TrackSpeed.track_id == TrackRow.id)
            .where(TrackRow.run_id == run.id)
        ).all()
        assert s.scalar(select(func.count()).select_from(ProcessingRun).where(ProcessingRun.status == "complete")) == 1
    in_db = sorted((int(no), int(frame)) for no, frame in rows)
    assert len(in_files) > 100  # three vehicles over 100 frames
    assert in_db == in_files  # nothing lost, nothing twice
