"""`airpatrol upload` and `airpatrol stream`: the ground-station side of the edge service."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from edge.commands.errors import user_errors

if TYPE_CHECKING:  # rich loads when a bar is drawn
    from rich.progress import TaskID


def network_errors(fn):
    """The server unreachable or the link gone for good: one line (``user_errors`` turns it into exit 2)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import httpx
        from websockets.exceptions import WebSocketException

        from edge.client.api import ClientError

        try:
            return fn(*args, **kwargs)
        except (httpx.HTTPError, WebSocketException, ConnectionError, TimeoutError) as exc:
            raise ClientError(f"{kwargs.get('server') or 'server'}: {type(exc).__name__}: {exc}"[:300]) from None

    return wrapper


ServerOpt = Annotated[Optional[str], typer.Option("--server", help="edge service URL (default: AIRPATROL_SERVER_URL)")]
TokenHelp = (
    "device token: AIRPATROL_DEVICE_TOKEN or device_token in --config (never on the command line: it would "
    "end up in the shell history and the process list)"
)
ConfigOpt = Annotated[Optional[Path], typer.Option(help="config file with server_url / device_token")]


class _Bar:
    """A rich progress bar per task name (checksum, upload, job), drawn on stderr; plain lines when not a terminal."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            disable=not self.console.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        key = what.split(" ")[0] + what.split(" ")[1] if " " in what else what
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(what, total=total or None)
        self.progress.update(self.tasks[key], description=what, completed=done, total=total or None)

    def say(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False) if self.console.is_terminal else typer.echo(
            text, err=True
        )

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()


@user_errors
@network_errors
def cli_upload(
    video: Annotated[Path, typer.Argument(help="recorded flight video")],
    log: Annotated[
        Optional[Path],
        typer.Option(
            "--log",
            help="flight log (DJI SRT/CSV, ULog, tlog, BIN, GPX); a DJI .SRT next to the video is taken automatically",
        ),
    ] = None,
    server: ServerOpt = None,
    speed_limit: Annotated[Optional[float], typer.Option(help="km/h: violations above this speed")] = None,
    follow: Annotated[bool, typer.Option(help="wait for the processing job and print its result")] = True,
    chunk_mb: Annotated[float, typer.Option(help="MiB per request")] = 8.0,
    config: ConfigOpt = None,
) -> None:
    """Upload a recorded flight (resumable, checksum verified by the server) and follow its job to completion.

    The device token comes from AIRPATROL_DEVICE_TOKEN or device_token in --config."""
    from db.engine import default_data_dir
    from edge.client.api import ClientError, endpoint
    from edge.client.upload import Uploader, UploadOptions, follow_job
    from vision.telemetry.poses import find_sidecar_srt

    if not video.is_file():
        raise FileNotFoundError(f"{video}: no such file")
    if log is not None and not log.is_file():
        raise FileNotFoundError(f"{log}: no such flight log")
    log = log or find_sidecar_srt(video)
    ep = endpoint(server, None, config)
    opts = UploadOptions(
        chunk_bytes=max(64 * 1024, int(chunk_mb * 1024 * 1024)), state_file=default_data_dir() / "client-uploads.json"
    )
    with _Bar() as bar:
        up = Uploader(ep, opts, progress=bar, say=bar.say)
        try:
            params: dict = {}
            if log is not None:
                log_up = up.send(log, "flight_log")
                done = up.complete(log_up, {"enqueue": False})
                bar.say(f"flight log {log.name}: {done['upload']['status']}, checksum verified")
                params["log_upload_id"] = log_up["id"]
            if speed_limit is not None:
                params["speed_limit_kmh"] = speed_limit
            vid = up.send(video, "video")
            done = up.complete(vid, params)
        finally:
            up.close()
        info = done["upload"].get("info") or {}
        bar.say(
            f"video {video.name}: {done['upload']['status']}, checksum verified (sha256 {vid['sha256'][:12]}...), "
            f"{info.get('width')}x{info.get('height')}, upload {vid['id']}"
            + (f", resumed {up.resumes}x after dropped connections" if up.resumes else "")
        )
        job = done.get("job")
        if job is None:
            return
        bar.say(f"job {job['id']} {job['status']}")
        if not follow:
            typer.echo(f"job {job['id']} queued")
            return
        job = follow_job(ep, job["id"], progress=bar)
    if job["status"] != "complete":
        raise ClientError(f"job {job['id']} {job['status']}: {job.get('error') or 'no reason given'}")
    typer.echo(f"job {job['id']} complete: run {job['run_id']}, {job['frames_done']} frames")


@user_errors
@network_errors
def cli_stream(
    source: Annotated[
        str, typer.Argument(help="video file, camera (0, /dev/video0) or stream URL (rtsp://, udp://...)")
    ],
    server: ServerOpt = None,
    log: Annotated[
        Optional[Path],
        typer.Option(
            "--log",
            help="flight log for the frames' telemetry (a DJI .SRT next to a video file is taken automatically)",
        ),
    ] = None,
    name: Annotated[Optional[str], typer.Option(help="stream name shown on the dashboard")] = None,
    speed_limit: Annotated[Optional[float], typer.Option(help="km/h: live violations above this speed")] = None,
    max_width: Annotated[int, typer.Option(help="frames wider than this are scaled down before sending")] = 1920,
    jpeg_quality: Annotated[int, typer.Option(min=10, max=100)] = 85,
    fps: Annotated[Optional[float], typer.Option(help="cameras: frame rate to ask for")] = None,
    duration: Annotated[Optional[float], typer.Option(help="stop after this many seconds")] = None,
    config: ConfigOpt = None,
) -> None:
    """Publish a live source to the edge service (push API), with telemetry when a flight log is given.

    The device token comes from AIRPATROL_DEVICE_TOKEN or device_token in --config."""
    from edge.client.api import endpoint
    from edge.client.publish import Publisher, PublishOptions, Telemetry, is_camera, open_frames
    from vision.telemetry.poses import find_sidecar_srt

    if log is not None and not log.is_file():
        raise FileNotFoundError(f"{log}: no such flight log")
    if log is None and not is_camera(source) and Path(source).is_file():
        log = find_sidecar_srt(source)
    ep = endpoint(server, None, config)
    telemetry = Telemetry(log) if log is not None else None
    frames, rate = open_frames(source, fps)
    pub = Publisher(
        ep,
        PublishOptions(
            name=name or Path(source).name[:128],
            speed_limit_kmh=speed_limit,
            jpeg_quality=jpeg_quality,
            max_width=max_width,
            fps=fps,
            duration_s=duration,
        ),
        say=lambda s: typer.echo(s, err=True),
    )
    stream = pub.register()
    typer.echo(
        f"stream {stream['id']}: publishing {source} at {rate:.2f} fps"
        + (f" with telemetry from {log.name}" if log else "")
        + f"; live feed {ep.base}{stream['feed_url']}"
    )
    try:
        ack = pub.run(frames, rate, telemetry)
    except KeyboardInterrupt:
        typer.echo(
            "interrupted: the run stays open on the server until the device reconnects or it is stopped", err=True
        )
        raise typer.Exit(130) from None
    typer.echo(
        f"stream {stream['id']} ended: sent {pub.sent} frames ({pub.skipped} skipped while disconnected, "
        f"{frames.late} skipped behind the recording's rate, {pub.reconnects} reconnects); server received {ack.get('received')}, processed "
        f"{ack.get('processed')}, dropped {ack.get('dropped')}"
    )
