"""A live stream in a process of its own (``service.process_per_stream``, the default).

In one process every stream's Python work (decoding, the pipeline's tracker and ego-motion, JSON, database rows)
shares one interpreter lock: eight streams on a GPU machine got 3.6 fps each, and an 8-16 core edge box without a
GPU has the same ceiling. So each stream runs in a process of its own, forked from a clean fork server
(``_process_context``: no inherited threads, locks or CUDA state): the same
:class:`edge.service.workers.StreamWorker` as before - reader, decoder, drop-oldest queue, pipeline, live
violations, the database sink - with its models loaded once, in that process. The service
process keeps, per stream, a :class:`ProcessStreamWorker` with the face the routes and the context use (status,
feed, latest message, preview, push frames, stop, recalibrate) and a supervisor thread that:

* relays the process's feed messages, in the order it sent them (one pipe), to the WebSocket subscribers;
* forwards push frames and commands to it (a sender thread; frames wait in front of it only while the stream's
  queue bound, ``queue_frames``, counted over both sides, allows, the oldest is dropped beyond: a slow or dead stream
  process never blocks the event loop that receives the frames, nor adds a second queue's latency);
* restarts it with exponential back-off (``reconnect_initial_s`` .. ``reconnect_max_s``) when it dies (a crash, a
  kill) or stalls (no message, not even its heartbeat, for ``STALL_S``). The process's run cannot continue (its
  tracker state died with it): the service marks it ``failed`` with the reason and the new process starts a new run.
  The other streams are separate processes: they go on at their own rate whatever happens to this one.

Where the results are written: by the stream process itself, not sent back to the service process to write. The
database sink's guarantees (each track from its first frame, batches in frame order, one transaction per batch,
writes kept in memory and retried while the database is away) hold as they are because the same code runs, in one
thread, in the order of the frames; sending results back would put every stream's per-track bookkeeping on the
service process's one interpreter lock again, the bottleneck this module removes. What crosses the pipe to the
service process is the already-encoded JSON feed message (kilobytes). The writes are fenced like a batch job's
(``LiveDatabaseSink._still_running``): before the service starts a replacement it kills the old process, waits
for it to exit and marks its runs ``failed``; a commit of the old process still in flight either lands before that
UPDATE (row lock) or is refused, so nothing is added to a run that has ended.

Not in a process of its own: an SRT publisher's stream (its connection is accepted by the service's SRT listener and
handed over in memory), and every stream when the pipeline factory cannot be pickled (an app embedded with a
lambda as factory): those run as threads in the service process, as with ``process_per_stream: false``. On a GPU the
streams' detector calls no longer share batched forward passes across processes (``StreamBatcher`` works across
threads); ``process_per_stream: false`` keeps that.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from db.models import ProcessingRun, Video, utcnow
from db.retry import retry_db
from edge.service.config import ServiceConfig
from edge.service.live import Broadcaster
from edge.service.metrics import ServiceMetrics
from edge.service.workers import StreamSpec, spec_status
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline

log = logging.getLogger("airpatrol.service.stream")

HEARTBEAT_S = 0.5  # a stream process sends its status this often
STALL_S = 30.0  # a running stream process silent for this long (not even a heartbeat) is stalled: killed, restarted
STARTUP_S = 180.0  # the same for a process still starting (imports, model loading on a busy machine)
COUNTS = ("received", "processed", "dropped", "shed", "thinned", "errors", "reconnects", "lost", "corruptions")


def default_pipeline(config: PipelineConfig) -> Pipeline:
    """The service's pipeline factory unless ``service.pipeline_factory`` names another (a module-level function, so
    a stream process can be given it)."""
    return Pipeline(config)


@dataclass(frozen=True)
class StreamSetup:
    """Everything a stream process needs to build its worker (pickled into it)."""

    spec: StreamSpec
    config: ServiceConfig
    pipeline: PipelineConfig  # the service's, with the stream's own calibration where it has one
    factory: Callable[[PipelineConfig], Pipeline]
    database_url: str | None  # None: results are not persisted
    log_level: int = logging.INFO


# -- the stream process ----------------------------------------------------------------------------------------
class _Sender:
    """``conn.send`` from the stream process's threads (processing, reader, main), one message at a time."""

    def __init__(self, conn):
        self.conn, self.lock = conn, threading.Lock()

    def send(self, msg: tuple) -> None:
        with self.lock:
            try:
                self.conn.send(msg)
            except (OSError, ValueError):  # the service process is gone; the main loop notices and stops
                pass


class _PipeFeed:
    """Stands in for the worker's ``Broadcaster``: its messages go to the service process, which fans them out. A
    state change is followed at once by the worker's status, so the service never shows a new state with the
    counts from before it (a reconnect's ``live`` with the reconnect not yet counted)."""

    def __init__(self, sender: _Sender, status: Callable[[], tuple]):
        self.sender, self.status = sender, status

    def publish(self, item: str) -> None:
        self.sender.send(("feed", item))
        if item.startswith('{"type": "status"'):
            self.sender.send(("status", *self.status()))

    def __len__(self) -> int:
        return 0  # the subscribers are the service process's


class _Recorder:
    """Stands in for a latency histogram of the stream process's metrics: keeps the observations for its next
    heartbeat, and the service process puts them into its own histograms (``/metrics`` is served there)."""

    def __init__(self, buffer: list, stage: str | None = None):
        self.buffer, self.stage = buffer, stage

    def labels(self, stage: str) -> _Recorder:
        return _Recorder(self.buffer, stage)

    def observe(self, value: float) -> None:
        self.buffer.append((self.stage, value))


_PUSHER = object()  # the push client, as the stream process sees it (the service process holds the real one)


def stream_process_main(setup: StreamSetup, conn) -> None:
    """Entry point of a stream process: run the stream until it ends, the service says stop, or the service is
    gone (its end of the pipe closes: the run is completed and the process exits)."""
    from edge.service.sessions import service_sessions
    from edge.service.workers import StreamWorker, WorkerDeps

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the service decides
    term = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: term.set())  # e.g. systemd stopping the unit: complete the run
    logging.basicConfig(level=setup.log_level, format=f"%(asctime)s %(levelname)s stream-{setup.spec.id} %(message)s")
    sender = _Sender(conn)
    ended = threading.Event()

    def make_pipeline(config: PipelineConfig = setup.pipeline) -> Pipeline:
        return setup.factory(config)

    observed: list[tuple[str | None, float]] = []  # (stage or None: the frame, seconds) since the last heartbeat
    metrics = ServiceMetrics()
    metrics.frame_latency = _Recorder(observed)  # type: ignore[assignment]  # observe() is all the worker uses
    metrics.stage_latency = _Recorder(observed)  # type: ignore[assignment]  # labels(stage).observe() likewise
    deps = WorkerDeps(
        setup.config,
        make_pipeline,
        service_sessions(setup.database_url) if setup.database_url else None,
        metrics,
        on_ended=lambda _id: ended.set(),
    )

    status_lock = threading.Lock()
    pipe_frames = [0]  # push frames received from the service process

    def status() -> tuple:
        # the counts and the latencies of the same frames in one message (the processing thread appends meanwhile)
        with status_lock:
            st = worker.status()
            st["pipe_frames"] = pipe_frames[0]
            n = len(observed)
            obs = observed[:n]
            del observed[:n]
            return st, obs

    worker = StreamWorker(setup.spec, deps)
    worker.feed = _PipeFeed(sender, status)  # type: ignore[assignment]  # duck-typed: publish() and len() suffice
    queue_get = worker.queue.get

    def get_and_report(timeout: float):
        # the service process's queue depth exact at each frame taken (a client pacing itself on it, the metrics)
        item = queue_get(timeout)
        if item is not None:
            sender.send(("queue", pipe_frames[0], len(worker.queue)))
        return item

    worker.queue.get = get_and_report  # type: ignore[method-assign]  # the same queue, reporting
    worker.start()
    next_beat = 0.0
    while not worker.finished:
        if term.is_set():
            worker.stop()
            break
        try:
            if conn.poll(0.05):
                msg = conn.recv()
                _command(worker, sender, term, msg)
                if msg[0] == "frame":
                    pipe_frames[0] += 1
                    sender.send(("queue", pipe_frames[0], len(worker.queue)))
        except (EOFError, OSError):  # the service process is gone
            worker.stop()
            break
        if time.monotonic() >= next_beat:
            sender.send(("status", *status()))
            next_beat = time.monotonic() + HEARTBEAT_S
    sender.send(("exit", ended.is_set(), *status()))


def _command(worker, sender: _Sender, term: threading.Event, msg: tuple) -> None:
    kind = msg[0]
    if kind == "frame":
        worker.push_frame(*msg[1:])
    elif kind == "stop":
        term.set()
    elif kind == "attach":
        worker.attach_pusher(_PUSHER)
    elif kind == "replace":  # the service process has one pusher at a time: here it is always _PUSHER
        worker.replace_pusher(_PUSHER, _PUSHER)
    elif kind == "detach":
        worker.detach_pusher(_PUSHER, msg[1])
    elif kind == "fps":
        worker.set_fps(msg[1])
    elif kind == "recalibrate":
        setup_factory, config, described = msg[1], msg[2], msg[3]
        worker.recalibrate(lambda: setup_factory(config), described)
    elif kind == "restart_reader":
        worker.restart_reader()
    elif kind == "preview":
        latest = worker.latest
        jpeg = worker.preview_jpeg()
        sender.send(("preview", latest.frame.index if latest is not None else None, jpeg))


# -- the service process's side --------------------------------------------------------------------------------
class _Outbox:
    """Messages to a stream process, in order; push frames beyond ``max_frames`` are dropped oldest first (as the
    stream's own queue would), commands never. Frames wait here only while the pipe is full (the stream process
    reads them into its queue as they come) or while its process is (re)started."""

    def __init__(self, max_frames: int):
        self.max_frames = max_frames
        self._items: deque[tuple] = deque()
        self._cond = threading.Condition()
        self.dropped = 0
        self.sent_frames = 0  # frames taken out to be sent to the current stream process

    def put(self, msg: tuple, max_frames: int | None = None) -> bool:
        """Queue ``msg``; True when an older frame was dropped for it (more than ``max_frames`` waiting)."""
        limit = self.max_frames if max_frames is None else max_frames
        with self._cond:
            dropped = False
            if msg[0] == "frame" and sum(1 for m in self._items if m[0] == "frame") >= max(1, limit):
                oldest = next(m for m in self._items if m[0] == "frame")
                self._items.remove(oldest)
                self.dropped += 1
                dropped = True
            self._items.append(msg)
            self._cond.notify()
            return dropped

    @property
    def frames(self) -> int:
        """Push frames waiting (not yet sent to the stream process)."""
        with self._cond:
            return sum(1 for m in self._items if m[0] == "frame")

    def get(self, timeout: float) -> tuple | None:
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
            msg = self._items.popleft() if self._items else None
            if msg is not None and msg[0] == "frame":
                self.sent_frames += 1  # on its way to the stream process (counted before it leaves: no gap)
            return msg

    def clear(self) -> None:
        with self._cond:
            self._items.clear()


class _Depth:
    """``len(worker.queue)``: push frames not yet sent to the stream process, sent but not yet arrived, and its
    queue as it last reported (at each frame it took, and with its status)."""

    def __init__(self, owner: ProcessStreamWorker):
        self.owner = owner

    def __len__(self) -> int:
        outbox, (arrived, queued) = self.owner._outbox, self.owner._queue_report
        return outbox.frames + max(0, outbox.sent_frames - arrived) + queued


def fail_stream_runs(sessions: sessionmaker[Session], stream_id: int, reason: str, retry_s: float = 10.0) -> int:
    """Mark the stream's ``running`` runs failed (revokes their fence: ``LiveDatabaseSink._still_running``)."""
    live_videos = select(Video.id).where(Video.file_path.like(f"live:stream-{stream_id}:%"))

    def attempt() -> int:
        with sessions() as s, s.begin():
            done = s.execute(
                update(ProcessingRun)
                .where(ProcessingRun.status == "running", ProcessingRun.video_id.in_(live_videos))
                .values(status="failed", finished_at=utcnow(), error=reason[:10000])
            )
            return int(done.rowcount or 0)  # type: ignore[attr-defined]  # an UPDATE's result is a CursorResult

    return retry_db(attempt, f"ending the runs of stream {stream_id}", retry_s, log)


class ProcessStreamWorker:
    """The service process's handle of a stream that runs in its own process (same face as ``StreamWorker``)."""

    def __init__(
        self,
        setup: StreamSetup,
        sessions: sessionmaker[Session] | None,
        metrics: ServiceMetrics,
        on_ended: Callable[[int], None] | None = None,
    ):
        self.setup, self.spec, self.cfg = setup, setup.spec, setup.config
        self.sessions, self.metrics, self.on_ended = sessions, metrics, on_ended
        self.key = str(self.spec.id)
        metrics.new_stream(self.key)
        self.feed = Broadcaster()
        self.queue = _Depth(self)
        self.state = "starting"
        self.latest_message: str | None = None
        self.latest = None  # results stay in the stream process (the preview is made there)
        self.restarts = 0
        self.pid: int | None = None
        self.started_at = utcnow()
        self._status: dict[str, Any] = {}
        self._base = dict.fromkeys(COUNTS, 0)  # counts of the processes before this one
        self._seen = dict.fromkeys(COUNTS, 0)  # this process's counts already added to the metrics
        self._outbox = _Outbox(self.cfg.queue_frames)  # see push_frame: bounded with the stream process's queue
        self._queue_report = (0, 0)  # the stream process's (push frames it received, its queue length)
        self._pusher: object | None = None
        self._pushed = 0  # frames a push client sent
        self._push_ended = False
        self._fps: float | None = None
        self._conn: Any = None
        self._proc: Any = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._preview_lock = threading.Lock()
        self._preview_reply = threading.Event()
        self._preview: tuple[int | None, bytes | None] | None = None
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"stream-{self.spec.id}-supervisor", daemon=True
        )
        self._sender = threading.Thread(target=self._send_loop, name=f"stream-{self.spec.id}-sender", daemon=True)

    # -- life cycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.state = "waiting" if self.spec.kind == "push" else "connecting"
        self._supervisor.start()
        self._sender.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful: the stream process processes what is queued, completes its run and exits."""
        self._stop.set()
        self._outbox.put(("stop",))
        self._supervisor.join(timeout + 5)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def recalibrate_to(self, pipeline: PipelineConfig, calibration: str | None) -> None:
        """A new scale: the stream process completes its run and goes on in a new one (``StreamWorker.recalibrate``);
        a process started after this one gets it too."""
        self.spec = dataclasses.replace(self.spec, calibration=calibration)
        self.setup = dataclasses.replace(self.setup, spec=self.spec, pipeline=pipeline)
        self._outbox.put(("recalibrate", self.setup.factory, pipeline, calibration))

    def restart_reader(self) -> None:
        self._outbox.put(("restart_reader",))

    # -- push clients ----------------------------------------------------------------------------------------
    def attach_pusher(self, who: object) -> bool:
        if self._pusher is not None or self._push_ended or self.finished:
            return False
        self._pusher = who
        self._outbox.put(("attach",))
        return True

    @property
    def pusher(self) -> object | None:
        return self._pusher

    def replace_pusher(self, old: object, new: object) -> bool:
        """As ``StreamWorker.replace_pusher``; the stream process's worker is told in order with the frames."""
        if self._pusher is not old or self._push_ended or self.finished:
            return False
        self._pusher = new
        self._outbox.put(("replace",))
        return True

    def detach_pusher(self, who: object, ended: bool) -> None:
        if self._pusher is who:
            self._pusher = None
            self._push_ended = self._push_ended or ended
            self._outbox.put(("detach", ended))

    def set_fps(self, fps: float) -> None:
        self._fps = fps
        self._outbox.put(("fps", fps))

    def push_frame(self, pixels, t: float, pose, received: float) -> None:
        """A pushed frame to the stream process; ``pixels`` (an array, or a picklable callable such as
        ``partial(decode_jpeg, data)``: the JPEG is decoded there, only if the frame is not dropped)."""
        self._pushed += 1  # counted here, at once (the stream process reports its own counts every HEARTBEAT_S)
        self.metrics.frames_received.labels(self.key).inc()
        # the stream's queue bound holds over both queues: frames wait here while the stream process's queue and
        # the pipe hold fewer than ``queue_frames`` (a burst is kept), and the oldest goes beyond that
        ahead = len(self.queue) - self._outbox.frames  # sent and in the stream process's queue
        if self._outbox.put(("frame", pixels, t, pose, received), self.cfg.queue_frames - ahead):
            self._base["dropped"] += 1  # never reached the stream process
            self.metrics.frames_dropped.labels(self.key).inc()

    # -- supervision ---------------------------------------------------------------------------------------
    def _launch(self) -> None:
        ctx = _process_context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=stream_process_main,
            args=(self.setup, child),
            name=f"airpatrol-stream-{self.spec.id}",
            daemon=True,
        )
        proc.start()
        child.close()
        self._conn, self._proc, self.pid = parent, proc, proc.pid
        if self.state == "restarting":
            self.state = "starting"  # the new process reports its own state from its first message on
        self._seen = dict.fromkeys(COUNTS, 0)
        self._queue_report, self._outbox.sent_frames = (0, 0), 0
        if self._pusher is not None:  # a push client stayed connected through a restart
            self._outbox.put(("attach",))
        if self._fps is not None:
            self._outbox.put(("fps", self._fps))
        log.info("stream %s: process %s started", self.spec.id, proc.pid, extra={"stream": self.spec.id})

    def _supervise(self) -> None:
        backoff = self.cfg.reconnect_initial_s
        ended, final_state = False, "finished"
        try:
            while True:
                self._launch()
                began = time.monotonic()
                outcome, why = self._pump()
                if outcome == "exit":
                    ended = bool(why)
                    final_state = self._status.get("state", "finished")
                    if final_state not in ("finished", "failed"):
                        final_state = "finished"
                    break
                # died or stalled: its run cannot go on (the tracker's state died with it)
                self._fold_counts()
                self._outbox.clear()
                reason = f"the stream's process {why}; the stream was restarted in a new run"
                if self.sessions is not None:
                    try:
                        fail_stream_runs(self.sessions, self.spec.id, reason)
                    except Exception:
                        log.exception("stream %s: could not mark its runs failed", self.spec.id)
                if self._stop.is_set():
                    final_state = "finished"
                    break
                if time.monotonic() - began > 2 * self.cfg.reconnect_max_s:  # it ran well for a while
                    backoff = self.cfg.reconnect_initial_s
                self.restarts += 1
                self._publish_state("restarting", f"{reason}; next start in {backoff:.1f} s", logging.ERROR)
                if self._stop.wait(backoff):
                    break
                backoff = min(backoff * 2, self.cfg.reconnect_max_s)
        except Exception:
            log.exception("stream %s: supervisor failed", self.spec.id)
            final_state = "failed"
        finally:
            # as a StreamWorker: its end is recorded before it shows as finished
            if ended and not self._stop.is_set() and self.on_ended is not None:
                try:
                    self.on_ended(self.spec.id)
                except Exception:
                    log.exception("stream %s: could not record its end", self.spec.id)
            if self._proc is not None:
                self._proc.join(10)  # it has sent its last message and is exiting
                if self._proc.is_alive():
                    self._proc.kill()
                    self._proc.join(5)
            self.state = final_state
            self._done.set()
            self._preview_reply.set()

    def _pump(self) -> tuple[str, object]:
        """Relay the stream process's messages until it exits: ("exit", ended by itself) or ("died", how)."""
        conn, proc = self._conn, self._proc
        last, heard = time.monotonic(), False
        stop_sent_at: float | None = None
        while True:
            try:
                ready = conn.poll(0.25)
                msg = conn.recv() if ready else None
            except (EOFError, OSError):
                proc.join(10)
                return "died", _exit_text(proc.exitcode)
            now = time.monotonic()
            if msg is not None:
                last, heard = now, True
                if msg[0] == "exit":
                    self._take_status(msg[2], msg[3])
                    return "exit", msg[1]
                self._handle(msg)
                continue
            if not proc.is_alive():
                return "died", _exit_text(proc.exitcode)
            if self._stop.is_set():
                stop_sent_at = stop_sent_at or now
                if now - stop_sent_at > self.cfg.read_timeout_s + 15:  # it does not stop: end it
                    proc.kill()
                    proc.join(5)
                    return "died", "did not stop in time and was killed"
            elif now - last > (STALL_S if heard else STARTUP_S):
                log.error("stream %s: process %s silent for %.0f s: killing it", self.spec.id, proc.pid, now - last)
                proc.kill()
                proc.join(5)
                return "died", f"stalled (silent for {now - last:.0f} s) and was killed"

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "feed":
            text = msg[1]
            if text.startswith('{"type": "result"'):
                self.latest_message = text
            self.feed.publish(text)  # a state change: the status that follows it brings the state
        elif kind == "status":
            self._take_status(msg[1], msg[2])
        elif kind == "queue":
            self._queue_report = (msg[1], msg[2])
        elif kind == "preview":
            self._preview = (msg[1], msg[2])
            self._preview_reply.set()

    def _take_status(self, status: dict, observed: list[tuple[str | None, float]]) -> None:
        m = self.metrics
        for stage, seconds in observed:
            (m.frame_latency if stage is None else m.stage_latency.labels(stage)).observe(seconds)
        self._status = status
        self._queue_report = (int(status.get("pipe_frames", 0)), int(status.get("queue", 0)))
        self._set_live_state(status.get("state"))
        for name, counter in (
            ("received", m.frames_received),
            ("processed", m.frames_processed),
            ("dropped", m.frames_dropped),
            ("errors", m.frame_errors),
            ("reconnects", m.reconnects),
        ):
            delta = int(status.get(name, 0)) - self._seen[name]
            if name == "received" and self.spec.kind == "push":
                continue  # counted by push_frame
            if delta > 0:
                counter.labels(self.key).inc(delta)
                self._seen[name] += delta
        m.fps.labels(self.key).set(float(status.get("fps", 0.0)))

    def _set_live_state(self, state: str | None) -> None:
        """The stream process's state, except its end: the stream is finished when this side has seen it end."""
        if state and state not in ("finished", "failed") and self.state != "restarting":
            self.state = state

    def _fold_counts(self) -> None:
        for name in COUNTS:
            self._base[name] += int(self._status.get(name, 0))
        self._status = {"last_error": self._status.get("last_error")}  # the next process starts from nothing

    def _publish_state(self, state: str, detail: str, level: int) -> None:
        self.state = state
        log.log(level, "stream %s %s: %s", self.spec.id, state, detail, extra={"stream": self.spec.id, "state": state})
        self.feed.publish(
            json.dumps({"type": "status", "stream_id": self.spec.id, "state": state, "detail": detail, "run_id": None})
        )

    def _send_loop(self) -> None:
        while not self._done.is_set():
            conn = self._conn
            if conn is None:  # the first process is being started: its messages wait for it
                time.sleep(0.05)
                continue
            msg = self._outbox.get(0.25)
            if msg is None:
                continue
            try:
                conn.send(msg)
            except (OSError, ValueError):  # the process died: the supervisor restarts it
                pass

    # -- views ---------------------------------------------------------------------------------------------
    def _count(self, name: str) -> int:
        if name == "received" and self.spec.kind == "push":
            return self._pushed
        return self._base[name] + int(self._status.get(name, 0))

    @property
    def run_id(self) -> int | None:
        return self._status.get("run_id")

    @property
    def frames_processed(self) -> int:
        return self._count("processed")

    @property
    def frames_received(self) -> int:
        return self._count("received")

    @property
    def frames_lost(self) -> int:
        return self._count("lost")

    @property
    def corruptions(self) -> int:
        return self._count("corruptions")

    @property
    def last_error(self) -> str | None:
        return self._status.get("last_error")

    @property
    def db_error(self) -> str | None:
        return self._status.get("db_error")

    @property
    def fps(self) -> float:
        return float(self._status.get("fps", 0.0)) if not self.finished else 0.0

    def stats(self) -> dict:
        out: dict[str, float] = {name: self._count(name) for name in COUNTS}
        out.update(queue=len(self.queue), fps=round(self.fps, 2), keep_every=self._status.get("keep_every", 1))
        return {k: out[k] for k in (*COUNTS[:5], "keep_every", "queue", "fps", *COUNTS[5:])}  # StreamWorker's order

    def status(self) -> dict:
        return {
            **spec_status(self.spec),
            "state": self.state,
            "run_id": self.run_id,
            "last_error": self.last_error,
            "db_error": self.db_error,
            "subscribers": len(self.feed),
            "started_at": self.started_at.isoformat() + "Z",
            "gaps": self._status.get("gaps", []),
            **self.stats(),
            "process": {"pid": self.pid, "restarts": self.restarts},
        }

    def preview_jpeg(self) -> bytes | None:
        """The latest annotated frame as JPEG, made by the stream process (it holds the frame)."""
        with self._preview_lock:
            if self.finished or self._conn is None:
                return self._preview[1] if self._preview else None
            self._preview_reply.clear()
            self._outbox.put(("preview",))
            self._preview_reply.wait(5.0)
            return self._preview[1] if self._preview else None


def _process_context():
    """``forkserver`` where there is one (Linux, macOS): a clean server process - no threads, locks or CUDA state
    of the service - that has imported the pipeline's modules (torch, OpenCV, Ultralytics: seconds) once; each stream
    process is forked from it, so a start or a restart costs the model loading only. Elsewhere ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["edge.service.stream_process"])  # before the server starts (the first stream)
    return ctx


def _ready() -> None:
    pass


def warm_up() -> None:
    """Start the fork server and let it import the pipeline's modules now (the service's start), so the first
    stream's process starts in a fraction of a second instead of after the imports (seconds on a busy machine)."""
    proc = _process_context().Process(target=_ready, name="airpatrol-stream-warm-up", daemon=True)
    proc.start()
    proc.join(300)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def picklable(obj: object) -> bool:
    import pickle

    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False
