"""Dashboard routes, one module per page group; :data:`router` includes them all (without the URL prefix)."""

from fastapi import APIRouter

from dashboard.routes import admin, approaches, counting, fieldwork, flights, live, login, maps, runs, study

# counting before runs: export.lines
MODULES = (login, maps, flights, live, counting, runs, study, approaches, fieldwork, admin)
router = APIRouter()
for _module in MODULES:
    router.include_router(_module.router)


def all_routes():
    """(path without prefix, methods) of every dashboard route (tests walk this to check access rules)."""
    for module in MODULES:
        for route in module.router.routes:
            yield route.path, set(route.methods or ())
