"""Database benchmarks on a throw-away MariaDB server (and SQLite for comparison). Prints the numbers.

(a) import of real flight logs: the 2.4 MB DJI SRT (mavic_2pro_new.SRT) and the largest PX4 ULog (sample.ulg),
    parse and database insert timed separately;
(b) 1,000,000 per-frame speed rows written through ``DatabaseSink`` (20,000 frames x 50 tracks, 5,000-row
    batches, one transaction each), target <= 60 s on MariaDB;
(c) the dashboard's main queries (db/queries.py) on that database after adding 100,000 flights and 1,000,000
    violations: flights in a one-week range, the tracks of a run, violations in a lat/lon box (with and without
    a 30-day window), the speed rows of one track. Median and max of 20 runs each, target <= 100 ms; each
    also server-side only (COUNT over the same query): the database's work without the driver's row decoding.

  python bench/db_bench.py                      # MariaDB + SQLite, 1M rows
  python bench/db_bench.py --backends mariadb --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import func, insert, select

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared"))

from db import queries  # noqa: E402
from db.engine import dispose_engines, session_factory, session_scope  # noqa: E402
from db.importer import import_flight_log  # noqa: E402
from db.mariadb_server import MariaDBServer  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.models import Device, Flight, ProcessingRun, TrackRow, TrackSpeed, Violation, grid_cell  # noqa: E402
from db.queries import flights_in_range, speeds_of_track, tracks_of_run, violations_in_bbox  # noqa: E402
from db.sink import DatabaseSink  # noqa: E402
from tracking.types import FrameResult, RunInfo, TrackState  # noqa: E402
from vision.telemetry import load_flight_log  # noqa: E402
from vision.types import Frame  # noqa: E402

LOGS = [SHARED / "data/telemetry/dji_srt/mavic_2pro_new.SRT", SHARED / "data/telemetry/px4_ulog/sample.ulg"]
TRACKS_PER_FRAME = 50
TRACK_LIFE = 400  # frames
AREA = (46.40, 6.50, 47.40, 7.50)  # 1 x 1 degree


def bench_import(url: str) -> list[dict]:
    out = []
    for i, path in enumerate(LOGS):
        t0 = time.perf_counter()
        log = load_flight_log(path)
        t1 = time.perf_counter()
        with session_scope(url) as s:
            r = import_flight_log(s, path, device_serial=f"BENCH-{i}", create_device=True, progress=False, log=log)
        t2 = time.perf_counter()
        out.append(
            {
                "file": path.name,
                "bytes": path.stat().st_size,
                "samples": r.samples,
                "parse_s": round(t1 - t0, 3),
                "insert_s": round(t2 - t1, 3),
                "total_s": round(t2 - t0, 3),
            }
        )
    return out


def synthetic_frames(n_rows: int):
    """Frames with TRACKS_PER_FRAME vehicles each; every vehicle lives TRACK_LIFE frames."""
    n_frames = n_rows // TRACKS_PER_FRAME
    image = np.zeros((2, 2, 3), np.uint8)
    box = np.array([0.0, 0.0, 10.0, 10.0])
    rng = random.Random(0)
    for i in range(n_frames):
        tracks = []
        for k in range(TRACKS_PER_FRAME):
            # stagger births so about TRACKS_PER_FRAME tracks are alive at any time
            tid = (i + k * TRACK_LIFE // TRACKS_PER_FRAME) // TRACK_LIFE * TRACKS_PER_FRAME + k
            speed = 40 + 60 * rng.random()
            tracks.append(
                TrackState(tid, box, 0.9, k % 4, True, speed, 2.0, None, None, 46.9 + 1e-5 * i, 7.0 + 1e-5 * k)
            )
        yield FrameResult(Frame(i, i / 25.0, image), tracks)


def bench_speed_rows(url: str, n_rows: int) -> dict:
    sink = DatabaseSink(url)
    info = RunInfo(
        "/bench/video.mp4", 3840, 2160, 25.0, n_rows // TRACKS_PER_FRAME, {}, "bench.pt", "dual_layer", "cpu"
    )
    spent = 0.0
    t = time.perf_counter()
    sink.open(info)
    spent += time.perf_counter() - t
    for result in synthetic_frames(n_rows):
        t = time.perf_counter()
        sink.write(result)
        spent += time.perf_counter() - t
    t = time.perf_counter()
    sink.close({"timings": {}})
    spent += time.perf_counter() - t
    with session_scope(url) as s:
        rows = s.scalar(select(func.count(TrackSpeed.id))) or 0
        tracks = s.scalar(select(func.count(TrackRow.id)).where(TrackRow.run_id == sink.run_id))
    return {"rows": rows, "tracks": tracks, "seconds": round(spent, 2), "rows_per_s": round(rows / spent)}


def fill_for_queries(url: str, run_id: int, n_flights: int, n_violations: int) -> None:
    rng = random.Random(1)
    base = datetime(2023, 1, 1)
    with session_scope(url) as s:
        dev = Device(serial="BENCH-FLEET", model="bench")
        s.add(dev)
        s.flush()
        dev_id = dev.id
        track_ids = list(s.scalars(select(TrackRow.id).where(TrackRow.run_id == run_id)))
    batch = 20000
    for i in range(0, n_flights, batch):
        rows = []
        for _ in range(min(batch, n_flights - i)):
            start = base + timedelta(seconds=rng.uniform(0, 2 * 365 * 86400))
            rows.append(
                {
                    "device_id": dev_id,
                    "start_time": start,
                    "end_time": start + timedelta(minutes=25),
                    "status": "complete",
                    "sample_count": 0,
                    "created_at": base,
                }
            )
        with session_scope(url) as s:
            s.execute(insert(Flight), rows)
    for i in range(0, n_violations, batch):
        rows = []
        for _ in range(min(batch, n_violations - i)):
            lat, lon = rng.uniform(AREA[0], AREA[2]), rng.uniform(AREA[1], AREA[3])
            rows.append(
                {
                    "run_id": run_id,
                    "track_id": rng.choice(track_ids),
                    "speed_kmh": rng.uniform(60, 140),
                    "limit_kmh": 50.0,
                    "t_s": rng.uniform(0, 800),
                    "time_is_estimate": False,
                    "occurred_at": base + timedelta(seconds=rng.uniform(0, 365 * 86400)),
                    "lat": lat,
                    "lon": lon,
                    "cell": grid_cell(lat, lon),
                }
            )
        with session_scope(url) as s:
            s.execute(insert(Violation), rows)


def timed(fn, repeats: int = 20) -> tuple[float, float, int]:
    times, n = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        n = fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2), round(max(times), 2), n


def bench_queries(url: str, run_id: int) -> dict:
    """Each query twice: as the dashboard calls it (rows converted to Python) and server-side only
    (``SELECT COUNT(*) FROM (<same query>)``: the database's work without transferring the rows)."""
    maker = session_factory(url)
    week = (datetime(2023, 6, 5), datetime(2023, 6, 12))
    box = (46.90, 6.90, 46.95, 6.95)
    with maker() as s:
        track_id = s.scalar(select(TrackRow.id).where(TrackRow.run_id == run_id).order_by(TrackRow.id).limit(1))
    assert track_id is not None, f"run {run_id} has no tracks"
    cases = {
        "flights_in_one_week": (lambda s: flights_in_range(s, *week), queries.flights_in_range_stmt(*week)),
        "tracks_of_run": (lambda s: tracks_of_run(s, run_id), queries.tracks_of_run_stmt(run_id)),
        "violations_in_box": (lambda s: violations_in_bbox(s, *box), queries.violations_in_bbox_stmt(*box)),
        "violations_in_box_30_days": (
            lambda s: violations_in_bbox(s, *box, datetime(2023, 3, 1), datetime(2023, 3, 31)),
            queries.violations_in_bbox_stmt(*box, datetime(2023, 3, 1), datetime(2023, 3, 31)),
        ),
        "speeds_of_track": (lambda s: speeds_of_track(s, track_id), queries.speeds_of_track_stmt(track_id)),
    }
    out = {}
    for name, (call, stmt) in cases.items():

        def full(call=call):
            with maker() as s:
                return len(call(s))

        def server(stmt=stmt):
            with maker() as s:
                return s.scalar(select(func.count()).select_from(stmt.subquery()))

        med, worst, n = timed(full)
        db_med, db_worst, n_db = timed(server)
        assert n == n_db, (name, n, n_db)
        out[name] = {"rows": n, "median_ms": med, "max_ms": worst, "db_median_ms": db_med, "db_max_ms": db_worst}
    return out


def run_backend(name: str, url: str, rows: int, flights: int, violations: int) -> dict:
    print(f"[{name}] migrating", flush=True)
    upgrade(url)
    result: dict = {
        "backend": name,
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    if all(p.exists() for p in LOGS):
        result["import"] = bench_import(url)
        print(f"[{name}] import: {result['import']}", flush=True)
    else:
        print(f"[{name}] import skipped: {LOGS[0].parent.parent} not found", flush=True)
    result["speed_rows"] = bench_speed_rows(url, rows)
    print(f"[{name}] speed rows: {result['speed_rows']}", flush=True)
    with session_scope(url) as s:
        run_id = s.scalar(select(ProcessingRun.id).where(ProcessingRun.status == "complete"))
    assert run_id is not None, "the speed-row benchmark completes a run"
    t = time.perf_counter()
    fill_for_queries(url, run_id, flights, violations)
    result["fill_s"] = round(time.perf_counter() - t, 1)
    result["table_rows"] = {"flights": flights, "violations": violations, "track_speeds": result["speed_rows"]["rows"]}
    result["queries"] = bench_queries(url, run_id)
    print(f"[{name}] queries: {json.dumps(result['queries'])}", flush=True)
    dispose_engines()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="mariadb,sqlite")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--flights", type=int, default=100_000)
    ap.add_argument("--violations", type=int, default=1_000_000)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    results = []
    for backend in args.backends.split(","):
        if backend == "mariadb":
            with MariaDBServer(buffer_pool="256M", durable=True) as server:  # default durability: flush at commit
                results.append(
                    run_backend("mariadb", server.create_database("bench"), args.rows, args.flights, args.violations)
                )
        elif backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                results.append(
                    run_backend("sqlite", f"sqlite:///{tmp}/bench.db", args.rows, args.flights, args.violations)
                )
        else:
            raise SystemExit(f"unknown backend {backend!r}")
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
