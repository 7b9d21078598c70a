"""Resumable uploads of recorded flights (video + optional flight log); a completed video becomes a batch job.

create ``POST /api/uploads`` -> send ``PATCH /api/uploads/{id}`` with ``Upload-Offset`` and the bytes (repeat) ->
after an interruption ``HEAD /api/uploads/{id}`` tells the offset to go on from -> ``POST /api/uploads/{id}/complete``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, HTTPException, Request, Response, status
from sqlalchemy import select
from starlette.requests import ClientDisconnect

from db.audit import audit
from edge.service.auth import Principal
from edge.service.deps import Accepting, ContextDep, Reader, SessionDep, Writer, client_address
from edge.service.models import JobRow, UploadRow
from edge.service.routes.jobs import job_out
from edge.service.schemas import CompleteIn, CompleteOut, UploadIn, UploadOut
from edge.service.uploads import UploadError, UploadStore

router = APIRouter(prefix="/api/uploads", tags=["uploads"])


def _out(store: UploadStore, row: UploadRow) -> UploadOut:
    return UploadOut(
        id=row.id,
        kind=row.kind,
        filename=row.filename,
        size=row.size,
        offset=store.offset(row),
        status=row.status,
        info=row.info,
        error=row.error,
        upload_url=f"/api/uploads/{row.id}",
    )


def _http(exc: UploadError) -> HTTPException:
    headers = {"Retry-After": str(int(exc.retry_after_s + 0.999))} if exc.retry_after_s is not None else None
    return HTTPException(exc.status, str(exc), headers=headers)


def _own(store: UploadStore, session, upload_id: str, who: Principal) -> UploadRow:
    try:
        row = store.get(session, upload_id)
    except UploadError as exc:
        raise _http(exc) from None
    if row.owner != who.label and not (who.kind == "user" and who.can_write):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this upload belongs to another device")
    return row


@router.post("", response_model=UploadOut, status_code=201)
def create_upload(body: UploadIn, who: Writer, ctx: Accepting, session: SessionDep, response: Response):
    try:
        row = ctx.uploads.create(session, who, body.kind, body.filename, body.size, body.sha256)
    except UploadError as exc:
        raise _http(exc) from None
    session.commit()
    response.headers["Location"] = f"/api/uploads/{row.id}"
    response.headers["Upload-Offset"] = "0"
    return _out(ctx.uploads, row)


@router.head("/{upload_id}")
def upload_offset(upload_id: str, who: Writer, ctx: ContextDep, session: SessionDep):
    row = _own(ctx.uploads, session, upload_id, who)
    return Response(
        status_code=200,
        headers={
            "Upload-Offset": str(ctx.uploads.offset(row)),
            "Upload-Length": str(row.size),
            "Cache-Control": "no-store",
        },
    )


@router.get("/{upload_id}", response_model=UploadOut)
def get_upload(upload_id: str, _: Reader, ctx: ContextDep, session: SessionDep):
    try:
        return _out(ctx.uploads, ctx.uploads.get(session, upload_id))
    except UploadError as exc:
        raise _http(exc) from None


_CHUNK_BODY: dict[str, Any] = {"requestBody": {"content": {"application/offset+octet-stream": {}}}}


@router.put("/{upload_id}", status_code=204, operation_id="put_upload_chunk", openapi_extra=_CHUNK_BODY)
@router.patch("/{upload_id}", status_code=204, operation_id="patch_upload_chunk", openapi_extra=_CHUNK_BODY)
async def append_chunk(
    upload_id: str,
    request: Request,
    who: Writer,
    ctx: Accepting,
    upload_offset: int = Header(ge=0, description="bytes already on the server (HEAD tells)"),
):
    """Append the request body at ``Upload-Offset``; 409 when the offset is not what the server has."""
    with ctx.sessions() as session:  # closed before the body streams in: no transaction held meanwhile
        row = _own(ctx.uploads, session, upload_id, who)
    try:
        new_offset = await ctx.uploads.append(row, upload_offset, request.stream())
    except UploadError as exc:
        raise _http(exc) from None
    except ClientDisconnect:  # the bytes that arrived are kept; the client resumes from HEAD's offset
        return Response(status_code=status.HTTP_400_BAD_REQUEST)
    return Response(status_code=204, headers={"Upload-Offset": str(new_offset)})


@router.post("/{upload_id}/complete", response_model=CompleteOut)
def complete_upload(upload_id: str, body: CompleteIn, who: Writer, ctx: Accepting, session: SessionDep):
    """Check size, SHA-256 and content (PyAV probe / flight-log parse); a video is then queued for processing."""
    row = _own(ctx.uploads, session, upload_id, who)
    session.commit()  # end the read transaction: hashing and probing a large file must not hold the database
    try:
        ctx.uploads.complete(session, row)
        job = None
        if row.kind == "video" and body.enqueue:
            # A retried completion (the client never saw the first answer) gets the job already queued, not a
            # second run of the same flight. Another run of an upload: POST /api/jobs.
            job = session.scalar(
                select(JobRow)
                .where(JobRow.video_upload_id == row.id, JobRow.status.in_(("queued", "running", "complete")))
                .order_by(JobRow.id.desc())
                .limit(1)
            )
        if row.kind == "video" and body.enqueue and job is None:
            if body.log_upload_id:
                ctx.uploads.complete_path(session, body.log_upload_id, "flight_log")
            params = body.model_dump(exclude={"log_upload_id", "enqueue"})
            job = ctx.jobs.enqueue(
                session, video_upload_id=row.id, log_upload_id=body.log_upload_id, params=params, created_by=who.label
            )
        session.commit()
    except UploadError as exc:
        raise _http(exc) from None
    return CompleteOut(upload=_out(ctx.uploads, row), job=job_out(job) if job else None)


@router.delete("/{upload_id}", status_code=204)
def discard_upload(upload_id: str, who: Writer, request: Request, ctx: ContextDep, session: SessionDep):
    row = _own(ctx.uploads, session, upload_id, who)
    ctx.uploads.discard(session, row)
    audit(
        session,
        who.label,
        "upload.delete",
        f"upload:{upload_id}",
        client_address(request),
        via="api",
        filename=row.filename,
    )
    session.commit()
