"""The ``service`` section of :class:`edge.config.AirPatrolSettings` (file ``service:``, env ``AIRPATROL_SERVICE__*``)."""

from __future__ import annotations

from pydantic import Field

from vision.config_base import StageConfig

GiB = 1024**3


class ServiceConfig(StageConfig):
    # -- live streams ---------------------------------------------------------------------------------------
    queue_frames: int = Field(
        4,
        ge=1,
        le=1000,
        description="frames buffered per live stream; when full they are thinned evenly over up to queue_span_s of "
        "the stream, beyond that the OLDEST is dropped",
    )
    queue_span_s: float = Field(
        1.0,
        ge=0,
        description="stream seconds the full queue may spread its frames over (a burst, a worker falling behind for "
        "a moment, is seen at instants spread over it); about the longest a frame waits; 0: always drop the oldest",
    )
    reconnect_initial_s: float = Field(
        0.5, gt=0, description="first wait before reconnecting a dropped pull stream (or restarting a stream process)"
    )
    reconnect_max_s: float = Field(30.0, gt=0, description="cap of the exponential reconnect (and restart) back-off")
    process_per_stream: bool = Field(
        True,
        description="run each live stream (reader, decoder, pipeline, database writes) in its own process: streams "
        "use all cores and one that crashes or stalls is restarted without touching the others; false: all streams "
        "in the service process (threads; on a GPU their detector calls then share batched forward passes)",
    )
    open_timeout_s: float = Field(10.0, gt=0, description="PyAV open timeout of a pull stream")
    read_timeout_s: float = Field(5.0, gt=0, description="no packet for this long counts as a dropped stream")
    stream_file_root: str | None = Field(
        None,
        description="folder from which 'file' streams may be read (resolved; nothing outside it); unset: file streams refused",
    )
    resume_streams: bool = Field(True, description="restart registered pull streams when the service starts")
    db_flush_s: float = Field(2.0, gt=0, description="live results reach the database at least this often")
    min_over_limit_s: float = Field(1.0, ge=0, description="a track is a violation after this long above the limit")
    preview_max_width: int = Field(960, ge=64, description="MJPEG preview / snapshot are scaled down to this width")
    preview_fps: float = Field(10.0, gt=0, le=60)
    jpeg_quality: int = Field(80, ge=10, le=100)
    max_push_frame_bytes: int = Field(8 * 1024**2, ge=1024, description="largest JPEG a push client may send")
    max_frame_pixels: int = Field(
        4096 * 2304, ge=64 * 64, description="largest decoded frame accepted from a push client"
    )
    rtmp_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="accept RTMP publishers on this port (nginx with "
        "its RTMP module, supervised by the service); the stream key is a device token",
    )
    rtmp_host: str = Field("0.0.0.0", description="address the RTMP relay listens on")
    nginx_binary: str = Field("nginx", description="nginx executable of the RTMP relay")
    nginx_rtmp_module: str = Field("/usr/lib/nginx/modules/ngx_rtmp_module.so", description="the nginx RTMP module")
    srt_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="accept SRT publishers on this UDP port (libsrt); the stream id is a device token",
    )
    srt_host: str = Field(
        "::",
        description="address the SRT listener binds: '::' takes IPv6 and IPv4 callers (IPv4 only where the machine "
        "has no IPv6), '0.0.0.0' IPv4 only, an address only that one",
    )
    srt_latency_ms: int = Field(
        120, ge=20, le=10000, description="SRT receive latency (retransmission window) of publishers"
    )
    srt_passphrase: str | None = Field(
        None,
        min_length=10,
        max_length=79,
        description="SRT passphrase every publisher must also use (encrypts the media; the stream id stays in clear)",
    )
    srt_library: str | None = Field(None, description="path of libsrt; default: the system's (libsrt-gnutls/-openssl)")
    # -- uploads and batch jobs -----------------------------------------------------------------------------
    max_upload_bytes: int = Field(8 * GiB, ge=1024, description="largest recorded flight accepted")
    max_log_bytes: int = Field(512 * 1024**2, ge=1024, description="largest flight log accepted")
    max_chunk_bytes: int = Field(256 * 1024**2, ge=1024, description="largest single upload request")
    # per device (or user) uploading: counted from the uploads table, so every worker and restart sees the same
    upload_window_s: float = Field(
        3600.0, gt=0, description="the window of the per-device upload rate and volume limits"
    )
    uploads_per_window: int = Field(240, ge=1, description="new uploads one device may start per window (429 beyond)")
    upload_bytes_per_window: int = Field(
        64 * GiB, ge=1024, description="bytes one device may announce per window (429 beyond)"
    )
    open_uploads_per_device: int = Field(
        16, ge=1, description="unfinished uploads one device may hold at once (429 beyond)"
    )
    job_lease_s: float = Field(
        60.0, gt=0, description="a running job whose lease is not renewed for this long is retried"
    )
    job_heartbeat_s: float = Field(5.0, gt=0, description="how often a running job renews its lease and progress")
    job_max_attempts: int = Field(3, ge=1, description="a job that died this many times is failed, not retried")
    job_poll_s: float = Field(1.0, gt=0, description="idle batch worker checks the queue this often")
    job_workers: int = Field(1, ge=0, le=16, description="batch jobs processed at once (0: this instance runs none)")
    job_write_video: bool = Field(False, description="batch jobs also write the annotated MP4")
    db_retry_s: float = Field(
        300.0,
        ge=0,
        description="a database that went away (restart, network) is waited for this "
        "long before a job or a live run fails; every retry is logged",
    )
    db_batch_rows: int = Field(
        5000, ge=1, description="per-frame result rows written to the database in one transaction"
    )
    live_pacing: bool = Field(
        True,
        description="a live stream faster than its processing keeps every k-th frame, evenly, with k from the "
        "measured load (edge/service/pacing.py), instead of whatever the full queue drops; false: only the "
        "drop-oldest queue",
    )
    instance_id: str | None = Field(
        None,
        max_length=64,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="stable name of this instance: on start its own unfinished jobs are re-queued "
        "at once instead of after their lease expires",
    )
    # -- security ------------------------------------------------------------------------------------------
    secret_key: str | None = Field(
        None, min_length=16, description="signs login sessions; default: generated once into data_dir"
    )
    session_ttl_s: int = Field(12 * 3600, ge=60)
    bootstrap_admin: str | None = Field(None, description="create this admin user at start when no user exists")
    bootstrap_admin_password: str | None = Field(None, description="its password (use the environment, not a file)")
    auto_migrate: bool = Field(
        True, description="create the schema on an empty database at start (an outdated one is refused)"
    )
    # -- extension point -----------------------------------------------------------------------------------
    pipeline_factory: str | None = Field(
        None,
        description="'module:function' returning a tracking.pipeline.Pipeline for a PipelineConfig; the seam for "
        "a GPU multi-stream batching detector (see docs/service.md)",
    )
