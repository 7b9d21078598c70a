"""Putting the dashboard on a FastAPI app: :func:`mount_dashboard` (into the edge service) or :func:`create_app`.

Everything the browser loads comes from this server (Leaflet from the XStatic-Leaflet package, plotly.min.js from
the plotly package, our own CSS/JS): the pages work with no internet. The base map is optional (``tile_url``).
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from dashboard.auth import CsrfFailed, Forbidden, NotLoggedIn, login_redirect_url
from dashboard.context import DashboardContext, make_templates, render
from dashboard.security import SecurityHeadersMiddleware, TLSAwareSessionMiddleware, content_security_policy
from dashboard.settings import dashboard_settings_from, resolve_data_dir, resolve_secret_key

STATIC_DIR = Path(__file__).resolve().parent / "static"
SESSION_COOKIE = "airpatrol_dashboard"  # the service's own API cookie is "airpatrol_session"


def plotly_js_path() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def leaflet_dir() -> Path:
    import xstatic.pkg.leaflet

    return Path(xstatic.pkg.leaflet.BASE_DIR)


def _is_api(request: Request, prefix: str) -> bool:
    return request.url.path.startswith(prefix + "/api/")


def _install_error_pages(app: FastAPI, c: DashboardContext) -> None:
    prefix = c.settings.prefix.rstrip("/")
    previous = app.exception_handlers.get(StarletteHTTPException, http_exception_handler)

    async def not_logged_in(request: Request, exc: NotLoggedIn):
        if _is_api(request, prefix):
            return JSONResponse({"detail": "login required"}, status_code=401)
        return RedirectResponse(login_redirect_url(request), status_code=303)

    async def forbidden(request: Request, exc: Forbidden):
        if _is_api(request, prefix):
            return JSONResponse({"detail": f"needs the {exc.needed} role"}, status_code=403)
        from dashboard.auth import optional_user

        with c.sessions() as db:
            user = optional_user(request, db)
            return render(
                request,
                "error.html",
                user,
                status_code=403,
                title="Not allowed",
                message=f"This page needs the {exc.needed} role.",
            )

    async def csrf_failed(request: Request, exc: CsrfFailed):
        if _is_api(request, prefix) or request.headers.get("x-csrf-token") is not None:
            return JSONResponse({"detail": "missing or wrong CSRF token"}, status_code=403)
        return render(
            request,
            "error.html",
            None,
            status_code=403,
            title="Form expired",
            message="The form was stale or not sent from this dashboard. Go back, reload it and try again.",
        )

    async def http_error(request: Request, exc: StarletteHTTPException):
        path = request.url.path
        if not path.startswith(prefix + "/") or _is_api(request, prefix) or "/static/" in path:
            response = previous(request, exc)  # FastAPI's own handler is async; one set by the app may not be
            return await response if inspect.isawaitable(response) else response
        return render(
            request,
            "error.html",
            None,
            status_code=exc.status_code,
            title=f"Error {exc.status_code}",
            message=str(exc.detail),
        )

    app.add_exception_handler(NotLoggedIn, not_logged_in)  # type: ignore[arg-type]  # called only with its own class
    app.add_exception_handler(Forbidden, forbidden)  # type: ignore[arg-type]  # called only with its own class
    app.add_exception_handler(CsrfFailed, csrf_failed)  # type: ignore[arg-type]  # called only with its own class
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]  # called only with its own class


def mount_dashboard(app: FastAPI, settings=None) -> DashboardContext:
    """Add the dashboard (pages, JSON API, static files, session cookie) to ``app`` under ``settings.prefix``.

    ``settings``: :class:`DashboardSettings`, the service's ``AirPatrolSettings`` (its database URL, data folder and
    session secret are used), a dict, or None (environment). Call before the app starts (it adds a middleware).
    """
    from db.engine import session_factory
    from db.throttle import LoginThrottle

    s = dashboard_settings_from(settings)
    prefix = s.prefix.rstrip("/")
    service = getattr(app.state, "ctx", None)  # the edge service's context: same database and data folder
    if service is not None and hasattr(service, "database_url") and hasattr(service, "data_dir"):
        # db.engine's sessions, not the service's (those lock SQLite for writing at every BEGIN, page views must not)
        sessions, data_dir = session_factory(service.database_url), Path(service.data_dir)
        s = s.model_copy(update={"data_dir": data_dir})
    else:
        sessions, data_dir = session_factory(s.database_url), resolve_data_dir(s)
    c = DashboardContext(
        settings=s,
        sessions=sessions,
        templates=make_templates(prefix),
        data_dir=data_dir,
        throttle=LoginThrottle(sessions),
    )
    app.state.airpatrol_dashboard = c
    if s.basemap_file:
        from dashboard.basemap import BasemapError, open_basemap

        try:
            c.basemap = open_basemap(s.basemap_file)
        except BasemapError as exc:  # the dashboard still works, on the online tiles or a plain background
            c.basemap_error = str(exc)
            logging.getLogger(__name__).warning("offline base map not used: %s", exc)
    app.add_middleware(
        TLSAwareSessionMiddleware,
        secret_key=resolve_secret_key(s),
        session_cookie=SESSION_COOKIE,
        max_age=s.session_max_age_s,
        path=prefix or "/",
        same_site="lax",
        https_only=s.https_only,
    )
    app.add_middleware(SecurityHeadersMiddleware, csp=content_security_policy(s.tile_url))
    app.mount(prefix + "/static/leaflet", StaticFiles(directory=leaflet_dir()), name="dashboard-leaflet")
    app.mount(prefix + "/static/app", StaticFiles(directory=STATIC_DIR), name="dashboard-static")

    @app.get(prefix + "/static/plotly.min.js", include_in_schema=False)
    def plotly_js():
        return FileResponse(
            plotly_js_path(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
        )

    from dashboard.routes import router

    app.include_router(router, prefix=prefix, include_in_schema=False)
    if prefix and not any(getattr(r, "path", None) == "/" for r in app.router.routes):
        app.add_api_route("/", lambda: RedirectResponse(prefix + "/", status_code=307), include_in_schema=False)
    _install_error_pages(app, c)
    return c


def create_app(settings=None, *, migrate: bool = True) -> FastAPI:
    """A stand-alone dashboard app (the edge service mounts the same thing into its own app)."""
    s = dashboard_settings_from(settings)
    if migrate:
        from dashboard.settings import resolve_data_dir
        from db.cli import ensure_schema
        from db.json_import import import_data_folder

        ensure_schema(s.database_url)
        import_data_folder(s.database_url, resolve_data_dir(s))  # JSON files of before revision 0004, once
    app = FastAPI(title="AirPatrol dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    mount_dashboard(app, s)
    return app
