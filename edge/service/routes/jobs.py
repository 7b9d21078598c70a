"""Batch jobs (recorded flights): list, inspect progress, queue one for an uploaded video, cancel."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, status
from sqlalchemy import select

from edge.service.deps import Accepting, ContextDep, Reader, SessionDep, Writer
from edge.service.models import JobRow
from edge.service.schemas import JobIn, JobOut
from edge.service.uploads import UploadError

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


def job_out(job: JobRow) -> JobOut:
    return JobOut.model_validate(job)


def _job(session, job_id: int) -> JobRow:
    job = session.get(JobRow, job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} not found")
    return job


@router.get("", response_model=list[JobOut])
def list_jobs(
    _: Reader,
    session: SessionDep,
    status_: Literal["queued", "running", "complete", "failed", "cancelled"] | None = Query(None, alias="status"),
    limit: int = Query(100, ge=1, le=1000),
):
    q = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
    if status_:
        q = q.where(JobRow.status == status_)
    return [job_out(j) for j in session.scalars(q)]


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: int, _: Reader, session: SessionDep):
    return job_out(_job(session, job_id))


@router.post("", response_model=JobOut, status_code=201)
def create_job(body: JobIn, who: Writer, ctx: Accepting, session: SessionDep):
    """Queue (again) the processing of a completed video upload, e.g. with another speed limit or as baseline."""
    try:
        ctx.uploads.complete_path(session, body.video_upload_id, "video")
        if body.log_upload_id:
            ctx.uploads.complete_path(session, body.log_upload_id, "flight_log")
    except UploadError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    params = body.model_dump(exclude={"video_upload_id", "log_upload_id"})
    job = ctx.jobs.enqueue(
        session,
        video_upload_id=body.video_upload_id,
        log_upload_id=body.log_upload_id,
        params=params,
        created_by=who.label,
    )
    session.commit()
    return job_out(job)


@router.post("/{job_id}/cancel", response_model=JobOut)
def cancel_job(job_id: int, who: Writer, ctx: ContextDep, session: SessionDep):
    """A queued job is cancelled at once; a running one stops at its next heartbeat."""
    job = _job(session, job_id)
    if who.kind == "device" and job.created_by != who.label:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "a device may cancel only its own jobs")
    if job.status not in ("queued", "running"):
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} is already {job.status}")
    ctx.jobs.cancel(session, job)
    session.commit()
    return job_out(job)
