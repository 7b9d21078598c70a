"""What every dashboard request needs: settings, the database sessions, the templates (kept on ``app.state``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:  # imported for the annotations only: the basemap reader loads on demand
    from dashboard.basemap import Basemap
    from db.throttle import LoginThrottle

from dashboard.csrf import csrf_token
from dashboard.settings import DashboardSettings

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


@dataclass
class DashboardContext:
    settings: DashboardSettings
    sessions: sessionmaker[Session]
    templates: Jinja2Templates
    data_dir: Path
    throttle: LoginThrottle  # state in the database
    basemap: Basemap | None = field(default=None)  # when basemap_file opened
    basemap_error: str | None = None  # why the configured basemap_file is not used

    def url(self, path: str = "/") -> str:
        return self.settings.prefix.rstrip("/") + path


def make_templates(prefix: str) -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    env = templates.env
    env.globals["u"] = lambda path="/": prefix.rstrip("/") + path
    env.filters["dt"] = lambda v: "" if v is None else v.strftime("%Y-%m-%d %H:%M:%S")
    env.filters["num"] = lambda v, nd=1: "" if v is None else f"{v:.{nd}f}"
    from dashboard.labels import flight_label, run_label
    from tracking import speed_classes as sc

    env.globals.update(flight_label=flight_label, run_label=run_label)

    env.globals["speed_palette"] = {
        "edges": list(sc.SPEED_EDGES_KMH),
        "colours": list(sc.SPEED_COLOURS),
        "unknown": sc.UNKNOWN_COLOUR,
        "violation": sc.VIOLATION_COLOUR,
    }
    return templates


def ctx(request: Request) -> DashboardContext:
    return request.app.state.airpatrol_dashboard


def get_db(request: Request) -> Iterator[Session]:
    """One session per request. Handlers that write call ``db.commit()`` themselves before answering.

    On SQLite a transaction that reads and then writes must hold the write lock from its start (``db.engine.WRITE``:
    ``BEGIN IMMEDIATE``), else a writer that committed in between makes it fail at once; so state-changing requests
    start that way, while page views keep deferred transactions that never wait for the service's writers.
    """
    from db.engine import WRITE

    with ctx(request).sessions() as session:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            # Lazily: the write transaction begins at the handler's first statement, in the handler's thread. Begun
            # here (in the dependency's thread) it was held while the handler waited for a free worker thread - and
            # under load every worker thread was waiting for that lock: 50 logins at once ended in "database is
            # locked" (bench/load_test.py).
            session.bind = session.get_bind().execution_options(**WRITE)
        yield session


def flash(request: Request, message: str, kind: str = "info") -> None:
    """A one-line message shown on the next page (kept in the signed session cookie)."""
    request.session.setdefault("ap_flash", [])
    request.session["ap_flash"] = request.session["ap_flash"][-4:] + [[kind, message[:500]]]


def render(request: Request, template: str, user, status_code: int = 200, **values: Any):
    c = ctx(request)
    messages = request.session.pop("ap_flash", []) if "ap_flash" in request.session else []
    values.update(
        request=request,
        user=user,
        csrf_token=csrf_token(request),
        messages=messages,
        settings=c.settings,
        prefix=c.settings.prefix.rstrip("/"),
        basemaps=base_maps(c),
    )
    return c.templates.TemplateResponse(request, template, values, status_code=status_code)


def base_maps(c: DashboardContext) -> dict:
    """What the pages' maps may lay under the data: the offline basemap, the online tiles, and why a basemap failed."""
    prefix = c.settings.prefix.rstrip("/")
    s = c.settings
    return {
        "offline": c.basemap.config(prefix + "/basemap/{z}/{x}/{y}") if c.basemap is not None else None,
        "online": {"url": s.tile_url, "attribution": s.tile_attribution, "max_zoom": s.tile_max_zoom}
        if s.tile_url
        else None,
        "error": c.basemap_error,
    }
