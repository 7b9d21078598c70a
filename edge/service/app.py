"""``create_app(settings)``: the FastAPI application of ``airpatrol serve`` (the dashboard mounts its pages on it)."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from edge.config import AirPatrolSettings
from edge.service.context import PipelineFactory, ServiceContext
from edge.service.routes import auth, jobs, ops, publish, streams, uploads

DESCRIPTION = """Live drone traffic monitoring at the edge.

Ground stations stream video (pull URLs, or push over WebSocket); every stream runs the AirPatrol pipeline and its
tracks, speeds and violations are available live (WebSocket feed, MJPEG preview) and in the database. Recorded
flights are uploaded (resumable) and processed by a persistent job queue.

Authentication: a device API token (`Authorization: Bearer apt_...`) or a user session
(`POST /api/auth/login`, then `Authorization: Bearer <token>` or the session cookie), or HTTP Basic.
Writes need a device or the operator/admin role."""


def create_app(
    settings: AirPatrolSettings | None = None, *, pipeline_factory: PipelineFactory | None = None
) -> FastAPI:
    """Build the app. The database is checked here (a bad URL fails now, not at the first request); threads
    (stream workers, job workers) start with the app's lifespan and stop, gracefully, at its end."""
    ctx = ServiceContext(settings or AirPatrolSettings(), pipeline_factory)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await run_in_threadpool(ctx.start)
        try:
            yield
        finally:
            await run_in_threadpool(ctx.shutdown)

    app = FastAPI(title="AirPatrol edge service", description=DESCRIPTION, version="0.1.0", lifespan=lifespan)
    app.state.ctx = ctx
    for module in (ops, auth, streams, uploads, jobs, publish):
        app.include_router(module.router)
    from dashboard.app import mount_dashboard  # the web pages under /dashboard (same database and logins)

    mount_dashboard(app, ctx.settings)
    return app
