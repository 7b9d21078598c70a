"""Everything one service instance holds: database, auth signer, metrics, live streams, uploads, job workers.

Built by :func:`edge.service.app.create_app` (database checks happen there, so a bad URL fails before the server
listens); threads start in the app's lifespan and stop at shutdown.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from db.engine import default_data_dir, session_factory
from db.models import User, utcnow
from db.throttle import LoginThrottle
from edge.config import AirPatrolSettings
from edge.service import stream_calibration
from edge.service.auth import Principal, SessionSigner
from edge.service.ingest import SourceSpec, StreamSourceError, check_source
from edge.service.jobs import JobDeps, JobQueue, JobWorker
from edge.service.metrics import ServiceMetrics
from edge.service.models import StreamRow
from edge.service.sessions import service_sessions  # moved there (stream processes use it); re-exported
from edge.service.stream_process import ProcessStreamWorker, StreamSetup, default_pipeline, picklable
from edge.service.uploads import UploadStore
from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline

if TYPE_CHECKING:  # for the annotations; the publish servers load only when their port is configured
    import ctypes

    from edge.batch.batched import StreamBatcher
    from edge.service.rtmp import RtmpRelay
    from edge.service.srt_publish import SrtPublishServer

log = logging.getLogger("airpatrol.service")

PipelineFactory = Callable[[PipelineConfig], Pipeline]
PLAYER_WAIT_S = 5.0  # longest a publisher waits for the service's reader to subscribe
MAX_FINISHED_STREAMS = 50  # finished streams kept in memory (status, last snapshot) before the oldest are forgotten


class ServiceSetupError(ValueError):
    pass


def load_factory(spec: str) -> PipelineFactory:
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ServiceSetupError(f"service.pipeline_factory {spec!r}: cannot import ({exc})") from None
    if not callable(fn):
        raise ServiceSetupError(f"service.pipeline_factory {spec!r}: not callable")
    return fn


def _secret(data_dir: Path, configured: str | None) -> str:
    if configured:
        return configured
    path = data_dir / "service_secret.key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


class ServiceContext:
    def __init__(self, settings: AirPatrolSettings, pipeline_factory: PipelineFactory | None = None):
        self.settings = settings
        self.config = cfg = settings.service
        self.data_dir = Path(settings.data_dir) if settings.data_dir else default_data_dir()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.database_url = (
            settings.database_url
            or os.environ.get("AIRPATROL_DATABASE_URL")
            or f"sqlite:///{self.data_dir / 'airpatrol.db'}"
        )
        if pipeline_factory is None and cfg.pipeline_factory:
            pipeline_factory = load_factory(cfg.pipeline_factory)
        self.pipeline_factory: PipelineFactory = pipeline_factory or default_pipeline
        # A stream process is given the factory pickled (by reference: a module-level function); one that cannot be
        # (a lambda, a closure) keeps the streams in this process.
        self.process_streams = cfg.process_per_stream and picklable(self.pipeline_factory)
        if cfg.process_per_stream and not self.process_streams:
            log.warning("service.process_per_stream: the pipeline factory cannot be pickled; streams run as threads")
        self._prepare_database()
        self.sessions = service_sessions(self.database_url)
        self.signer = SessionSigner(_secret(self.data_dir, cfg.secret_key), cfg.session_ttl_s)
        self.throttle = LoginThrottle(session_factory(self.database_url))  # failed logins, shared via the database
        self.metrics = ServiceMetrics()
        self.uploads = UploadStore(self.data_dir / "uploads", cfg, self.metrics)
        self.jobs = JobQueue(self.sessions, cfg.job_lease_s, cfg.job_max_attempts, cfg.db_retry_s)
        self.instance = cfg.instance_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
        self.streams: dict[int, StreamWorker | ProcessStreamWorker] = {}
        self._streams_lock = threading.Lock()
        self.job_workers: list[JobWorker] = []
        self._spare: Pipeline | None = None
        self._spare_lock = threading.Lock()
        self._batcher: StreamBatcher | None = (
            None  # the GPU's shared forward passes for all streams (created with the first stream)
        )
        self.accepting = False
        self.rtmp: RtmpRelay | None = None
        self._publish_lock = threading.Lock()
        if cfg.rtmp_port:
            from edge.service.rtmp import RtmpRelay

            host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
            self.rtmp = RtmpRelay(
                self.data_dir / "rtmp",
                cfg.rtmp_host,
                cfg.rtmp_port,
                f"http://{host}:{settings.port}",
                cfg.nginx_binary,
                cfg.nginx_rtmp_module,
            )
            self.rtmp.check()  # missing nginx/module: a one-line error before the server listens
        self.srt: SrtPublishServer | None = None
        self._libsrt: ctypes.CDLL | None = None
        if cfg.srt_port:
            from edge.service.srt_publish import PublisherMailbox, load_libsrt

            self._libsrt = load_libsrt(cfg.srt_library)  # missing libsrt: a one-line error before the server listens
            self.srt_mailbox = PublisherMailbox()
        self.metrics.add_callback(self._scrape_gauges)
        self._bootstrap_admin()

    # -- start / stop --------------------------------------------------------------------------------------
    def _prepare_database(self) -> None:
        from db.cli import ensure_schema
        from db.json_import import import_data_folder
        from db.migrate import require_current

        try:
            # The service's own tables are in the Alembic history too (db/service_models.py)
            (ensure_schema if self.config.auto_migrate else require_current)(self.database_url)
            import_data_folder(self.database_url, self.data_dir)  # JSON files of before revision 0004, once
        except ValueError:
            raise
        except Exception as exc:  # cannot connect, no permission...: one line naming the database
            from sqlalchemy.engine import make_url

            shown = make_url(self.database_url).render_as_string(hide_password=True)
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise ServiceSetupError(f"database {shown}: {reason}") from None

    def _bootstrap_admin(self) -> None:
        cfg = self.config
        if not cfg.bootstrap_admin:
            return
        from db.crud import create_user

        with self.sessions() as s, s.begin():
            if s.scalar(select(User.id).limit(1)) is None:
                if not cfg.bootstrap_admin_password:
                    raise ServiceSetupError(
                        "service.bootstrap_admin is set but service.bootstrap_admin_password is not"
                    )
                create_user(s, cfg.bootstrap_admin, cfg.bootstrap_admin_password, role="admin")
                log.info("created admin user %s", cfg.bootstrap_admin)

    def preload(self) -> None:
        """Build one pipeline now (``airpatrol serve`` does, before it listens): missing or broken weights fail the
        start with a clear error instead of the first stream, and the slow first model load (imports, ONNX/Torch
        initialisation, which can hold the GIL for seconds) happens before any client is connected. The pipeline is
        kept for the first stream that runs in this process (with process_per_stream: an SRT publisher's only; stream
        processes load their own). An app embedded elsewhere (tests, the dashboard's) loads models on first use."""
        with self._spare_lock:
            if self._spare is None:
                pipeline = self.pipeline_factory(self.settings.pipeline)
                if not self.process_streams or self.config.srt_port:  # stream processes load their own
                    self._spare = pipeline

    def _pipeline_config(self, calibration=None) -> PipelineConfig:
        """The service's pipeline settings, with the stream's own calibration (``CalibrationConfig``) if it has one."""
        if calibration is None:
            return self.settings.pipeline
        return self.settings.pipeline.model_copy(update={"calibration": calibration})

    def _stream_pipeline(self, calibration=None) -> Pipeline:
        """A pipeline for a stream; with the stream's own calibration (``CalibrationConfig``) instead of the
        service's, built fresh (the spare one has the service's)."""
        if calibration is not None:
            return self.pipeline_factory(self._pipeline_config(calibration))
        with self._spare_lock:
            spare, self._spare = self._spare, None
        return spare or self.pipeline_factory(self.settings.pipeline)

    def _stream_batcher(self) -> StreamBatcher | None:
        """On a GPU, the streams' detector and road U-Net calls meet in shared forward passes; on a CPU each stream's
        thread runs its own (a batch is no faster there, and waiting for the others would only add latency)."""
        if self._batcher is None:
            from vision.detection import resolve_device

            try:
                on_gpu = resolve_device(self.settings.pipeline.device).startswith("cuda")
            except ValueError:  # --device cuda without a GPU: the stream's pipeline reports it, in its worker
                on_gpu = False
            if on_gpu:
                from edge.batch.batched import StreamBatcher

                self._batcher = StreamBatcher()
        return self._batcher

    def start(self) -> None:
        cfg = self.config
        if cfg.instance_id:
            n = self.jobs.requeue_instance(cfg.instance_id)
            if n:
                log.warning("re-queued %d job(s) this instance was running when it stopped", n)
        deps = JobDeps(
            cfg,
            self.settings.pipeline,
            self.pipeline_factory,
            self.sessions,
            self._resolve_upload,
            self.data_dir / "runs",
            self.metrics,
        )
        for i in range(cfg.job_workers):
            worker = JobWorker(self.jobs, f"{self.instance}/{i}", deps)
            worker.start()
            self.job_workers.append(worker)
        if self.rtmp is not None:
            from edge.service.rtmp import wait_listening

            self.rtmp.start()
            if not wait_listening(self.rtmp.port):
                log.error("RTMP relay is not listening on port %s (see %s)", self.rtmp.port, self.rtmp.folder)
        if self._libsrt is not None:
            from edge.service.srt_publish import SrtPublishServer

            assert cfg.srt_port is not None  # libsrt is loaded only for one
            self.srt = srt = SrtPublishServer(
                self._libsrt,
                cfg.srt_host,
                cfg.srt_port,
                self._srt_authorize,
                self._srt_connected,
                latency_ms=cfg.srt_latency_ms,
                read_timeout_s=cfg.read_timeout_s,
                passphrase=cfg.srt_passphrase,
            )
            srt.start()
        with self.sessions() as s, s.begin():  # a publisher starts a new run when it publishes again after a restart
            for row in s.scalars(select(StreamRow).where(StreamRow.active.is_(True), StreamRow.kind == "publish")):
                row.active, row.stopped_at = False, utcnow()
        if self.process_streams:
            from edge.service.stream_process import warm_up

            warm_up()
        if cfg.resume_streams:
            with self.sessions() as s:
                rows = list(s.scalars(select(StreamRow).where(StreamRow.active.is_(True))))
            for row in rows:
                try:
                    self.start_stream(row)
                except StreamSourceError as exc:
                    log.error("stream %s not resumed: %s", row.id, exc)
        self.accepting = True

    def shutdown(self, timeout: float = 20.0) -> None:
        """Stop taking work; live runs are completed with what was processed, running jobs go back to the queue."""
        self.accepting = False
        for w in self.job_workers:
            w.stop()
        for sw in self.all_streams():
            sw.stop(timeout)
        for w in self.job_workers:
            w.join(timeout)
        self.job_workers.clear()
        if self.rtmp is not None:
            self.rtmp.stop()
        if self.srt is not None:
            self.srt.stop()
            self.srt_mailbox.close()
        self.close()

    def close(self) -> None:
        """Close pooled database connections (the engine reconnects if it is used again)."""
        self.sessions.kw["bind"].dispose()

    # -- streams -------------------------------------------------------------------------------------------
    def start_stream(self, row: StreamRow, source: SourceSpec | None = None) -> StreamWorker | ProcessStreamWorker:
        if row.kind == "pull":
            assert row.url is not None  # a pull stream is created with its URL
            source = check_source(row.url, self.config.stream_file_root)
        with self.sessions() as s:
            calibration = stream_calibration.load(s, row.id)
        spec = StreamSpec(
            row.id,
            row.name,
            row.kind,
            source,
            row.device_id,
            row.speed_limit_kmh,
            row.task_round_id,
            stream_calibration.describe(calibration),
        )
        worker: StreamWorker | ProcessStreamWorker
        if self.process_streams and (source is None or source.opener is None):  # an SRT publisher's: in memory here
            setup = StreamSetup(
                spec,
                self.config,
                self._pipeline_config(calibration),
                self.pipeline_factory,
                self.database_url,
                logging.getLogger("airpatrol").getEffectiveLevel(),
            )
            worker = ProcessStreamWorker(setup, self.sessions, self.metrics, on_ended=self._stream_ended)
        else:
            deps = WorkerDeps(
                self.config,
                functools.partial(self._stream_pipeline, calibration),
                self.sessions,
                self.metrics,
                on_ended=self._stream_ended,
            )
            batcher = self._stream_batcher()
            if batcher is not None:
                deps.step = batcher.step
            worker = StreamWorker(spec, deps)
        with self._streams_lock:
            finished = [k for k, w in self.streams.items() if w.finished]
            for k in finished[: max(0, len(finished) - MAX_FINISHED_STREAMS)]:  # oldest first (insertion order)
                del self.streams[k]
                self.metrics.forget_stream(str(k))
            self.streams[row.id] = worker
        worker.start()
        return worker

    def rtmp_publish(self, key: str, addr: str) -> str | None:
        """nginx asks whether ``key`` may publish: None (yes) or the reason it may not.

        The key is a device token. The device's publish stream is started on its first publish; when the device
        publishes again while that stream is still open (it dropped out), its reader reconnects at once and the run
        continues (same pipeline, track ids, one time axis with the gap in it)."""
        from db.crud import authenticate_device

        if self.rtmp is None or not self.accepting:
            return "not accepting publishers"
        with self.sessions() as s, s.begin():
            device = authenticate_device(s, key)
            if device is None:
                return "invalid or revoked stream key"
            device_id, serial = device.id, device.serial
        with self._publish_lock:
            playing = self.rtmp.expect_player(key)
            for w in self.all_streams():
                if self._publishing(w, device_id, "rtmp"):
                    log.info("device %s publishes again from %s: stream %s continues", serial, addr, w.spec.id)
                    w.restart_reader()
                    break
            else:
                self._start_publish_stream(key, device_id, serial, addr)
        # Let the publisher in once our reader is subscribed (or after a few seconds, whatever happens).
        if not playing.wait(PLAYER_WAIT_S):
            log.warning(
                "device %s: the reader did not subscribe within %.0f s; its first GOP may be lost",
                serial,
                PLAYER_WAIT_S,
            )
        return None

    def _start_publish_stream(self, key: str, device_id: int, serial: str, addr: str) -> None:
        assert self.rtmp is not None  # called by the relay's publish callback
        source = SourceSpec(self.rtmp.play_url(key), f"rtmp publish by {serial}", False)  # in memory only
        self._new_publish_stream(source, "RTMP", device_id, serial, addr)

    def _new_publish_stream(self, source: SourceSpec, protocol: str, device_id: int, serial: str, addr: str) -> None:
        with self.sessions() as s, s.begin():
            row = StreamRow(
                name=f"{serial} ({protocol})",
                kind="publish",
                url=None,
                device_id=device_id,
                created_by=f"device:{serial}",
            )
            s.add(row)
        self.start_stream(row, source)
        log.info("device %s publishes %s from %s: stream %s", serial, protocol, addr, row.id)

    @staticmethod
    def _publishing(w: StreamWorker | ProcessStreamWorker, device_id: int, protocol: str) -> bool:
        """Is ``w`` the open publish stream of this device over this protocol (an SRT source has an opener)?"""
        return (
            w.spec.kind == "publish"
            and w.spec.device_id == device_id
            and not w.finished
            and w.spec.source is not None
            and (w.spec.source.opener is not None) == (protocol == "srt")
        )

    # -- SRT publishers ------------------------------------------------------------------------------------
    def _srt_device(self, key: str) -> tuple[int, str] | None:
        from db.crud import authenticate_device

        with self.sessions() as s, s.begin():
            device = authenticate_device(s, key)
            return None if device is None else (device.id, device.serial)

    def _srt_authorize(self, key: str, peer: str) -> str | None:
        """In the SRT handshake (libsrt's listen callback): None lets the caller in, else why not."""
        if not self.accepting:
            return "not accepting publishers"
        return None if self._srt_device(key) is not None else "invalid or revoked stream key"

    def _srt_connected(self, conn) -> None:
        """An accepted SRT publisher: its device's stream reads it (the stream is created on its first publish; a
        publisher that connects again continues the same run, like RTMP)."""
        import functools

        from edge.service.srt_publish import PublishedSource

        device = self._srt_device(conn.key)  # revoked between the handshake and now: refused all the same
        if device is None or not self.accepting:
            conn.close()
            return
        device_id, serial = device
        with self._publish_lock:
            for w in self.all_streams():
                if self._publishing(w, device_id, "srt"):
                    log.info("device %s publishes SRT again from %s: stream %s continues", serial, conn.peer, w.spec.id)
                    w.restart_reader()  # the old reader lets go first, so the new one takes this connection
                    self.srt_mailbox.offer(device_id, conn)
                    return
            self.srt_mailbox.offer(device_id, conn)
            source = SourceSpec(
                f"srt-publish:{serial}",
                f"srt publish by {serial}",
                False,
                opener=functools.partial(PublishedSource, self.srt_mailbox, device_id),
            )
            self._new_publish_stream(source, "SRT", device_id, serial, conn.peer)

    def _stream_ended(self, stream_id: int) -> None:
        """Ended by itself (file done, device sent end, failed): not resumed at the next start."""
        with self.sessions() as s, s.begin():
            row = s.get(StreamRow, stream_id)
            if row is not None:
                row.active, row.stopped_at = False, utcnow()

    def stop_stream(self, s: Session, row: StreamRow) -> StreamWorker | ProcessStreamWorker | None:
        """Stop a stream for good (DELETE): its run is completed and it is not resumed at the next start."""
        row.active, row.stopped_at = False, utcnow()
        s.commit()
        with self._streams_lock:
            worker = self.streams.pop(row.id, None)
        if worker is not None:
            worker.stop()
        self.metrics.forget_stream(str(row.id))
        return worker

    def calibrate_stream(self, s: Session, row: StreamRow, calibration) -> StreamWorker | ProcessStreamWorker:
        """Give a running stream its own calibration: its run is completed with the old scale and the stream goes
        on in a new run with the new one (a run has one scale). The source is kept: a push client, an RTMP or SRT
        publisher stays connected. Stored in the caller's session ``s`` (the caller commits)."""
        with self._streams_lock:
            worker = self.streams.get(row.id)
        if worker is None or worker.finished:
            raise LookupError(f"stream {row.id} is not running")
        stream_calibration.save(s, row.id, calibration)
        if isinstance(worker, ProcessStreamWorker):
            worker.recalibrate_to(self._pipeline_config(calibration), stream_calibration.describe(calibration))
        else:
            worker.recalibrate(
                functools.partial(self._stream_pipeline, calibration), stream_calibration.describe(calibration)
            )
        return worker

    def stream(self, stream_id: int) -> StreamWorker | ProcessStreamWorker | None:
        with self._streams_lock:
            return self.streams.get(stream_id)

    def all_streams(self) -> list[StreamWorker | ProcessStreamWorker]:
        with self._streams_lock:
            return list(self.streams.values())

    def may_manage_stream(self, who: Principal, row: StreamRow) -> bool:
        return who.kind == "user" and who.can_write or who.device_id is not None and who.device_id == row.device_id

    # -- jobs / uploads ------------------------------------------------------------------------------------
    def _resolve_upload(self, upload_id: str) -> Path:
        with self.sessions() as s:
            row = self.uploads.get(s, upload_id)
            return self.uploads.complete_path(s, upload_id, row.kind)

    # -- health / metrics ----------------------------------------------------------------------------------
    def database_ok(self) -> str | None:
        try:
            with self.sessions() as s:
                s.execute(text("SELECT 1"))
            return None
        except Exception as exc:
            return str(exc).splitlines()[0][:200]

    def _scrape_gauges(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        depth = GaugeMetricFamily(
            "airpatrol_stream_queue_depth", "frames waiting in a stream's queue", labels=["stream"]
        )
        up = GaugeMetricFamily(
            "airpatrol_stream_up", "1 while the stream is receiving frames", labels=["stream", "state"]
        )
        for w in self.all_streams():
            depth.add_metric([w.key], len(w.queue))
            up.add_metric([w.key, w.state], 1.0 if w.state == "live" else 0.0)
        yield depth
        yield up
        lost = CounterMetricFamily(
            "airpatrol_stream_frames_lost",
            "frames skipped because the stream's data was damaged (until the next keyframe)",
            labels=["stream"],
        )
        for w in self.all_streams():
            lost.add_metric([w.key], w.frames_lost)
        yield lost
        jobs = GaugeMetricFamily("airpatrol_jobs", "batch jobs by status", labels=["status"])
        try:
            for status, n in self.jobs.counts().items():
                jobs.add_metric([status], n)
        except Exception:  # the database is down: /readyz says so; the scrape still works
            pass
        yield jobs
