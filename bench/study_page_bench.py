"""Time the dashboard's traffic study of a long junction flight from its stored trajectories.

    python3 bench/study_page_bench.py --seconds 300 --fps 25

A four-leg junction run (``tests/dashboard/study_helpers.py``: the 12 scripted routes repeated every 24 s, six parked
cars) is written by the pipeline's file sinks, imported into a fresh SQLite database, then the study page is asked
for through the app (``GET /dashboard/runs/{id}/study``: trajectories read from the database, the study computed,
the page rendered; a fresh process also loads ``tracking.study`` and SciPy then), a second time (the study is cached),
with 5 min bins (computed again), and its report and one CSV. One line per measurement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--fps", type=float, default=25.0)
    args = ap.parse_args()

    from fastapi.testclient import TestClient

    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from db.crud import create_user
    from db.engine import session_scope
    from db.migrate import upgrade
    from db.run_import import import_run_dir
    from tests.dashboard.dash_helpers import login
    from tests.dashboard.study_helpers import ROUTES, make_junction_run_dir

    routes = [(o, d, t + k * 24.0) for k in range(int(args.seconds // 24)) for o, d, t in ROUTES]
    routes = [r for r in routes if r[2] + 14.0 < args.seconds]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        run_dir = make_junction_run_dir(folder / "run", fps=args.fps, seconds=args.seconds, routes=routes)
        url = f"sqlite:///{folder / 'bench.db'}"
        upgrade(url)
        with session_scope(url) as s:
            create_user(s, "viewer", "viewer-pass-123", role="viewer")
        imported = import_run_dir(run_dir, url, orthophoto=False)
        rows = sum(1 for _ in open(run_dir / "tracks.csv")) - 1
        print(
            f"run: {args.seconds:g} s at {args.fps:g} fps, {imported.tracks} vehicles, {rows} position rows "
            f"(written and imported in {time.perf_counter() - t:.1f} s)"
        )
        app = create_app(DashboardSettings(database_url=url, data_dir=folder / "data", secret_key="b" * 40))
        with TestClient(app) as client:
            login(client, "viewer", "viewer-pass-123")
            for what, path in [
                ("study page, first view (read + compute + render)", "/study"),
                ("study page, again (cached study)", "/study"),
                ("study page, 5 min bins (computed again, modules loaded)", "/study?bin=5m"),
                ("printable report", "/study/report"),
                ("turning_movements.csv", "/study/turning_movements.csv"),
            ]:
                t = time.perf_counter()
                r = client.get(f"/dashboard/runs/{imported.run_id}{path}")
                print(
                    f"{what}: {time.perf_counter() - t:.2f} s (HTTP {r.status_code}, {len(r.content) / 1024:.0f} KiB)"
                )


if __name__ == "__main__":
    main()
