"""A process per live stream (``service.process_per_stream``): two ffmpeg-fed pull streams run in processes of their
own; one stream's process is killed and the service restarts it in a new run (the killed run failed, with the
reason) while the other stream goes on processing in its own run; a live run's writes are fenced."""

from __future__ import annotations

import os
import shutil
import signal
import time

import numpy as np
import pytest
from service_helpers import free_port, running_app, wait_for
from sqlalchemy import func, select
from test_live_stream import serve_clip

from db.models import ProcessingRun, TrackRow, Video
from edge.service.stream_process import ProcessStreamWorker, fail_stream_runs
from edge.service.workers import LiveDatabaseSink, RunFenced
from tracking.types import RunInfo

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg not installed (Debian: apt-get install ffmpeg)"
)


@needs_ffmpeg
def test_a_killed_stream_process_is_restarted_and_the_other_stream_keeps_going(settings, clip):
    ports = [free_port(), free_port()]
    sources = [serve_clip(clip, p) for p in ports]
    try:
        with running_app(settings) as client:
            op, viewer = client.creds["operator"], client.creds["viewer"]
            ids = []
            for i, port in enumerate(ports):
                r = client.post(
                    "/api/streams", headers=op, json={"kind": "pull", "url": f"tcp://127.0.0.1:{port}", "name": f"c{i}"}
                )
                assert r.status_code == 201, r.text
                ids.append(r.json()["id"])
            victim, other = ids

            def status(sid):
                return client.get(f"/api/streams/{sid}", headers=viewer).json()

            for sid in ids:
                wait_for(lambda: status(sid)["processed"] >= 5 and status(sid)["run_id"], 60, f"stream {sid} live")
            assert isinstance(client.app.state.ctx.stream(victim), ProcessStreamWorker)
            first, second = status(victim), status(other)
            pids = {first["process"]["pid"], second["process"]["pid"], os.getpid()}
            assert len(pids) == 3, "each stream in a process of its own"

            def rate(since: tuple[float, int]) -> float:  # the other stream's frames per second since then
                return (status(other)["processed"] - since[1]) / (time.monotonic() - since[0])

            mark = (time.monotonic(), status(other)["processed"])
            time.sleep(3.0)
            rate_before, mark = rate(mark), (time.monotonic(), status(other)["processed"])

            os.kill(first["process"]["pid"], signal.SIGKILL)
            at_kill = status(victim)["processed"]
            sources[0].wait(10)  # ffmpeg serves one client: it ends with its reader; the camera is there again
            sources[0] = serve_clip(clip, ports[0])
            samples = []  # the other stream's processed count while the killed one is restarted

            def restarted():
                samples.append((time.monotonic(), status(other)["processed"]))
                s = status(victim)
                restarted = s["process"]["restarts"] == 1 and s["run_id"] not in (None, first["run_id"])
                return restarted and s["processed"] > at_kill and s

            back = wait_for(restarted, 60, "the killed stream to be restarted in a new run and to process")
            assert back["process"]["pid"] not in pids
            while time.monotonic() < mark[0] + 3.0:
                samples.append((time.monotonic(), status(other)["processed"]))
                time.sleep(0.1)
            rate_during, other_after = rate(mark), status(other)
            # the other stream went on, in the same process and run, without a pause (its status is updated every
            # 0.5 s) and at a rate that only the CPU the restarted stream now takes from it lowers (2 cores here)
            assert other_after["process"] == second["process"] and other_after["run_id"] == second["run_id"]
            changes = [t for (t, n), (_, m) in zip(samples, samples[1:]) if m > n]
            assert max(b - a for a, b in zip([mark[0], *changes], [*changes, samples[-1][0]])) < 1.5, samples
            assert rate_during >= 0.25 * rate_before > 0, (rate_before, rate_during)
            ctx = client.app.state.ctx
            with ctx.sessions() as s:
                dead = s.get(ProcessingRun, first["run_id"])
                assert dead.status == "failed" and "SIGKILL" in dead.error and "restarted" in dead.error
                assert s.get(ProcessingRun, second["run_id"]).status == "running"
            for sid in ids:
                assert client.delete(f"/api/streams/{sid}", headers=op).json()["state"] == "finished"
            with ctx.sessions() as s:
                for run_id in (back["run_id"], second["run_id"]):
                    run = s.get(ProcessingRun, run_id)
                    assert run.status == "complete" and run.frames_done >= 1
                    assert s.scalar(select(func.count()).select_from(TrackRow).where(TrackRow.run_id == run_id)) >= 1
    finally:
        for p in sources:
            p.kill()
            p.wait()


def test_a_live_run_ended_by_the_service_refuses_further_writes(settings):
    """The fence: once the service has marked a stream's run failed (its process died), a write of that process
    still in flight is rolled back, not added to the ended run."""
    from service_fakes import render

    from edge.service.context import ServiceContext
    from tracking.types import FrameResult, TrackState
    from vision.types import Frame

    ctx = ServiceContext(settings)
    try:
        with ctx.sessions() as s, s.begin():
            video = Video(file_path="live:stream-7:2026-01-01T00:00:00:test", width=320, height=240, fps=25.0)
            s.add(video)
            s.flush()
            video_id = video.id
        sink = LiveDatabaseSink(session_maker=ctx.sessions, video_id=video_id, flush_s=3600.0, retry_s=0.0)
        sink.open(RunInfo("test", 320, 240, 25.0, None, config={}, weights="test", mode="dual_layer", device="cpu"))

        def write(i: int) -> None:
            box = TrackState(1, np.array([0, 0, 9, 9], np.float32), 0.9, 0, speed_kmh=30.0)
            sink.write(FrameResult(Frame(i, i / 25, render(i)), [box]))

        write(0)
        sink.write_batch(0)
        assert fail_stream_runs(ctx.sessions, 7, "the stream's process was killed") == 1
        assert fail_stream_runs(ctx.sessions, 77, "another stream") == 0  # stream 7's runs only
        write(1)
        with pytest.raises(RunFenced):
            sink.write_batch(0)
        with ctx.sessions() as s:
            run = s.get(ProcessingRun, sink.run_id)
            assert run.status == "failed" and run.frames_done == 1  # the refused batch added nothing
    finally:
        ctx.close()


@needs_ffmpeg
def test_a_stalled_stream_process_is_killed_and_restarted(settings, clip, monkeypatch):
    """A stream process that stops answering (here: SIGSTOP, as a process stuck with the interpreter lock held) is
    killed once it has been silent for ``STALL_S`` and started again; its run is failed with the reason."""
    from edge.service import stream_process

    monkeypatch.setattr(stream_process, "STALL_S", 2.0)
    port = free_port()
    source = serve_clip(clip, port)
    try:
        with running_app(settings) as client:
            op, viewer = client.creds["operator"], client.creds["viewer"]
            r = client.post("/api/streams", headers=op, json={"kind": "pull", "url": f"tcp://127.0.0.1:{port}"})
            sid = r.json()["id"]

            def status():
                return client.get(f"/api/streams/{sid}", headers=viewer).json()

            first = wait_for(lambda: (s := status())["processed"] >= 5 and s["run_id"] and s, 60, "the stream live")
            os.kill(first["process"]["pid"], signal.SIGSTOP)
            source.kill()  # ffmpeg serves one client, the stuck one: the camera as the restarted stream finds it
            source.wait()
            source = serve_clip(clip, port)
            back = wait_for(
                lambda: (
                    (s := status())["process"]["restarts"] == 1 and s["run_id"] not in (None, first["run_id"]) and s
                ),
                60,
                "the stalled stream to be restarted in a new run",
            )
            assert back["process"]["pid"] != first["process"]["pid"]
            with pytest.raises(ProcessLookupError):  # killed, not left stopped
                os.kill(first["process"]["pid"], 0)
            with client.app.state.ctx.sessions() as s:
                dead = s.get(ProcessingRun, first["run_id"])
                assert dead.status == "failed" and "stalled" in dead.error
    finally:
        source.kill()
        source.wait()
