"""Backup / restore timings (`airpatrol db backup` / `restore`) on SQLite and a throw-away MariaDB. Prints the numbers.

Each database gets N per-frame speed rows through ``DatabaseSink`` (bench/db_bench.py's synthetic run), then is
backed up, emptied of its speed rows, restored, and the row count checked against the original.

    python bench/backup_bench.py                     # 200,000 rows, both back ends
    python bench/backup_bench.py --rows 1000000 --backends mariadb
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from db_bench import bench_speed_rows  # noqa: E402
from sqlalchemy import delete, func, select  # noqa: E402

from db.backup import backup, restore  # noqa: E402
from db.engine import dispose_engines, session_scope  # noqa: E402
from db.mariadb_server import MariaDBServer  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.models import TrackSpeed  # noqa: E402


def count(url: str) -> int:
    with session_scope(url) as s:
        return s.scalar(select(func.count(TrackSpeed.id))) or 0


def run(name: str, url: str, rows: int, folder: Path, suffix: str) -> None:
    upgrade(url)
    bench_speed_rows(url, rows)
    before = count(url)
    file = folder / f"{name}{suffix}"
    t0 = time.perf_counter()
    backup(url, file)
    t_backup = time.perf_counter() - t0
    with session_scope(url) as s:
        s.execute(delete(TrackSpeed))
    dispose_engines()
    t0 = time.perf_counter()
    restore(url, file)
    t_restore = time.perf_counter() - t0
    dispose_engines()
    after = count(url)
    print(
        f"{name:8s} rows={before:,} backup={t_backup:.2f} s ({file.stat().st_size / 1e6:.1f} MB{', gzip' if suffix.endswith('.gz') else ''})"
        f" restore={t_restore:.2f} s rows_after_restore={after:,} {'OK' if after == before else 'MISMATCH'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--backends", nargs="+", default=["sqlite", "mariadb"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "sqlite" in args.backends:
            run("sqlite", f"sqlite:///{folder / 'bench.db'}", args.rows, folder, ".bak")
        if "mariadb" in args.backends:
            server = MariaDBServer(durable=True).start()
            try:
                url = server.create_database("backup_bench")
                run("mariadb", url, args.rows, folder, ".sql.gz")
                dispose_engines()
            finally:
                server.stop()


if __name__ == "__main__":
    main()
