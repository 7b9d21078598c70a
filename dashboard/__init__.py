"""Web dashboard: map, flights, live streams, runs, tasks, devices, users (server-rendered, no Node build).

The names below are imported lazily, so `airpatrol` commands that only need :func:`cli_user_add` do not load the
web stack. Importing a processed run folder into the database is :func:`db.run_import.import_run_dir`.
"""

from __future__ import annotations

_EXPORTS = {
    "mount_dashboard": "dashboard.app",
    "create_app": "dashboard.app",
    "DashboardSettings": "dashboard.settings",
    "ensure_demo_user": "dashboard.users",
    "DEMO_USERNAME": "dashboard.users",
    "DEMO_PASSWORD": "dashboard.users",
    "cli_user_add": "dashboard.cli",
}


def __getattr__(name: str):
    if name == "router":
        from dashboard.routes import router

        return router
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dashboard' has no attribute {name!r}")


__all__ = [*_EXPORTS, "router"]
