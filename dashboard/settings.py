"""Dashboard settings: ``AIRPATROL_DASHBOARD_*`` environment variables, or values passed by the service.

Secrets: the session-signing key comes from ``AIRPATROL_DASHBOARD_SECRET_KEY``; without it a random key is created
once and kept (mode 0600) in the data folder, so sessions survive a restart but no key is ever built into the code.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AIRPATROL_DASHBOARD_", extra="ignore")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default AIRPATROL_DATABASE_URL or the SQLite file"
    )
    data_dir: Path | None = Field(None, description="uploads and the generated secret key live here")
    prefix: str = Field("/dashboard", description="URL prefix of every dashboard page and API")
    secret_key: str | None = Field(None, description="key that signs session cookies (itsdangerous)")
    session_max_age_s: int = Field(8 * 3600, ge=60, description="idle time after which a session expires")
    session_absolute_s: int = Field(24 * 3600, ge=60, description="a session ends this long after login, active or not")
    https_only: bool = Field(False, description="mark the session cookie Secure (set behind HTTPS)")
    tile_url: str | None = Field(
        None,
        description="base-map tile URL template, e.g. https://tile.openstreetmap.org/{z}/{x}/{y}.png; "
        "none: data layers on a plain background (works offline)",
    )
    tile_attribution: str = "&copy; OpenStreetMap contributors"
    tile_max_zoom: int = Field(19, ge=1, le=24)
    basemap_file: Path | None = Field(
        None,
        description="offline base map: a raster PMTiles or MBTiles file of the region, served by the app "
        "(preferred over tile_url; both are offered in the map's layer switcher)",
    )
    max_upload_mb: int = Field(4096, ge=1, description="largest accepted upload (flight log or video)")
    live_stale_s: float = Field(60.0, gt=0, description="a drone seen within this many seconds counts as live")
    map_max_runs: int = Field(10, ge=1, le=200, description="most processed runs drawn on the map at once")


def resolve_data_dir(settings: DashboardSettings) -> Path:
    if settings.data_dir is not None:
        return Path(settings.data_dir)
    from db.engine import default_data_dir

    return default_data_dir()


def resolve_secret_key(settings: DashboardSettings) -> str:
    """The configured key, else one generated on first start and stored next to the data."""
    if settings.secret_key:
        return settings.secret_key
    path = resolve_data_dir(settings) / "dashboard_secret_key"
    if path.is_file():
        key = path.read_text(encoding="utf-8").strip()
        if len(key) >= 32:
            return key
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key)
    return key


def dashboard_settings_from(settings=None) -> DashboardSettings:
    """Accept DashboardSettings, the service's AirPatrolSettings (database_url, data_dir), a dict, or None."""
    if isinstance(settings, DashboardSettings):
        return settings
    if settings is None:
        return DashboardSettings()
    if isinstance(settings, dict):
        return DashboardSettings(**settings)
    own = DashboardSettings()
    updates = {}
    for name in ("database_url", "data_dir"):
        value = getattr(settings, name, None)
        if value is not None and getattr(own, name) is None:
            updates[name] = value
    service = getattr(settings, "service", None)  # the edge service's login settings, shared with its pages
    if service is not None:
        if getattr(service, "secret_key", None) and own.secret_key is None:
            updates["secret_key"] = service.secret_key
        if getattr(service, "session_ttl_s", None):
            updates["session_absolute_s"] = service.session_ttl_s
    nested = getattr(settings, "dashboard", None)  # a future `dashboard:` section of the service settings
    if nested is not None:
        updates.update(nested.model_dump(exclude_unset=True) if hasattr(nested, "model_dump") else dict(nested))
    return DashboardSettings(**{**own.model_dump(), **updates}) if updates else own
