"""The persistent job queue: exclusive claims, leases that expire, zombies that cannot complete, retries that give up;
and a real restart: `airpatrol serve` is killed (SIGKILL) mid-job and a new instance completes the job exactly once."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
import yaml
from service_helpers import DEVICE_TOKENS, free_port, running_app, wait_for
from sqlalchemy import delete, select, update

from db.models import ProcessingRun, utcnow
from edge.service.jobs import JobQueue
from edge.service.models import JobRow

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="session")
def mariadb_url():
    from db.mariadb_server import MariaDBServer, find_server_binaries

    if find_server_binaries() is None:
        pytest.skip("MariaDB not installed (Debian: apt-get install mariadb-server): queue tests run on SQLite only")
    server = MariaDBServer(durable=False).start()
    yield server.create_database("service_queue")
    server.stop()


@pytest.fixture(params=["sqlite", "mariadb"])
def queue(request, settings):
    """A JobQueue on each back end (the claim/lease UPDATEs must behave the same), with two queued jobs."""
    from edge.service.app import create_app

    if request.param == "mariadb":
        settings = settings.model_copy(update={"database_url": request.getfixturevalue("mariadb_url")})
    ctx = create_app(settings).state.ctx  # schema only; no workers running
    q = JobQueue(ctx.sessions, lease_s=30, max_attempts=2, takeover_wait_s=0)  # expired leases at once
    with ctx.sessions() as s, s.begin():
        s.execute(delete(JobRow))
        ids = [
            q.enqueue(s, video_upload_id="a" * 32, log_upload_id=None, params={}, created_by="test").id
            for _ in range(2)
        ]
    yield q, ctx.sessions, ids
    ctx.close()


def _expire(sessions, job_id):
    with sessions() as s, s.begin():
        s.execute(update(JobRow).where(JobRow.id == job_id).values(lease_expires_at=utcnow() - timedelta(seconds=1)))


def test_claims_are_exclusive_and_fifo(queue):
    q, _, (first, second) = queue
    assert q.claim("w1").id == first
    assert q.claim("w2").id == second
    assert q.claim("w3") is None


def test_a_dead_workers_job_is_retried_and_the_zombie_cannot_complete_it(queue):
    q, sessions, (job_id, _) = queue
    assert q.claim("dead").id == job_id
    assert q.heartbeat(job_id, "dead", progress=0.5) == (True, False)
    assert q.claim("other").id != job_id  # lease still valid: the other job is taken instead
    _expire(sessions, job_id)  # "dead" stopped renewing
    retried = q.claim("alive")
    assert retried.id == job_id and retried.attempts == 2 and retried.progress == 0.0
    assert q.heartbeat(job_id, "dead") == (False, False)  # the zombie learns it lost the job...
    assert not q.finish(job_id, "dead", "complete")  # ...and cannot complete it
    assert q.finish(job_id, "alive", "complete")
    assert not q.finish(job_id, "alive", "complete")  # completes once


def test_a_job_that_keeps_killing_its_worker_is_failed(queue):
    q, sessions, (job_id, _) = queue
    for owner in ("w1", "w2"):  # max_attempts = 2
        assert q.claim(owner).id == job_id
        _expire(sessions, job_id)
    q.claim("w3")
    with sessions() as s:
        job = s.get(JobRow, job_id)
        assert job.status == "failed" and "gave up after 2 attempts" in job.error


def test_graceful_release_does_not_count_an_attempt(queue):
    q, sessions, (job_id, _) = queue
    q.claim("w1")
    assert q.release(job_id, "w1", "service shut down")
    with sessions() as s:
        job = s.get(JobRow, job_id)
        assert job.status == "queued" and job.attempts == 0 and job.lease_owner is None


def test_after_an_outage_expired_leases_wait_a_lease_period(queue, monkeypatch):
    """A database outage stops every renewal: a lease it outlasted is not taken over until the database has been
    reachable for ``takeover_wait_s`` (the owner renews in that time); a queued job is claimed at once."""
    import time

    from db import retry

    q, sessions, (first, second) = queue
    q.takeover_wait_s = 1.0
    assert q.claim("owner").id == first
    _expire(sessions, first)
    monkeypatch.setattr(retry, "_last_unreachable", retry._last_unreachable)  # restored after the test
    retry.note_unreachable()  # what a failed claim or a retried transaction records
    assert q.claim("other").id == second  # queued: claimed at once
    assert q.claim("third") is None  # expired during the outage: not yet
    time.sleep(1.1)
    taken = q.claim("third")
    assert taken is not None and taken.id == first and taken.attempts == 2


def test_a_fenced_off_worker_writes_no_results(queue):
    """The fencing token: result transactions of a claim (owner + attempt) renew its lease, and refuse - rolled back,
    nothing written - once the job was claimed again, even by the same owner."""
    from db.sink import DatabaseSink
    from edge.service.jobs import JobInterrupted
    from tracking.types import RunInfo

    q, sessions, (job_id, _) = queue
    job = q.claim("w1")
    fence = q.fence(job_id, "w1", job.attempts)
    with sessions() as s, s.begin():
        s.execute(update(JobRow).where(JobRow.id == job_id).values(lease_expires_at=utcnow()))
        fence(s, 0)  # renews (0: no run of this attempt yet)
    with sessions() as s:
        assert s.get(JobRow, job_id).lease_expires_at > utcnow() + timedelta(seconds=20)
    _expire(sessions, job_id)
    assert q.claim("w1").attempts == job.attempts + 1  # the same worker name, a new claim
    with sessions() as s:
        runs_before = len(s.scalars(select(ProcessingRun)).all())
    sink = DatabaseSink(session_maker=sessions, fence=fence, retry_s=0)
    with pytest.raises(JobInterrupted, match="lease_lost"):
        sink.open(RunInfo("job.mp4", 64, 48, 25.0, 10, {}, "fake.pt", "dual_layer", "cpu"))
    with sessions() as s:
        assert len(s.scalars(select(ProcessingRun)).all()) == runs_before  # rolled back


def test_rows_a_fenced_off_worker_committed_are_removed_when_its_job_is_taken_over(queue):
    """A worker that committed batches and was then fenced off (its lease expired during a cut only it saw): the
    worker that takes the job over marks the old attempt's run failed and deletes its rows in the same transaction -
    the attempt's run was recorded on the job when it was created, before any heartbeat - and the old worker's later
    writes are refused. Only the winning attempt's rows remain."""
    import numpy as np
    from sqlalchemy import func

    from db.models import TrackRow, TrackSpeed
    from db.sink import DatabaseSink
    from edge.service.jobs import JobInterrupted
    from tracking.types import FrameResult, RunInfo, TrackState
    from vision.types import Frame

    q, sessions, (job_id, _) = queue
    info = RunInfo("job.mp4", 64, 48, 10.0, 40, {}, "fake.pt", "dual_layer", "cpu")

    def frame(i: int) -> FrameResult:
        car = TrackState(7, np.array([i, 0, i + 10, 10]), 0.9, 0, True, 50.0, 2.0, None, None, 46.5 + i * 1e-5, 6.6)
        return FrameResult(Frame(i, i / 10.0, np.zeros((4, 4, 3), np.uint8)), [car])

    def rows(run_id: int) -> tuple[int, int]:
        with sessions() as s:
            tracks = s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run_id))
            speeds = s.scalar(
                select(func.count()).select_from(TrackSpeed).join(TrackRow).where(TrackRow.run_id == run_id)
            )
        return tracks, speeds

    first = q.claim("w1")
    old = DatabaseSink(session_maker=sessions, fence=q.fence(job_id, "w1", first.attempts), batch_rows=5, retry_s=0)
    old.open(info)
    with sessions() as s:
        assert s.get(JobRow, job_id).run_id == old.run_id  # recorded with the run itself, no heartbeat yet
    for i in range(12):
        old.write(frame(i))  # two batches of 5 rows committed, 2 rows buffered
    assert rows(old.run_id) == (1, 10)

    _expire(sessions, job_id)  # w1 renews nothing for a lease: a network cut only it saw
    second = q.claim("w2")
    assert second.id == job_id and second.attempts == first.attempts + 1
    with sessions() as s:
        run = s.get(ProcessingRun, old.run_id)
        assert run.status == "failed" and "retried" in run.error
    assert rows(old.run_id) == (0, 0)  # the partial result is gone with the take-over

    with pytest.raises(JobInterrupted, match="lease_lost"):  # w1 comes back: refused, rolled back
        for i in range(12, 20):
            old.write(frame(i))
    with pytest.raises(JobInterrupted, match="lease_lost"):
        old.close({})
    assert rows(old.run_id) == (0, 0)

    new = DatabaseSink(session_maker=sessions, fence=q.fence(job_id, "w2", second.attempts), batch_rows=5, retry_s=0)
    new.open(info)
    for i in range(40):
        new.write(frame(i))
    new.close({})
    assert q.finish(job_id, "w2", "complete", run_id=new.run_id)
    assert rows(new.run_id) == (1, 40)
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(TrackSpeed)) == 40  # nothing of the first attempt
        assert s.get(ProcessingRun, new.run_id).status == "complete"


def _upload_video(base: str, clip, headers: dict) -> dict:
    data = clip.read_bytes()
    r = httpx.post(
        f"{base}/api/uploads",
        headers=headers,
        json={"kind": "video", "filename": "flight.mp4", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()},
    )
    assert r.status_code == 201, r.text
    up = r.json()
    r = httpx.patch(f"{base}{up['upload_url']}", headers={**headers, "Upload-Offset": "0"}, content=data)
    assert r.status_code == 204, r.text
    r = httpx.post(f"{base}{up['upload_url']}/complete", headers=headers, json={}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["job"]


@pytest.mark.slow
def test_job_survives_a_killed_service(settings_factory, clip, tmp_path):
    settings = settings_factory(instance_id="node-a")
    port = free_port()
    config = tmp_path / "airpatrol.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "database_url": settings.database_url,
                "data_dir": settings.data_dir,
                "pipeline": settings.pipeline.model_dump(mode="json", include={"calibration"}),
                "service": {
                    **settings.service.model_dump(mode="json", exclude_none=True),
                    "pipeline_factory": "service_fakes:make_pipeline",
                },
            }
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([REPO, os.path.dirname(__file__)]),
        "AIRPATROL_TEST_DETECT_DELAY_S": "0.05",
        "YOLO_OFFLINE": "1",
    }  # slow "model": the job takes seconds
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge.cli", "serve", "--config", str(config), "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base, device = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {DEVICE_TOKENS['DRONE-1']}"}
    try:

        def up():
            assert proc.poll() is None, proc.stderr.read()
            try:
                return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, 90, "`airpatrol serve` to start", every=0.3)
        job = _upload_video(base, clip, device)

        def progress():
            j = httpx.get(f"{base}/api/jobs/{job['id']}", headers=device).json()
            return j["status"] == "running" and j["frames_done"] >= 10 and j["run_id"] and j

        first = wait_for(progress, 60, "the job to be part-way")
        proc.send_signal(signal.SIGKILL)  # crash: no shutdown handler runs
        proc.wait(10)
    finally:
        proc.kill()
        out, err = proc.communicate()
        print(err[-3000:])
    assert f"http://127.0.0.1:{port}" in out  # `airpatrol serve` printed its URL

    with running_app(settings) as client:  # a new instance with the same instance id (re-queues its jobs at start)
        final = wait_for(
            lambda: (
                (j := client.get(f"/api/jobs/{job['id']}", headers=client.creds.device).json())["status"]
                in ("complete", "failed")
                and j
            ),
            60,
            "the restarted service to finish the job",
        )
        ctx = client.app.state.ctx
    assert final["status"] == "complete", final["error"]
    assert final["attempts"] == 2 and final["frames_done"] == 100
    with ctx.sessions() as s:
        runs = {r.id: r for r in s.scalars(select(ProcessingRun))}
        assert runs[first["run_id"]].status == "failed"  # the killed attempt is never mistaken for a result
        assert [r.id for r in runs.values() if r.status == "complete"] == [final["run_id"]]


def test_graceful_shutdown_requeues_a_running_job_and_cancel_stops_it(settings, clip, monkeypatch):
    monkeypatch.setenv("AIRPATROL_TEST_DETECT_DELAY_S", "0.05")  # a slow "model": the job takes seconds

    def running(client, job_id, after_frames=5):
        j = client.get(f"/api/jobs/{job_id}", headers=client.creds.device).json()
        return j["status"] == "running" and j["frames_done"] >= after_frames and j["run_id"] and j

    with running_app(settings) as client:
        data = clip.read_bytes()
        up = client.post(
            "/api/uploads", headers=client.creds.device, json={"kind": "video", "filename": "f.mp4", "size": len(data)}
        ).json()
        client.patch(up["upload_url"], headers={**client.creds.device, "Upload-Offset": "0"}, content=data)
        job_id = client.post(f"{up['upload_url']}/complete", headers=client.creds.device, json={}).json()["job"]["id"]
        first = wait_for(lambda: running(client, job_id), 30, "the job to be part-way")
        ctx = client.app.state.ctx
    with ctx.sessions() as s:  # the app has shut down (SIGTERM path): the job is back in the queue, no attempt lost
        job = s.get(JobRow, job_id)
        assert (job.status, job.attempts, job.lease_owner) == ("queued", 0, None)
        assert s.get(ProcessingRun, first["run_id"]).status == "failed"
    with running_app(settings) as client:
        wait_for(lambda: running(client, job_id, 1), 30, "the job to run again")
        r = client.post(f"/api/jobs/{job_id}/cancel", headers=client.creds["operator"])
        assert r.status_code == 200 and r.json()["cancel_requested"]
        final = wait_for(
            lambda: (
                (j := client.get(f"/api/jobs/{job_id}", headers=client.creds.device).json())["status"] != "running"
                and j
            ),
            30,
            "the cancel to take effect",
        )
        assert final["status"] == "cancelled" and final["attempts"] == 1
        assert client.post(f"/api/jobs/{job_id}/cancel", headers=client.creds["operator"]).status_code == 409
