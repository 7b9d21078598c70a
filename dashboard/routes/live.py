"""Live: every active stream of the edge service with its annotated preview, vehicle count, speeds, violations,
fps and dropped frames.

The stream workers live in the service process (``app.state.ctx.streams``); the dashboard reads their status in
process and the browser shows the service's MJPEG preview and follows its WebSocket result feed. Without the
service (a stand-alone dashboard) the page says that no live service is attached.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request

from dashboard.auth import viewer
from dashboard.context import render

router = APIRouter()


def service_context(request: Request):
    ctx = getattr(request.app.state, "ctx", None)
    return ctx if ctx is not None and hasattr(ctx, "streams") else None


def stream_views(request: Request) -> list[dict]:
    svc = service_context(request)
    if svc is None:
        return []
    with svc._streams_lock:
        workers = list(svc.streams.values())
    views = []
    for w in workers:
        if w.finished:
            continue
        status = w.status()
        latest = json.loads(w.latest_message) if getattr(w, "latest_message", None) else {}
        tracks = latest.get("tracks", [])
        status.update(
            vehicles=len(tracks),
            moving=sum(1 for t in tracks if t.get("moving")),
            speeds=sorted(
                (
                    {"id": t["id"], "class": t["class"], "speed_kmh": t["speed_kmh"], "flag": t.get("flag")}
                    for t in tracks
                    if t.get("moving") and t.get("speed_kmh") is not None
                ),
                key=lambda t: -t["speed_kmh"],
            )[:20],
            frame=latest.get("frame"),
            latency_ms=latest.get("latency_ms"),
            scale_source=latest.get("scale_source"),
            metres_per_pixel=latest.get("metres_per_pixel"),
            # vehicles with a map position, for the map's live layer
            positions=[
                {
                    "id": t["id"],
                    "class": t["class"],
                    "speed_kmh": t.get("speed_kmh"),
                    "flag": t.get("flag"),
                    "lat": t["lat"],
                    "lon": t["lon"],
                }
                for t in tracks
                if t.get("lat") is not None and t.get("lon") is not None
            ],
        )
        views.append(status)
    return views


@router.get("/live", name="live")
def live_page(request: Request, user=Depends(viewer)):
    return render(
        request, "live.html", user, attached=service_context(request) is not None, streams=stream_views(request)
    )


@router.get("/api/live")
def live_api(request: Request, user=Depends(viewer)):
    return {"attached": service_context(request) is not None, "streams": stream_views(request)}
