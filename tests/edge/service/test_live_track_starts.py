"""A live stream's stored run reports each motion-only track from its first frame, as a recorded run does; the live
view reports it once it has lasted ``motion.min_motion_track_s`` (it cannot wait)."""

from __future__ import annotations

import time

from service_fakes import make_pipeline
from service_helpers import wait_for
from sqlalchemy import select

from db.models import TrackRow
from edge.service.context import ServiceContext
from edge.service.metrics import ServiceMetrics
from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps
from tests.tracking.test_pipeline_motion_frames import MOVERS, _frame, _ground
from tracking.config import PipelineConfig

FRAMES = 60


def test_the_stored_run_has_each_motion_only_track_from_its_first_frame(settings):
    live: dict[int, set[int]] = {}  # frame -> track ids the live view showed

    def recording_pipeline():
        # no calibration: the test service's scale would make 8x4 px blobs too small for cars; the stand-in
        # detector cannot see them either, so only the motion layer tracks them
        pipe = make_pipeline(PipelineConfig())
        step = pipe.step

        def step_and_record(frame):
            result = step(frame)
            live[frame.index] = {tr.track_id for tr in result.tracks}
            return result

        pipe.step = step_and_record
        return pipe

    ctx = ServiceContext(settings, lambda c: recording_pipeline())
    ground = _ground()
    try:
        worker = StreamWorker(
            StreamSpec(1, "starts", "push", None, None, None, None),
            WorkerDeps(settings.service, recording_pipeline, ctx.sessions, ServiceMetrics()),
        )
        worker.start()
        assert worker.attach_pusher(object())
        for i in range(FRAMES):
            worker.push_frame(_frame(ground, i), i / 25, None, time.perf_counter())
            wait_for(lambda: worker.frames_processed > i, 20, f"frame {i} to be processed")
        worker.stop()
        with ctx.sessions() as s:
            stored = {r.track_no: r for r in s.scalars(select(TrackRow).where(TrackRow.run_id == worker.run_id))}
    finally:
        ctx.close()
    first_live: dict[int, int] = {}  # track id -> first frame the live view showed it
    for i in sorted(live):
        for tid in live[i]:
            first_live.setdefault(tid, i)
    assert len(first_live) >= len(MOVERS) - 1 and set(first_live) <= set(stored)
    wait = round(PipelineConfig().motion.min_motion_track_s * 25)
    for tid, first in first_live.items():
        assert stored[tid].first_frame <= first - wait + 1, (tid, first)  # stored from the track's first frame
        assert stored[tid].last_frame == FRAMES - 1
