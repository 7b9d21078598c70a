"""A MariaDB outage longer than the job lease (90 s against the default 60 s) while `airpatrol serve` runs a job with
a second, idle job worker polling: when the database is back, the idle worker must not take the job over (its lease
expired only because nobody could renew it). The job completes in its first attempt with exactly one set of
result rows - the rows of its own ``tracks.csv`` - and no second run. (Before, the idle worker claimed the job at its
first poll after the outage and ran it again.)"""

from __future__ import annotations

import csv
import hashlib
import os
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

OUTAGE_S = float(os.environ.get("AIRPATROL_TEST_JOB_OUTAGE_S", "90"))
LEASE_S = 60.0  # the service's default lease


def _frames_done(url: str, run_id: int) -> int:
    engine = make_db_engine(url)  # a fresh engine each time: the server is stopped and started under it
    try:
        with engine.connect() as c:
            return c.scalar(select(ProcessingRun.frames_done).where(ProcessingRun.id == run_id)) or 0
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_job_outlives_a_database_outage_longer_than_its_lease_and_runs_once(
    mariadb, settings_factory, clip, tmp_path
):
    t0 = time.monotonic()
    url = mariadb.create_database()
    upgrade(url)
    with session_scope(url) as s:
        token = issue_device_token(s, create_device(s, "DRONE-LEASE"))
    device = {"Authorization": f"Bearer {token}"}
    settings = settings_factory().model_copy(update={"database_url": url})
    data = clip.read_bytes()
    with serve_logged(
        settings,
        tmp_path,
        # 100 frames: about 4 s of work around the outage; results written as the job goes (whole-flight linking
        # would hold them all to the end of the flight and write them in one burst after the outage)
        env={"AIRPATROL_TEST_DETECT_DELAY_S": "0.04", "AIRPATROL_PIPELINE__LINKING__ENABLED": "false"},
        db_batch_rows=20,
        job_workers=2,  # the second worker polls the queue all through the outage
        job_poll_s=0.5,
        job_heartbeat_s=1.0,
        job_lease_s=LEASE_S,
        db_retry_s=300,
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
        mariadb.shutdown()
        down_at = time.monotonic()
        time.sleep(OUTAGE_S)  # longer than the lease: every renewal in between failed
        mariadb.start()
        up_at = time.monotonic()

        def finished():
            r = httpx.get(f"{base}/api/jobs/{job['id']}", headers=device)
            return r.status_code == 200 and r.json()["status"] in ("complete", "failed") and r.json()

        final = wait_for(finished, 60, "the job to finish")
        print(
            f"set-up until the stop {down_at - t0:.1f} s, outage {up_at - down_at:.1f} s (server start included), "
            f"job finished {time.monotonic() - up_at:.1f} s after the server was back"
        )
        text = log.read_text()
        assert final["status"] == "complete", (final["error"], text[-3000:])
        assert final["attempts"] == 1, f"the job was run again after the outage: {text[-3000:]}"
    assert "database unreachable while" in text  # the outage met the job

    with open(tmp_path / "data" / "runs" / f"job-{job['id']}" / "tracks.csv", newline="") as f:
        in_files = sorted((int(r["track_id"]), int(r["frame"]) - 1) for r in csv.DictReader(f))  # 1-based
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(ProcessingRun)) == 1, "a second run was started"
        run = s.get(ProcessingRun, final["run_id"])
        assert run.id == run_id and run.status == "complete" and run.frames_done == 100
        rows = s.execute(
            select(TrackRow.track_no, TrackSpeed.frame)
            .join(TrackSpeed, TrackSpeed.track_id == TrackRow.id)
            .where(TrackRow.run_id == run.id)
        ).all()
        assert s.scalar(select(func.count()).select_from(TrackSpeed)) == len(rows)  # no rows of any other run
    in_db = sorted((int(no), int(frame)) for no, frame in rows)
    assert len(in_files) > 100  # three vehicles over 100 frames
    assert in_db == in_files  # one set: nothing lost, nothing twice
