"""Live streams: register (pull URL or push), status, stop; live feed (WebSocket), snapshot and MJPEG preview; push."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time

from fastapi import APIRouter, HTTPException, Request, WebSocket, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse
from starlette.websockets import WebSocketDisconnect, WebSocketState

from db.audit import audit
from db.crud import get_device
from edge.service import stream_calibration
from edge.service.auth import AuthError, Principal
from edge.service.context import ServiceContext
from edge.service.deps import (
    Accepting,
    ContextDep,
    Reader,
    SessionDep,
    Writer,
    client_address,
    get_context,
    resolve_principal,
)
from edge.service.ingest import StreamSourceError, check_source
from edge.service.models import StreamRow
from edge.service.push import (
    CLOSE_POLICY,
    EndMsg,
    FrameMsg,
    HelloMsg,
    ProtocolError,
    check_jpeg,
    decode_jpeg,
    parse_text,
)
from edge.service.schemas import StreamCalibrationIn, StreamIn, StreamOut
from edge.service.stream_process import ProcessStreamWorker
from edge.service.workers import StreamWorker

router = APIRouter(prefix="/api/streams", tags=["streams"])
BOUNDARY = "airpatrolframe"


def _out(worker: StreamWorker | ProcessStreamWorker) -> StreamOut:
    base = f"/api/streams/{worker.spec.id}"
    return StreamOut(
        **worker.status(),
        feed_url=f"{base}/feed",
        preview_url=f"{base}/preview.mjpg",
        push_url=f"{base}/push" if worker.spec.kind == "push" else None,
    )


def _worker(ctx: ServiceContext, stream_id: int) -> StreamWorker | ProcessStreamWorker:
    worker = ctx.stream(stream_id)
    if worker is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"stream {stream_id} is not running on this server")
    return worker


@router.post("", response_model=StreamOut, status_code=201)
def register_stream(body: StreamIn, who: Writer, ctx: Accepting, session: SessionDep):
    """Start processing a stream: ``pull`` reads ``url`` (reconnecting when it drops); ``push`` waits for the
    device on the WebSocket ``push_url``."""
    device_id = who.device_id
    if body.device_serial is not None:
        device = get_device(session, body.device_serial)
        if device is None:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, f"device {body.device_serial!r} is not registered"
            )
        if who.kind == "device" and device.id != who.device_id:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "a device may register streams only for itself")
        device_id = device.id
    if body.kind == "pull":
        if not body.url:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "a pull stream needs a url")
        try:
            shown = check_source(body.url, ctx.config.stream_file_root).shown
        except StreamSourceError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    elif body.url:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "a push stream has no url (the device connects to us)"
        )
    else:
        shown = "push"
    try:
        calibration = body.calibration.config() if body.calibration is not None else None
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"calibration: {exc}") from None
    row = StreamRow(
        name=body.name or shown[:128],
        kind=body.kind,
        url=body.url,
        device_id=device_id,
        speed_limit_kmh=body.speed_limit_kmh,
        task_round_id=body.task_round_id,
        created_by=who.label,
    )
    session.add(row)
    session.commit()
    if calibration is not None:
        stream_calibration.save(session, row.id, calibration)
        session.commit()
    return _out(ctx.start_stream(row))


@router.get("", response_model=list[StreamOut])
def list_streams(_: Reader, ctx: ContextDep):
    return [_out(w) for w in ctx.all_streams()]


@router.get("/{stream_id}", response_model=StreamOut)
def get_stream(stream_id: int, _: Reader, ctx: ContextDep):
    return _out(_worker(ctx, stream_id))


@router.delete("/{stream_id}", response_model=StreamOut)
def stop_stream(stream_id: int, who: Writer, request: Request, ctx: ContextDep, session: SessionDep):
    """Stop it: what is queued is processed, the run is completed (its violations computed), the stream forgotten."""
    row = session.get(StreamRow, stream_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"stream {stream_id} not found")
    if not ctx.may_manage_stream(who, row):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "a device may stop only its own streams")
    worker = ctx.stop_stream(session, row)
    if worker is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"stream {stream_id} was not running")
    audit(session, who.label, "stream.delete", f"stream:{stream_id}", client_address(request), via="api", name=row.name)
    session.commit()
    return _out(worker)


@router.post("/{stream_id}/calibration", response_model=StreamOut)
def calibrate_stream(
    stream_id: int, body: StreamCalibrationIn, who: Writer, request: Request, ctx: ContextDep, session: SessionDep
):
    """Give a running stream its own scale: its current run is completed, the stream goes on in a new run measured
    with it (a push device reconnects to the same push URL)."""
    row = session.get(StreamRow, stream_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"stream {stream_id} not found")
    if not ctx.may_manage_stream(who, row):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "a device may calibrate only its own streams")
    try:
        calibration = body.config()
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"calibration: {exc}") from None
    try:
        worker = ctx.calibrate_stream(session, row, calibration)
    except LookupError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    audit(
        session,
        who.label,
        "stream.calibrate",
        f"stream:{stream_id}",
        client_address(request),
        via="api",
        calibration=stream_calibration.describe(calibration),
    )
    session.commit()
    return _out(worker)


@router.get("/{stream_id}/latest")
def latest_result(stream_id: int, _: Reader, ctx: ContextDep):
    """The last result message (same JSON as the feed); 404 before the first processed frame."""
    msg = _worker(ctx, stream_id).latest_message
    if msg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no frame processed yet")
    return Response(msg, media_type="application/json")


@router.get("/{stream_id}/snapshot.jpg", response_class=Response, responses={200: {"content": {"image/jpeg": {}}}})
async def snapshot(stream_id: int, _: Reader, ctx: ContextDep):
    jpeg = await run_in_threadpool(_worker(ctx, stream_id).preview_jpeg)
    if jpeg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no frame processed yet")
    return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})


@router.get("/{stream_id}/preview.mjpg", response_class=StreamingResponse)
async def preview(stream_id: int, _: Reader, ctx: ContextDep):
    """MJPEG (multipart/x-mixed-replace) of the annotated frames, at most ``service.preview_fps``: an <img> src."""
    worker = _worker(ctx, stream_id)
    min_gap = 1.0 / ctx.config.preview_fps

    async def parts():
        sub = worker.feed.subscribe(maxsize=1)
        try:
            last = 0.0
            while not (worker.finished and sub.queue.empty()):
                try:
                    await asyncio.wait_for(sub.queue.get(), timeout=2.0)
                except TimeoutError:
                    continue
                if time.monotonic() - last < min_gap:
                    continue
                jpeg = await run_in_threadpool(worker.preview_jpeg)
                if jpeg is None:
                    continue
                last = time.monotonic()
                yield (
                    f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n".encode()
                    + jpeg
                    + b"\r\n"
                )
        finally:
            worker.feed.unsubscribe(sub)

    return StreamingResponse(
        parts(), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}", headers={"Cache-Control": "no-store"}
    )


# -- WebSockets ------------------------------------------------------------------------------------------------
async def _ws_principal(ws: WebSocket, ctx: ServiceContext) -> Principal | None:
    """The caller, or None after closing the socket with 1008 and the reason."""

    def check() -> Principal:
        with ctx.sessions() as s:
            return resolve_principal(ws, ctx, s)

    try:
        return await run_in_threadpool(check)
    except AuthError as exc:
        await _close(ws, ctx, CLOSE_POLICY, str(exc))
        return None


async def _close(ws: WebSocket, ctx: ServiceContext, code: int, reason: str) -> None:
    if ws.application_state == WebSocketState.CONNECTING:
        await ws.accept()  # accept first: a close during the handshake would lose the reason (plain HTTP 403)
    if code != 1000:
        ctx.metrics.ws_closed.labels(str(code)).inc()
    await ws.close(code, reason[:120])


@router.websocket("/{stream_id}/feed")
async def feed(ws: WebSocket, stream_id: int):
    """JSON messages: ``result`` per processed frame (tracks, speeds, new violations, stats) and ``status``
    (connected, reconnecting, finished...). A slow client loses its oldest messages, never blocks the stream."""
    ctx = get_context(ws)
    if await _ws_principal(ws, ctx) is None:
        return
    worker = ctx.stream(stream_id)
    if worker is None:
        await _close(ws, ctx, CLOSE_POLICY, f"stream {stream_id} is not running on this server")
        return
    await ws.accept()
    sub = worker.feed.subscribe()
    reader = asyncio.create_task(_watch_feed_client(ws, ctx))  # notices the client leaving while no message flows
    try:
        if worker.latest_message:
            await ws.send_text(worker.latest_message)
        while not reader.done():
            if worker.finished and sub.queue.empty():
                await ws.close(1000, "stream finished")
                break
            getter = asyncio.ensure_future(asyncio.wait_for(sub.queue.get(), timeout=1.0))
            await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done() and not getter.cancelled() and getter.exception() is None:
                await ws.send_text(getter.result())
            else:
                getter.cancel()
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        reader.cancel()
        worker.feed.unsubscribe(sub)


async def _watch_feed_client(ws: WebSocket, ctx: ServiceContext) -> None:
    """Wait for the feed client to leave; the feed is one-way, so a message from the client closes it with 1003."""
    msg = await ws.receive()
    if msg["type"] != "websocket.disconnect":
        await _close(ws, ctx, 1003, "the feed is read-only: send nothing")


@router.websocket("/{stream_id}/push")
async def push(ws: WebSocket, stream_id: int):
    """Device -> server frames: text header ``{"type": "frame", "t": .., "telemetry": {..}}`` then the JPEG as a
    binary message; ``{"type": "end"}`` completes the run. Protocol errors close with 1003/1008/1009 and a reason.
    The server sends ``{"type": "ack", ...}`` about once a second (received, processed, dropped)."""
    ctx = get_context(ws)
    who = await _ws_principal(ws, ctx)
    if who is None:
        return
    if not who.can_write:
        await _close(ws, ctx, CLOSE_POLICY, f"role {who.role!r} may not push frames")
        return

    def load_row():
        with ctx.sessions() as s:
            return s.get(StreamRow, stream_id)

    row = await run_in_threadpool(load_row)
    worker = ctx.stream(stream_id)
    if row is None or worker is None or row.kind != "push":
        await _close(ws, ctx, CLOSE_POLICY, f"stream {stream_id} is not a running push stream")
        return
    if not ctx.may_manage_stream(who, row):
        await _close(ws, ctx, CLOSE_POLICY, "this stream belongs to another device")
        return
    conn = PushConnection(ws, who.label)
    if not worker.attach_pusher(conn):
        old = worker.pusher
        # The same client (device or user) connecting again while the server still holds its previous connection:
        # a link drop the server has not noticed yet (it would refuse until a ping timed out, and the client would
        # back off meanwhile). The new connection takes over; the old one is closed, as a policy close, so that a
        # second copy of the same client that is really still pushing stops instead of taking it back.
        if not (
            isinstance(old, PushConnection) and old.principal == conn.principal and worker.replace_pusher(old, conn)
        ):
            await _close(ws, ctx, CLOSE_POLICY, "another client is already pushing to this stream, or it has ended")
            return
        asyncio.ensure_future(_close_replaced(old.ws, ctx))
    await ws.accept()
    cfg, ended = ctx.config, False
    header: FrameMsg | None = None
    t_first = last_t = None
    last_ack, acks = time.monotonic(), True
    try:
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                break
            if msg.get("text") is not None:
                if header is not None:
                    raise ProtocolError(1003, "expected the JPEG (binary) of the previous frame header, got text")
                m = parse_text(msg["text"])
                if isinstance(m, HelloMsg):
                    worker.set_fps(m.fps)
                elif isinstance(m, FrameMsg):
                    header = m
                elif isinstance(m, EndMsg):
                    ended = True
                    await ws.close(1000, "run complete")
                    break
                continue
            data = msg.get("bytes")
            if data is None:
                continue
            received = time.perf_counter()
            if header is None:
                raise ProtocolError(1003, "binary message without a preceding frame header")
            check_jpeg(data, cfg.max_push_frame_bytes, cfg.max_frame_pixels)  # header only: microseconds
            t = header.t if header.t is not None else received
            if last_t is not None and t <= last_t:
                raise ProtocolError(1003, f"frame time {t:.3f} s is not after the previous {last_t:.3f} s")
            t_first = t if t_first is None else t_first
            if worker.pusher is not conn:
                break  # replaced by a newer connection of the same client: its frames are the run's now
            worker.push_frame(functools.partial(decode_jpeg, data), t - t_first, header.pose(t - t_first), received)
            last_t, header = t, None
            if acks and time.monotonic() - last_ack >= 1.0:
                last_ack = time.monotonic()
                try:
                    await ws.send_text(json.dumps({"type": "ack", **worker.stats()}))
                except (WebSocketDisconnect, RuntimeError, OSError):
                    acks = False  # the client is closing: still take the frames it sent before it left
    except ProtocolError as exc:
        await _close(ws, ctx, exc.code, exc.reason)
    except WebSocketDisconnect:
        pass
    finally:
        worker.detach_pusher(conn, ended)


@dataclasses.dataclass(frozen=True)
class PushConnection:
    """A push client's connection, as the stream's pusher: who it is decides whether a new one may replace it."""

    ws: WebSocket
    principal: str  # Principal.label


async def _close_replaced(ws: WebSocket, ctx: ServiceContext) -> None:
    try:
        await _close(ws, ctx, CLOSE_POLICY, "replaced by a newer connection of the same client")
    except (RuntimeError, OSError, WebSocketDisconnect):  # already closing, or the link is gone
        pass
