"""The persistent batch-job queue (table ``service_jobs``) and the worker threads that drain it.

Exactly-once completion without a broker: a worker *claims* a job with one conditional UPDATE (status queued, or
running with an expired lease -> running, owner = me, lease = now + ``job_lease_s``, attempts + 1); while it works
it renews the lease (``heartbeat``) with an UPDATE that only matches while it is still the owner; it completes the
job the same way. A worker that died stops renewing, its lease expires and another worker (or this instance after
a restart) claims the job again; a worker that comes back from the dead finds it is no longer the owner and stops
without completing. The same UPDATEs work on SQLite and MariaDB (no SKIP LOCKED needed). A job that died
``job_max_attempts`` times is failed instead of retried forever. Graceful shutdown hands running jobs back
(``release``: queued again, the attempt not counted).

A database outage longer than the lease stops every renewal, so every lease it outlasted looks expired although its
owner is alive and waiting in its retry loop. Two rules keep such a job from running twice:

* a worker takes over an *expired* lease only after its process has reached the database without a connection
  failure for a whole lease period (``db.retry.reachable_for``); queued jobs are claimed at once. When the database
  is back, the owners renew within their retry back-off (at most 5 s), long before that;
* fencing: every transaction that writes the job's results (``DatabaseSink(fence=...)``) first renews the lease with
  an UPDATE that matches only the owner *and* the attempt number it claimed (the fencing token). A worker whose
  job was taken over anyway (a network cut that only it saw) commits nothing more and stops (``lease_lost``).

What such a worker committed before it was fenced off is removed: the transaction that creates an attempt's
processing run records it on the job (``run_id``, in the same fenced transaction), and whoever ends the attempt
for it - the worker that takes the job over, a restart, giving up - marks that run failed and deletes its rows
(tracks, per-frame speeds, violations) in the same transaction as the take-over, so no page, export or count ever
sees half an attempt next to the complete one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from db.models import ProcessingRun, utcnow
from db.retry import DEFAULT_RETRY_S, is_connection_error, note_unreachable, reachable_for, retry_db, short
from db.sink import DatabaseSink, delete_run_rows
from edge.rundir import OutputWriteError
from edge.service.config import ServiceConfig
from edge.service.metrics import ServiceMetrics
from edge.service.models import JOB_STATUSES, JobRow
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline
from tracking.types import FrameResult, RunInfo

log = logging.getLogger("airpatrol.service.jobs")


class JobInterrupted(Exception):
    def __init__(self, reason: str):  # shutdown | lease_lost | cancelled
        super().__init__(reason)
        self.reason = reason


def _fail_run(s: Session, run_id: int | None, why: str) -> None:
    """An attempt's processing run that will never finish: failed, so nobody mistakes it for complete, and the rows
    its worker committed before it stopped (or was fenced off) deleted: a partial result counts nowhere."""
    if run_id is not None:
        s.execute(
            update(ProcessingRun)
            .where(ProcessingRun.id == run_id, ProcessingRun.status == "running")
            .values(status="failed", finished_at=utcnow(), error=why)
        )
        if s.scalar(select(ProcessingRun.status).where(ProcessingRun.id == run_id)) == "failed":
            delete_run_rows(s, [run_id])


class JobQueue:
    """``heartbeat``, ``finish`` and ``release`` wait for a database that went away (up to ``retry_s``): a running
    job rides out a database restart instead of failing (``claim`` is simply tried again at the next poll).
    ``claim`` takes over expired leases only once this process has reached the database for ``takeover_wait_s``
    (default: one lease) without a connection failure, counted from the queue's creation (module doc)."""

    def __init__(
        self,
        sessions: sessionmaker,
        lease_s: float,
        max_attempts: int,
        retry_s: float = DEFAULT_RETRY_S,
        takeover_wait_s: float | None = None,
    ):
        self.sessions, self.lease_s, self.max_attempts, self.retry_s = sessions, lease_s, max_attempts, retry_s
        # how long the database must have been reachable before an expired lease is taken over (default: a lease)
        self.takeover_wait_s = lease_s if takeover_wait_s is None else takeover_wait_s
        self._started = time.monotonic()

    def enqueue(
        self, s: Session, *, video_upload_id: str, log_upload_id: str | None, params: dict[str, Any], created_by: str
    ) -> JobRow:
        job = JobRow(
            video_upload_id=video_upload_id,
            log_upload_id=log_upload_id,
            params=params,
            created_by=created_by,
            max_attempts=self.max_attempts,
            status="queued",
        )
        s.add(job)
        s.flush()
        return job

    def _expired(self, now):
        return and_(JobRow.status == "running", JobRow.lease_expires_at < now)

    def claim(self, owner: str) -> JobRow | None:
        now = utcnow()
        # Expired leases say their owner is gone only when the database was reachable all the while (module doc).
        take_over = reachable_for(self._started) >= self.takeover_wait_s
        with self.sessions() as s, s.begin():
            if take_over:
                gone = s.scalars(select(JobRow).where(self._expired(now), JobRow.attempts >= JobRow.max_attempts))
                for job in gone:
                    job.status, job.finished_at, job.lease_owner = "failed", now, None
                    job.error = f"gave up after {job.attempts} attempts: the worker stopped each time (crash or kill)"
                    _fail_run(s, job.run_id, "the worker died (job abandoned)")
            claimable = (
                or_(JobRow.status == "queued", and_(self._expired(now), JobRow.attempts < JobRow.max_attempts))
                if take_over
                else JobRow.status == "queued"
            )
            job_id = s.scalar(select(JobRow.id).where(claimable).order_by(JobRow.id).limit(1))
            if job_id is None:
                return None
            # locked (MariaDB): a write of the current attempt that commits first renews the lease (this claim then
            # fails), one that comes later is fenced off; either way the run read here is the attempt's last
            previous_run = s.scalar(select(JobRow.run_id).where(JobRow.id == job_id).with_for_update())
            won = (
                s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, claimable)
                    .values(
                        status="running",
                        lease_owner=owner,
                        lease_expires_at=now + timedelta(seconds=self.lease_s),
                        heartbeat_at=now,
                        attempts=JobRow.attempts + 1,
                        started_at=now,
                        run_id=None,
                        progress=0.0,
                        frames_done=0,
                    )
                ).rowcount
                == 1
            )
            if not won:
                return None  # another worker was faster; try again at the next poll
            _fail_run(s, previous_run, "the worker running this attempt stopped; the job was retried")
            return s.get(JobRow, job_id)

    def fence(self, job_id: int, owner: str, attempt: int) -> Callable[[Session, int], None]:
        """For ``DatabaseSink(fence=...)``: renews the lease inside the result transaction and records the attempt's
        run (``run_id``) on the job, or raises ``JobInterrupted("lease_lost")`` (rolling it back) when this claim -
        owner and attempt - is no longer the job's."""

        def check(s: Session, run_id: int) -> None:
            now = utcnow()
            claim = and_(
                JobRow.id == job_id, JobRow.lease_owner == owner, JobRow.attempts == attempt, JobRow.status == "running"
            )
            renew = {"lease_expires_at": now + timedelta(seconds=self.lease_s), "heartbeat_at": now, "run_id": run_id}
            renewed = s.execute(update(JobRow).where(claim).values(**renew))
            if renewed.rowcount != 1:  # type: ignore[attr-defined]  # an UPDATE's result is a CursorResult
                raise JobInterrupted("lease_lost")

        return check

    def heartbeat(self, job_id: int, owner: str, **values) -> tuple[bool, bool]:
        """Renew the lease and store progress. Returns (still the owner, cancel requested)."""

        def attempt():
            now = utcnow()
            with self.sessions() as s, s.begin():
                mine = (
                    s.execute(
                        update(JobRow)
                        .where(JobRow.id == job_id, JobRow.lease_owner == owner, JobRow.status == "running")
                        .values(lease_expires_at=now + timedelta(seconds=self.lease_s), heartbeat_at=now, **values)
                    ).rowcount
                    == 1
                )
                cancel = bool(s.scalar(select(JobRow.cancel_requested).where(JobRow.id == job_id)))
            return mine, cancel

        return retry_db(attempt, f"renewing the lease of job {job_id}", self.retry_s, log)

    def finish(self, job_id: int, owner: str, status: str, error: str | None = None, **values) -> bool:
        assert status in JOB_STATUSES
        tries = 0

        def attempt() -> bool:
            nonlocal tries
            tries += 1
            with self.sessions() as s, s.begin():
                if (
                    s.execute(
                        update(JobRow)
                        .where(JobRow.id == job_id, JobRow.lease_owner == owner, JobRow.status == "running")
                        .values(
                            status=status,
                            error=error,
                            finished_at=utcnow(),
                            lease_owner=None,
                            lease_expires_at=None,
                            **values,
                        )
                    ).rowcount
                    == 1
                ):
                    return True
                # a retry whose first commit went through (only its answer was lost) finds the job finished already
                return tries > 1 and s.scalar(select(JobRow.status).where(JobRow.id == job_id)) == status

        return retry_db(attempt, f"finishing job {job_id}", self.retry_s, log)

    def release(self, job_id: int, owner: str, why: str, count_attempt: bool = False) -> bool:
        """Back to the queue. A graceful shutdown does not count as an attempt; an unexpected error does."""
        return retry_db(
            lambda: self._release(job_id, owner, why, count_attempt), f"requeueing job {job_id}", self.retry_s, log
        )

    def _release(self, job_id: int, owner: str, why: str, count_attempt: bool) -> bool:
        with self.sessions() as s, s.begin():
            run_id = s.scalar(select(JobRow.run_id).where(JobRow.id == job_id))
            ok = (
                s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.lease_owner == owner, JobRow.status == "running")
                    .values(
                        status="queued",
                        lease_owner=None,
                        lease_expires_at=None,
                        error=why,
                        attempts=JobRow.attempts if count_attempt else JobRow.attempts - 1,
                    )
                ).rowcount
                == 1
            )
            if ok:
                _fail_run(s, run_id, f"attempt interrupted ({why}); the job was queued again")
            return ok

    def requeue_instance(self, instance: str) -> int:
        """At start: jobs this instance was running when it died go back to the queue at once (attempt counted)."""
        with self.sessions() as s, s.begin():
            jobs = list(
                s.scalars(select(JobRow).where(JobRow.status == "running", JobRow.lease_owner.like(f"{instance}/%")))
            )
            for job in jobs:
                _fail_run(s, job.run_id, "the service restarted during this attempt")
                job.status, job.lease_owner, job.lease_expires_at = "queued", None, None
                job.error = "interrupted by a restart of the service"
            return len(jobs)

    def cancel(self, s: Session, job: JobRow) -> None:
        if job.status == "queued":
            job.status, job.finished_at = "cancelled", utcnow()
        elif job.status == "running":
            job.cancel_requested = True

    def counts(self) -> dict[str, int]:
        with self.sessions() as s:
            return dict(s.execute(select(JobRow.status, func.count()).group_by(JobRow.status)).all())


class JobProgressSink:
    """Renews the job's lease and reports progress while ``process_video`` runs; stops the run (by raising) when the
    service shuts down, the job is cancelled, or another worker took it over."""

    # fed each frame as it is processed, also when the run holds its results back to link them (edge.sinks.loop)
    follows_processing = True

    def __init__(
        self,
        queue: JobQueue,
        job_id: int,
        owner: str,
        every_s: float,
        stop: threading.Event,
        db_sink: DatabaseSink | None,
    ):
        self.queue, self.job_id, self.owner, self.every_s, self.stop = queue, job_id, owner, every_s, stop
        self.db_sink = db_sink
        self.frames, self._last = 0, 0.0
        self.frame_count: int | None = None

    def _beat(self, progress: float | None = None) -> None:
        values: dict[str, Any] = {"frames_done": self.frames, "frame_count": self.frame_count}
        if self.db_sink is not None and self.db_sink.run_id is not None:
            values["run_id"] = self.db_sink.run_id
        if progress is None and self.frame_count:
            progress = min(0.99, self.frames / self.frame_count)
        if progress is not None:
            values["progress"] = progress
        mine, cancel = self.queue.heartbeat(self.job_id, self.owner, **values)
        self._last = time.monotonic()
        if not mine:
            raise JobInterrupted("lease_lost")
        if cancel:
            raise JobInterrupted("cancelled")

    def open(self, info: RunInfo) -> None:
        self.frame_count = info.frame_count
        self._beat(0.0)  # records the run id at once: a crash from here on leaves a run to mark failed

    def write(self, result: FrameResult) -> None:
        # the video's frames done: a recording analysed at every n-th frame (tracking/frame_rate.py) hands over
        # every n-th result here
        self.frames = max(self.frames + 1, result.frame.index + 1)
        if self.stop.is_set():
            raise JobInterrupted("shutdown")
        if time.monotonic() - self._last >= self.every_s:
            self._beat()

    def close(self, summary: dict) -> None:
        pass  # completion is JobQueue.finish, after the database sink has committed the run

    def abort(self, error: BaseException | None) -> None:
        pass


@dataclass
class JobDeps:
    config: ServiceConfig
    pipeline_config: PipelineConfig
    make_pipeline: Callable[[PipelineConfig], Pipeline]
    sessions: sessionmaker
    resolve_upload: Callable[[str], Path]  # upload id -> path of the complete file, ValueError otherwise
    runs_dir: Path
    metrics: ServiceMetrics


class JobWorker(threading.Thread):
    def __init__(self, queue: JobQueue, owner: str, deps: JobDeps):
        super().__init__(name=f"job-worker-{owner}", daemon=True)
        self.queue, self.owner, self.deps = queue, owner, deps
        self.stop_event = threading.Event()
        self.current: int | None = None
        self._pipelines: dict[str, Pipeline] = {}

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                job = self.queue.claim(self.owner)
            except Exception as exc:  # database away for a moment: keep polling
                if is_connection_error(exc):
                    note_unreachable()  # expired leases are not taken over for a lease period (module doc)
                    log.warning(
                        "job worker %s: database unreachable (%s); polling again in %.0f s",
                        self.owner,
                        short(exc),
                        self.deps.config.job_poll_s,
                    )
                else:
                    log.exception("job worker %s: claim failed", self.owner)
                job = None
            if job is None:
                self.stop_event.wait(self.deps.config.job_poll_s)
                continue
            self.current = job.id
            try:
                self._run_job(job)
            finally:
                self.current = None

    def _pipeline(self, config: PipelineConfig) -> Pipeline:
        key = config.model_dump_json()
        if key not in self._pipelines:
            if len(self._pipelines) >= 2:
                self._pipelines.clear()
            self._pipelines[key] = self.deps.make_pipeline(config)
        return self._pipelines[key]

    def _run_job(self, job: JobRow) -> None:
        from edge.runner import process_video

        d, params = self.deps, job.params or {}
        log.info("job %s: attempt %s by %s", job.id, job.attempts, self.owner, extra={"job": job.id})
        db_sink = None
        try:
            video = d.resolve_upload(job.video_upload_id)
            telemetry = d.resolve_upload(job.log_upload_id) if job.log_upload_id else None
            config = d.pipeline_config.model_copy(update={"baseline": bool(params.get("baseline"))})
            db_sink = DatabaseSink(
                session_maker=d.sessions,
                speed_limit_kmh=params.get("speed_limit_kmh"),
                task_round_id=params.get("task_round_id"),
                time_offset_s=params.get("time_offset_s"),
                batch_rows=d.config.db_batch_rows,
                retry_s=d.config.db_retry_s,
                fence=self.queue.fence(job.id, self.owner, job.attempts),
            )
            progress = JobProgressSink(
                self.queue, job.id, self.owner, d.config.job_heartbeat_s, self.stop_event, db_sink
            )
            outcome = process_video(
                video,
                d.runs_dir / f"job-{job.id}",
                config,
                telemetry=telemetry,
                pipeline=self._pipeline(config),
                extra_sinks=[db_sink, progress],
                write_video=d.config.job_write_video,
                progress=False,
            )
            done = self.queue.finish(
                job.id,
                self.owner,
                "complete",
                progress=1.0,
                frames_done=progress.frames,
                out_dir=str(outcome.out_dir),
                run_id=db_sink.run_id,
            )
            status = "complete" if done else "lost"
            log.info("job %s: %s (%s frames)", job.id, status, progress.frames, extra={"job": job.id})
        except JobInterrupted as exc:
            status = exc.reason
            if exc.reason == "shutdown":
                self.queue.release(job.id, self.owner, "service shut down")
            elif exc.reason == "cancelled":
                self.queue.finish(job.id, self.owner, "cancelled", error="cancelled by a user")
            log.info("job %s: interrupted (%s)", job.id, exc.reason, extra={"job": job.id})
        except OutputWriteError as exc:  # disk full: the run was marked failed; retrying now would fill it again
            status = "failed"
            self.queue.finish(job.id, self.owner, "failed", error=str(exc)[:2000], run_id=db_sink and db_sink.run_id)
            log.error("job %s failed: %s", job.id, exc, extra={"job": job.id})
        except ValueError as exc:  # the input's fault (unreadable video, log not covering it...): retrying won't help
            status = "failed"
            self.queue.finish(job.id, self.owner, "failed", error=str(exc)[:2000])
            log.warning("job %s failed: %s", job.id, exc, extra={"job": job.id})
        except Exception as exc:  # ours or the environment's: retry while attempts are left
            log.exception("job %s: attempt %s crashed", job.id, job.attempts, extra={"job": job.id})
            if job.attempts < job.max_attempts:
                status = "retry"
                self.queue.release(job.id, self.owner, f"{type(exc).__name__}: {exc}"[:2000], count_attempt=True)
            else:
                status = "failed"
                self.queue.finish(job.id, self.owner, "failed", error=f"{type(exc).__name__}: {exc}"[:2000])
        d.metrics.jobs_finished.labels(status).inc()
