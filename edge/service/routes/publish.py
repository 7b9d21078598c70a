"""The RTMP relay's ``on_publish`` hook: may this stream key publish? (Called by our nginx, never by a device.)"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from edge.service.deps import get_context

router = APIRouter(prefix="/api/publish", tags=["publish"], include_in_schema=False)
LOOPBACK = {"127.0.0.1", "::1"}


@router.post("/rtmp")
async def rtmp_on_publish(request: Request, secret: str = ""):
    """nginx-rtmp posts ``call=publish&name=<stream key>&addr=<publisher>...``; 2xx lets the publisher in, 403
    refuses it. Only nginx knows the per-process secret, and only a local caller is heard."""
    ctx = get_context(request)
    relay = ctx.rtmp
    if (
        relay is None
        or request.client is None
        or request.client.host not in LOOPBACK
        or not hmac.compare_digest(secret, relay.secret)
    ):
        return Response(status_code=status.HTTP_403_FORBIDDEN)
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode("latin-1")).items()}
    if form.get("app") != "live" or form.get("call") not in ("publish", "play"):
        return Response(status_code=status.HTTP_403_FORBIDDEN)
    if form["call"] == "play":  # our reader (nginx lets only 127.0.0.1 play)
        relay.player_started(form.get("name", ""))
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    refused = await run_in_threadpool(ctx.rtmp_publish, form.get("name", ""), form.get("addr", "?"))
    if refused:
        return Response(refused, status_code=status.HTTP_403_FORBIDDEN)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
