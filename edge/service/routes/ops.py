"""Operations: liveness, readiness, Prometheus metrics (no authentication: no personal data in them)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from edge.service.deps import ContextDep

router = APIRouter(tags=["ops"])


@router.get("/healthz")
def healthz():
    """The process is up and serving requests."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(ctx: ContextDep):
    """Ready for work: started, not draining, database reachable, job workers alive."""
    problems = []
    if not ctx.accepting:
        problems.append("starting or shutting down")
    db = ctx.database_ok()
    if db is not None:
        problems.append(f"database: {db}")
    dead = [w.name for w in ctx.job_workers if not w.is_alive()]
    if dead:
        problems.append(f"job workers stopped: {', '.join(dead)}")
    body = {
        "status": "ready" if not problems else "not ready",
        "problems": problems,
        "streams": len(ctx.all_streams()),
        "job_workers": len(ctx.job_workers),
        "instance": ctx.instance,
    }
    return JSONResponse(body, status_code=200 if not problems else 503)


@router.get("/metrics", response_class=Response)
async def metrics(ctx: ContextDep):
    return Response(await run_in_threadpool(ctx.metrics.render), media_type=CONTENT_TYPE_LATEST)
