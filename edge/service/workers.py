"""One worker per live stream: bounded queue -> the same ``Pipeline`` as ``airpatrol process`` -> feed, preview, database.

A stream has one *run* (one ``processing_runs`` row) from its first frame until it is stopped or ends; a dropped and
reconnected pull stream (or a push client that reconnects) continues the same run: the pipeline is not reset, so
track ids go on. Only a change of resolution starts a new run (the tracker's pixel state would be meaningless).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from db.models import ProcessingRun, Video, utcnow
from db.retry import DatabaseUnavailable, short
from db.sink import DatabaseSink
from edge.service.config import ServiceConfig
from edge.service.ingest import FrameQueue, IncomingFrame, PullReader, SourceSpec
from edge.service.live import Broadcaster, LiveViolations, result_message
from edge.service.metrics import ServiceMetrics
from edge.service.pacing import FramePacer
from edge.sinks.loop import RunSinks
from tracking.pipeline import Pipeline
from tracking.track_starts import TrackStarts
from tracking.types import FrameResult, RunInfo
from vision.types import CameraPose, Frame
from vision.yolo_weights import detector_weights_label

log = logging.getLogger("airpatrol.service.stream")

MAX_CONSECUTIVE_ERRORS = 25  # a pipeline that fails this many frames in a row is broken, not unlucky
MAX_FRAME_GAP_S = 0.5  # longest time one processed frame may stand for when timing violations


def _without_pixels(result: FrameResult) -> FrameResult:
    """What the database keeps of a result, so the frames held back for it (``TrackStarts``) cost no image memory;
    its own track lists, so what is added to them later never changes the live view's result."""
    f = result.frame
    slim = Frame(f.index, f.t, np.zeros((0, 0, 3), np.uint8), f.pose)
    return dataclasses.replace(
        result, frame=slim, road_mask=None, tracks=list(result.tracks), withheld=list(result.withheld)
    )


class RunFenced(RuntimeError):
    """A live run's write refused: the run was ended by someone else (the service, after its process died)."""


class LiveDatabaseSink(DatabaseSink):
    """``DatabaseSink`` that also writes every ``flush_s`` seconds: a live run has no end to wait for, and the
    heartbeat it writes tells the database the run is alive even while no vehicle is in view.

    It never blocks the stream on the database: when the database is away the rows stay in memory and the write is
    tried again every ``flush_s``; only after ``retry_s`` without a database does it give up (the worker then
    drops the sink, the live view goes on)."""

    def __init__(self, *args, flush_s: float, **kwargs):
        super().__init__(*args, fence=self._still_running, **kwargs)
        self.flush_s = flush_s
        self._last_flush = time.monotonic()
        self._down_since: float | None = None

    def _still_running(self, s: Session, run_id: int | None = None) -> None:
        """The fence of every transaction that writes the run's results (as a batch job's lease, ``jobs.py``): the
        run must still be ``running``. The service marks the run of a stream process that died or stalled ``failed``
        before it starts the stream again (``stream_process.py``): should that process still commit (a write in
        flight when it was killed, a process that was stalled), the write either serialises before that UPDATE
        (row lock) or finds the run failed and is refused: rolled back, nothing is added to a run that ended."""
        run_id = run_id if run_id is not None else self.run_id  # given by DatabaseSink (or not, in older versions)
        if run_id is None:  # open(): this transaction creates the run
            return
        still = s.execute(
            update(ProcessingRun)
            .where(ProcessingRun.id == run_id, ProcessingRun.status == "running")
            .values(heartbeat_at=utcnow())
        )
        if still.rowcount != 1:  # type: ignore[attr-defined]  # an UPDATE's result is a CursorResult
            if s.scalar(select(ProcessingRun.status).where(ProcessingRun.id == run_id)) == "complete":
                return  # close() again after its commit's answer was lost: close() itself sees the run complete
            raise RunFenced(f"run {run_id} is no longer running (ended by the service): write refused")

    def write(self, result: FrameResult) -> None:
        super().write(result)  # a full batch calls write_batch below
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.write_batch(self.retry_s)

    def write_batch(self, retry_s: float) -> None:
        now = time.monotonic()
        if self._down_since is not None and now - self._last_flush < self.flush_s:
            return  # the database was away a moment ago: the rows wait for the next try
        self._last_flush = now
        try:
            super().write_batch(0)  # one try, never a wait in the frame loop
        except DatabaseUnavailable as exc:
            if self._down_since is None:
                self._down_since = now
            away = now - self._down_since
            if away > self.retry_s:
                raise
            log.warning(
                "run %s: database unreachable for %.0f s (%s); %d rows kept, next try in %.0f s, giving up "
                "after %.0f s",
                self.run_id,
                away,
                exc.__cause__ and short(exc.__cause__),
                len(self._rows),
                self.flush_s,
                self.retry_s,
            )
            return
        if self._down_since is not None:
            log.warning(
                "run %s: database reachable again after %.1f s; buffered rows written",
                self.run_id,
                time.monotonic() - self._down_since,
            )
            self._down_since = None


@dataclass(frozen=True)
class StreamSpec:
    id: int
    name: str
    kind: str  # pull | push | publish (an RTMP publisher, read back from the relay like a pull stream)
    source: SourceSpec | None  # pull and publish streams
    device_id: int | None
    speed_limit_kmh: float | None
    task_round_id: int | None
    calibration: str | None = None  # the stream's own calibration in words (edge.service.stream_calibration)


@dataclass
class WorkerDeps:
    config: ServiceConfig
    make_pipeline: Callable[[], Pipeline]
    sessions: sessionmaker | None  # None: results are not persisted
    metrics: ServiceMetrics
    on_ended: Callable[[int], None] | None = None  # the stream ended by itself (end of file, device said end, failed)
    # How a frame goes through its stream's pipeline. The seam for GPU multi-stream batching: a stepper shared by
    # all workers that gathers the frames arriving from their threads within a few milliseconds and runs them as
    # one ``edge.batch.batched.step_streams(pipelines, frames)`` call (one forward pass), returning each its result.
    step: Callable[[Pipeline, Frame], FrameResult] = lambda pipeline, frame: pipeline.step(frame)


def spec_status(spec: "StreamSpec") -> dict:
    """What a stream's status says of its definition (a worker in this process or in a stream process of its own)."""
    return {
        "id": spec.id,
        "name": spec.name,
        "kind": spec.kind,
        "source": spec.source.shown if spec.source else None,
        "device_id": spec.device_id,
        "speed_limit_kmh": spec.speed_limit_kmh,
        "calibration": spec.calibration,
    }


class StreamWorker:
    def __init__(self, spec: StreamSpec, deps: WorkerDeps):
        self.spec, self.deps, self.cfg = spec, deps, deps.config
        self.key = str(spec.id)
        deps.metrics.new_stream(self.key)
        self.queue = FrameQueue(self.cfg.queue_frames, self.cfg.queue_span_s)
        # faster than processing: every k-th frame, evenly, rather than whatever the full queue drops
        self.pacer = FramePacer() if self.cfg.live_pacing else None
        self.feed = Broadcaster()
        self.state = "starting"
        self.last_error: str | None = None
        self.db_error: str | None = None
        self.fps_in = 25.0
        self.run_id: int | None = None
        self.frames_received = self.frames_processed = self.frame_errors = self.reconnects = 0
        self.started_at = utcnow()
        self.latest: FrameResult | None = None
        self.latest_message: str | None = None
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._conn_offset: float | None = None
        self._last_t: float | None = None
        self._last_wall = 0.0
        self._conn_wall0 = self._conn_t0 = 0.0  # this connection's first frame: when it arrived, its run time
        self.gaps: list[dict] = []  # source outages inside this run: run time where it began, seconds
        self._input_done = threading.Event()
        self._done = threading.Event()
        self._stopped = False  # by stop() (shutdown, DELETE), not by the stream itself
        self._pusher: object | None = None
        self._pipeline: Pipeline | None = None
        self._sink: RunSinks | None = None  # the run's sinks (the database), fed like any run's (edge.sinks.loop)
        # the database gets each track from its first frame (held back until it is confirmed); the live view at once
        self._starts = TrackStarts(0)
        self._run_size: tuple[int, int] | None = None
        self._violations: LiveViolations | None = None
        self._prev_t: float | None = None
        self._processed_at: deque = deque(maxlen=50)
        self._preview_lock = threading.Lock()
        self._preview: tuple[int, bytes] | None = None
        self._recalibration: tuple[Callable[[], Pipeline], str | None] | None = None  # taken by the processing thread
        self._thread = threading.Thread(target=self._process_loop, name=f"stream-{spec.id}", daemon=True)
        self._reader: PullReader | None = None
        if spec.kind in ("pull", "publish"):
            assert spec.source is not None
            self._reader = self._make_reader()

    def _make_reader(self) -> PullReader:
        assert self.spec.source is not None  # pull and publish streams have one
        return PullReader(
            self.spec.source,
            self.submit,
            self._on_reader_event,
            open_timeout_s=self.cfg.open_timeout_s,
            read_timeout_s=self.cfg.read_timeout_s,
            backoff_initial_s=self.cfg.reconnect_initial_s,
            backoff_max_s=self.cfg.reconnect_max_s,
            name=f"pull-{self.spec.id}",
        )

    def restart_reader(self) -> None:
        """Read the source over a fresh connection now (a publisher started again: the old connection may still
        be waiting on the publisher that left). Counts, and the run, go on."""
        old = self._reader
        if old is None or self._input_done.is_set():
            return
        old.stop()  # it ends at its next packet or timeout; its late frames are harmless (same run, same clock)
        new = self._make_reader()
        new.connects, new._past = old.connects, {k: old._total(k) for k in old._past}
        self._reader = new
        new.start()

    # -- life cycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        if self._reader is not None:
            self.state = "connecting"
            self._reader.start()
        else:
            self.state = "waiting"  # for a push client

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful: no more input, process what is queued, complete the run."""
        self._stopped = True
        if self._reader is not None:
            self._reader.stop()
        self._input_done.set()
        self.queue.close()
        self._thread.join(timeout)
        if self._reader is not None:
            self._reader.join(min(timeout, self.cfg.read_timeout_s + 1))

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def recalibrate(self, make_pipeline: Callable[[], Pipeline], calibration: str | None) -> None:
        """A new scale: the processing thread completes the current run and goes on in a new one with a pipeline
        from ``make_pipeline`` (a run has one scale). The source - a pull connection, a push client, an RTMP or SRT
        publisher - is not touched: stopping and restarting the worker closed the publisher's connection."""
        self.spec = dataclasses.replace(self.spec, calibration=calibration)
        self._recalibration = (make_pipeline, calibration)

    def _apply_recalibration(self) -> None:
        pending, self._recalibration = self._recalibration, None
        if pending is None:
            return
        make_pipeline, calibration = pending
        if self._run_size is not None:
            log.info(
                "stream %s: new calibration (%s), starting a new run", self.spec.id, calibration or "the service's"
            )
            self._end_run(None)
            self._run_size = None  # the next frame starts the new run
            self.gaps = []  # the outages of the completed run are in its summary
        self._pipeline = make_pipeline()

    # -- ingest (reader thread or WebSocket handler) ---------------------------------------------------------
    def begin_connection(self) -> None:
        """A (re)connected source: its times restart; the next frame is placed after the last one on the run's axis."""
        with self._seq_lock:
            self._conn_offset = None

    def submit(self, frame: IncomingFrame) -> None:
        """Queue a frame whose ``t`` is relative to its connection's first frame (thread-safe)."""
        if self._input_done.is_set():
            return
        with self._seq_lock:
            frame.seq = self._seq
            self._seq += 1
            now = time.monotonic()
            if self._conn_offset is None:  # after a gap, the real time that passed: speeds stay right
                # A reader that fell behind a live source (socket buffers) got the last frames late: the source
                # went quiet earlier than the last frame arrived, by how far arrival had drifted behind the
                # stream's own clock over the connection.
                lag = 0.0
                if self._last_t is not None:
                    lag = max(0.0, (self._last_wall - self._conn_wall0) - (self._last_t - self._conn_t0))
                gap = max(1.0 / self.fps_in, now - self._last_wall + lag)
                self._conn_offset = 0.0 if self._last_t is None else self._last_t + gap - frame.t
                if self._last_t is not None:
                    self.gaps.append({"t": round(self._last_t, 3), "seconds": round(gap, 3)})
                self._conn_wall0, self._conn_t0 = now, frame.t + self._conn_offset
            t = frame.t + self._conn_offset
            if self._last_t is not None and t <= self._last_t:
                t = self._last_t + 1.0 / self.fps_in  # broken timestamps must not run the clock backwards
            frame.t, self._last_t, self._last_wall = t, t, now
            if frame.pose is not None:
                frame.pose = dataclasses.replace(frame.pose, t=t)
        self.frames_received += 1
        m = self.deps.metrics
        m.frames_received.labels(self.key).inc()
        if self.pacer is not None and not self.pacer.admit(time.monotonic(), frame.t):
            m.frames_dropped.labels(self.key).inc()  # shed: counted as dropped (and as shed in the stats)
            return
        if self.queue.put(frame):
            m.frames_dropped.labels(self.key).inc()

    def push_frame(
        self, pixels: np.ndarray | Callable[[], np.ndarray], t: float, pose: CameraPose | None, received: float
    ) -> None:
        self.submit(IncomingFrame(pixels, t, received, pose))

    def attach_pusher(self, who: object) -> bool:
        if self._pusher is not None or self._input_done.is_set():
            return False
        self._pusher = who
        self.begin_connection()
        self._set_state("live", "push client connected")
        return True

    @property
    def pusher(self) -> object | None:
        """The push client attached now (what ``attach_pusher`` was given), if any."""
        return self._pusher

    def replace_pusher(self, old: object, new: object) -> bool:
        """``new`` takes over from ``old`` if ``old`` is still the pusher and the input goes on: the same client back
        after a link drop the server has not noticed yet. The run goes on, its time axis too (a new connection)."""
        if self._pusher is not old or self._input_done.is_set():
            return False
        self._pusher = new
        self.begin_connection()
        self._set_state("live", "push client reconnected; its previous connection was replaced")
        return True

    def detach_pusher(self, who: object, ended: bool) -> None:
        if self._pusher is who:
            self._pusher = None
            if ended:
                self._input_done.set()
                self.queue.close()
            elif not self._input_done.is_set():
                self._set_state("waiting", "push client disconnected; the run continues when it reconnects")

    def set_fps(self, fps: float) -> None:
        self.fps_in = fps

    def _on_reader_event(self, event: str, detail: str) -> None:
        if event == "connected":
            assert self._reader is not None  # the events come from it
            self.fps_in = self._reader.fps
            self.begin_connection()
            if self._reader.connects > 1:
                self.reconnects += 1
                self.deps.metrics.reconnects.labels(self.key).inc()
            self._set_state("syncing", detail)
        elif event == "locked":
            self._set_state("live", detail)
        elif event == "corrupt":  # frames up to the next keyframe are skipped and counted (``lost``)
            self.last_error = f"corrupt data: {detail}"
            self._set_state("syncing", f"{detail}; skipping to the next keyframe", level=logging.WARNING)
        elif event == "dropped":
            self.last_error = detail
            self._set_state("reconnecting", detail, level=logging.WARNING)
        elif event == "ended":
            self._input_done.set()
            self.queue.close()

    def _set_state(self, state: str, detail: str = "", level: int = logging.INFO) -> None:
        if self.state in ("finished", "failed"):
            return
        self.state = state
        log.log(level, "stream %s %s: %s", self.spec.id, state, detail, extra={"stream": self.spec.id, "state": state})
        self.feed.publish(
            json.dumps(
                {"type": "status", "stream_id": self.spec.id, "state": state, "detail": detail, "run_id": self.run_id}
            )
        )

    # -- processing thread -----------------------------------------------------------------------------------
    def _process_loop(self) -> None:
        error: BaseException | None = None
        try:
            self._pipeline = self.deps.make_pipeline()  # model loading: here, never in a request handler
            consecutive = 0
            while True:
                if self._recalibration is not None:
                    self._apply_recalibration()
                item = self.queue.get(timeout=0.25)
                if item is None:
                    if self._input_done.is_set() and not len(self.queue):
                        break
                    continue
                started = time.monotonic()
                ok = self._process(item)
                if self.pacer is not None:
                    self.pacer.processed(time.monotonic() - started, len(self.queue), time.monotonic())
                if ok:
                    consecutive = 0
                else:
                    consecutive += 1
                    if consecutive >= MAX_CONSECUTIVE_ERRORS:
                        raise RuntimeError(f"pipeline failed on {consecutive} frames in a row: {self.last_error}")
        except Exception as exc:  # the stream fails; the service and the other streams go on
            error = exc
            self.last_error = str(exc)[:500]
            log.exception("stream %s failed", self.spec.id, extra={"stream": self.spec.id})
        finally:
            if self._reader is not None:
                self._reader.stop()
            self._end_run(error)
            self._pipeline = None  # release the models; the last result stays for the snapshot
            self._set_state("failed" if error else "finished", (self.last_error or "") if error else "run complete")
            self._done.set()
            if not self._stopped and self.deps.on_ended is not None:
                try:
                    self.deps.on_ended(self.spec.id)
                except Exception:
                    log.exception("stream %s: could not record its end", self.spec.id)

    def _process(self, item: IncomingFrame) -> bool:
        try:
            image = item.image()
        except Exception as exc:  # e.g. a JPEG whose header was fine but whose data is corrupt
            return self._frame_failed(item.seq, exc)
        h, w = image.shape[:2]
        if self._run_size != (w, h):
            if self._run_size is not None:
                log.warning(
                    "stream %s: resolution changed %s -> %s, starting a new run",
                    self.spec.id,
                    self._run_size,
                    (w, h),
                    extra={"stream": self.spec.id},
                )
                self._end_run(None)
            self._start_run(w, h)
        frame = Frame(index=item.seq, t=item.t, image=image, pose=item.pose)
        pipe = self._pipeline
        assert pipe is not None and self._violations is not None  # made before the first frame is taken
        if self.pacer is not None:  # its time thresholds (motion track confirmation, blob gate) at the kept rate
            pipe.fps = self.fps_in / self.pacer.keep_every
        before = dict(pipe.timings)
        try:
            result = self.deps.step(pipe, frame)
        except Exception as exc:
            return self._frame_failed(frame.index, exc)
        m = self.deps.metrics
        for stage, total in pipe.timings.items():
            m.stage_latency.labels(stage).observe(max(0.0, total - before.get(stage, 0.0)) / 1000.0)
        # The time this frame stands for: the real gap to the previous processed one (frames dropped in between
        # still happened), capped so a long outage does not count as time spent above the limit.
        frame_s = min(frame.t - self._prev_t, MAX_FRAME_GAP_S) if self._prev_t is not None else 1.0 / self.fps_in
        self._prev_t = frame.t
        violations = self._violations.update(result, frame_s)
        if self._sink is not None:
            try:
                for held in self._starts.push(_without_pixels(result)):
                    self._sink.write(held)
            except Exception as exc:  # the live view goes on without the database; the status says why
                self._drop_sink(exc)
        self.frames_processed += 1
        now = time.perf_counter()
        self._processed_at.append(now)
        latency = now - item.received
        self.latest = result
        self.latest_message = result_message(
            self.spec.id, self.run_id, result, latency * 1000, violations, self.stats()
        )
        self.feed.publish(self.latest_message)
        m.frames_processed.labels(self.key).inc()
        m.frame_latency.observe(latency)
        m.fps.labels(self.key).set(self.fps)
        return True

    def _frame_failed(self, index: int, exc: Exception) -> bool:
        self.frame_errors += 1
        self.last_error = f"frame {index}: {type(exc).__name__}: {exc}"[:500]
        self.deps.metrics.frame_errors.labels(self.key).inc()
        log.warning("stream %s: %s", self.spec.id, self.last_error, extra={"stream": self.spec.id})
        return False

    def _start_run(self, w: int, h: int) -> None:
        pipe = self._pipeline
        assert pipe is not None  # made before the first frame is taken
        pipe.reset(w, h, self.fps_in, None)
        self._starts = TrackStarts(pipe.report_lookback_frames())
        self._run_size = (w, h)
        self._violations = LiveViolations(self.spec.speed_limit_kmh, self.cfg.min_over_limit_s)
        self._prev_t = None
        self.run_id = None
        if self.deps.sessions is None:
            return
        source = self.spec.source.shown if self.spec.source else f"push:stream-{self.spec.id}"
        info = RunInfo(
            source=source,
            width=w,
            height=h,
            fps=self.fps_in,
            frame_count=None,
            config=pipe.config.model_dump(mode="json"),
            weights=detector_weights_label(pipe.detector),
            mode=pipe.mode,
            device=str(pipe.device),
        )
        try:
            with self.deps.sessions() as s, s.begin():
                # One video row per live run: runs of the same URL are different flights, and DatabaseSink
                # supersedes earlier complete runs of the same video.
                video = Video(
                    file_path=f"live:stream-{self.spec.id}:{utcnow().isoformat()}:{source}"[:1024],
                    width=w,
                    height=h,
                    fps=self.fps_in,
                )
                s.add(video)
                s.flush()
                video_id = video.id
            sink = LiveDatabaseSink(
                session_maker=self.deps.sessions,
                video_id=video_id,
                task_round_id=self.spec.task_round_id,
                speed_limit_kmh=self.spec.speed_limit_kmh,
                min_over_limit_s=self.cfg.min_over_limit_s,
                flush_s=self.cfg.db_flush_s,
                batch_rows=self.cfg.db_batch_rows,
                retry_s=self.cfg.db_retry_s,
            )
            self._sink = RunSinks(info, [], [sink]).open()
            self.run_id, self.db_error = sink.run_id, None
        except Exception as exc:
            self._drop_sink(exc)

    def _end_run(self, error: BaseException | None) -> None:
        sink, self._sink = self._sink, None
        if sink is None:
            return
        try:
            if error is None:
                for held in self._starts.flush():
                    sink.write(held)
                sink.finish(self.summary)
            else:
                sink.abort(error, quiet=False)
        except Exception as exc:
            self.db_error = f"{type(exc).__name__}: {exc}"[:500]
            log.exception("stream %s: could not finish run %s in the database", self.spec.id, self.run_id)

    def _drop_sink(self, exc: BaseException) -> None:
        self.db_error = f"{type(exc).__name__}: {exc}"[:500]
        log.error("stream %s: database writes stopped: %s", self.spec.id, self.db_error, extra={"stream": self.spec.id})
        sink, self._sink = self._sink, None
        if sink is not None:
            try:
                sink.abort(exc)
            except Exception:
                pass

    # -- views ---------------------------------------------------------------------------------------------
    @property
    def fps(self) -> float:
        ts = self._processed_at
        if len(ts) < 2 or time.perf_counter() - ts[-1] > 2.0:
            return 0.0
        return (len(ts) - 1) / max(ts[-1] - ts[0], 1e-6)

    def stats(self) -> dict:
        return {
            "received": self.frames_received,
            "processed": self.frames_processed,
            "dropped": self.queue.dropped + self.frames_shed,
            "shed": self.frames_shed,  # of those, not given to the pipeline by pacing (evenly: every keep_every-th kept)
            "thinned": self.queue.thinned,  # ... and dropped by the full queue to thin it evenly (ingest.FrameQueue)
            "keep_every": self.pacer.keep_every if self.pacer is not None else 1,
            "queue": len(self.queue),
            "fps": round(self.fps, 2),
            "errors": self.frame_errors,
            "reconnects": self.reconnects,
            "lost": self.frames_lost,
            "corruptions": self.corruptions,
        }

    @property
    def frames_shed(self) -> int:
        return self.pacer.shed if self.pacer is not None else 0

    @property
    def frames_lost(self) -> int:
        """Frames of a pull stream skipped because the data was damaged (up to the next keyframe)."""
        return self._reader.lost_frames if self._reader is not None else 0

    @property
    def corruptions(self) -> int:
        return self._reader.corruptions if self._reader is not None else 0

    def summary(self) -> dict:
        stats = self._pipeline.stats() if self._pipeline is not None else {}
        return {
            "source": self.spec.source.shown if self.spec.source else f"push:stream-{self.spec.id}",
            "mode": self._pipeline.mode if self._pipeline else None,
            "live": True,
            "stream_id": self.spec.id,
            "counts": {"frames": stats.get("frames"), "tracks": stats.get("tracks")},
            **self.stats(),
            "gaps": list(self.gaps),
            **self._gap_losses(),
            "timings": {"ms_per_frame_by_stage": stats.get("ms_per_frame_by_stage")},
        }

    def _gap_losses(self) -> dict:
        """Source outages are lost input, like a damaged stretch of a video: the run is ``incomplete`` and says
        when (run time) and for how long nothing arrived (database ``losses_json``, dashboard badge)."""
        losses = [
            {
                "input": "stream",
                "frames": None,
                "t_s": [g["t"], round(g["t"] + g["seconds"], 3)],
                "reason": f"source unreachable for {g['seconds']:.1f} s (reconnected)",
            }
            for g in self.gaps
        ]
        return {"status": "incomplete" if losses else "complete", "losses": losses}

    def status(self) -> dict:
        return {
            **spec_status(self.spec),
            "state": self.state,
            "run_id": self.run_id,
            "last_error": self.last_error,
            "db_error": self.db_error,
            "subscribers": len(self.feed),
            "started_at": self.started_at.isoformat() + "Z",
            "gaps": self.gaps[-20:],
            **self.stats(),
        }

    def preview_jpeg(self) -> bytes | None:
        """The latest frame with overlays as JPEG (encoded once per frame however many viewers ask)."""
        from edge.sinks.annotate import annotate

        result = self.latest
        if result is None:
            return None
        with self._preview_lock:
            if self._preview is not None and self._preview[0] == result.frame.index:
                return self._preview[1]
            img = annotate(result, speed_limit_kmh=self.spec.speed_limit_kmh)
            w = img.shape[1]
            if w > self.cfg.preview_max_width:
                s = self.cfg.preview_max_width / w
                img = cv2.resize(
                    img, (self.cfg.preview_max_width, int(round(img.shape[0] * s))), interpolation=cv2.INTER_AREA
                )
            ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, self.cfg.jpeg_quality])
            self._preview = (result.frame.index, buf.tobytes())
            return self._preview[1]
