"""`airpatrol batch --ray`: a local Ray instance processes generated flights into a real MariaDB server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from db.engine import dispose_engines, session_scope
from db.migrate import upgrade
from db.models import Flight, ProcessingRun, TrackRow, Video
from edge.batch.cli import run_batch
from edge.batch.plan import discover, sha256_file
from tests.edge.batch.conftest import CLIP_FPS

# Ray start-up and worker imports: tens of seconds on a 2-core machine. Without Ray the `ray_local` fixture skips
# (fails in CI: AIRPATROL_REQUIRE_RAY=1).
pytestmark = pytest.mark.slow


def mot_ids(run_dir: Path) -> set[int]:
    """Track ids in the run folder's MOT file (every track of every frame)."""
    return {int(line.split(",")[1]) for line in (run_dir / "tracks_mot.txt").read_text().splitlines()}


@pytest.fixture
def mariadb_url(mariadb_server):  # the server fixture skips, with its reason, when mariadbd is not installed
    url = mariadb_server.create_database("batch_ray")
    upgrade(url)
    yield url
    dispose_engines()
    mariadb_server.drop_database("batch_ray")


def test_ray_tasks_store_every_flight_in_mariadb(ray_local, mariadb_url, clip_library, lean_config, tmp_path):
    out = tmp_path / "runs"
    results = run_batch(
        [clip_library],
        lean_config,
        out,
        database_url=mariadb_url,
        ray_address="local",
        aircraft="SYNTH-DRONE-1",
        progress=False,
    )
    assert [r.status for r in results] == ["done"] * 3, [(r.video, r.error) for r in results]
    videos = discover([clip_library])
    with session_scope(mariadb_url) as s:
        runs = {r.id: r for r in s.scalars(select(ProcessingRun))}
        assert sorted(runs) == sorted(r.run_id for r in results)
        for r, item in zip(results, videos):
            run = runs[r.run_id]
            assert run.status == "complete" and run.frames_done == 2 * CLIP_FPS
            video = s.get(Video, run.video_id)
            assert video.checksum == sha256_file(item.video) == r.sha256
            assert video.frame_count == 2 * CLIP_FPS and video.width == 640
            flight = s.get(Flight, run.flight_id)  # the .SRT beside the video, imported as its flight
            assert flight is not None and flight.source_file.endswith(f"{item.video.stem}.SRT")
            n_tracks = s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run.id))
            assert n_tracks == len(mot_ids(Path(r.out_dir)))  # database and run folder agree
            assert json.loads((Path(r.out_dir) / "batch.json").read_text())["run_id"] == run.id

    again = run_batch([clip_library], lean_config, out, database_url=mariadb_url, ray_address="local", progress=False)
    assert [(r.status, r.run_id) for r in again] == [("skipped", r.run_id) for r in results]


def test_ray_segments_a_long_flight_and_stitches_it(ray_local, mariadb_url, clip_library, lean_config, tmp_path):
    """Segments of 0.8 s (8 frames) with 0.5 s warm-up: three Ray tasks for one 20-frame flight, one run back."""
    flight = clip_library / "east.mp4"
    [r] = run_batch(
        [flight],
        lean_config,
        tmp_path / "runs",
        database_url=mariadb_url,
        ray_address="local",
        segment_s=0.8,
        overlap_s=0.5,
        progress=False,
    )
    assert r.status == "done" and r.note.startswith("3 segments"), r
    summary = json.loads((Path(r.out_dir) / "summary.json").read_text())
    assert summary["counts"]["frames"] == 2 * CLIP_FPS
    assert [(s["start"], s["end"]) for s in summary["segments"]] == [(0, 7), (7, 13), (13, 20)]
    frames = [int(line.split(",")[0]) for line in (Path(r.out_dir) / "tracks_mot.txt").read_text().splitlines()]
    assert frames == sorted(frames)  # one pass over the flight, frames in order
    with session_scope(mariadb_url) as s:
        run = s.get(ProcessingRun, r.run_id)
        assert run.status == "complete" and run.frames_done == 2 * CLIP_FPS
        n_tracks = s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run.id))
        assert n_tracks == len(mot_ids(Path(r.out_dir)))
