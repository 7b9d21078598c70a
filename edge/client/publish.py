"""Publish a live source to the service's push API: frames as JPEG over one WebSocket, with telemetry per frame.

Sources: a video file (played at its own rate, like a live feed), a camera or capture device (``0``, ``/dev/video0``,
read with OpenCV), or a network stream PyAV opens (``rtsp://``, ``rtmp://``, ``udp://``, ``http(s)://``). Network
streams joined mid-GOP wait for a keyframe (``edge.service.lockon``). Telemetry comes from a flight log (``--log``,
any format ``airpatrol import-log`` reads) or a DJI ``.SRT`` next to a video file; each frame gets the log sample
nearest to its time.

When the WebSocket drops, the client reconnects to the same stream with a growing pause: the server continues the
same run (track ids and the time axis go on). Frames that arrive while disconnected are skipped (a live view wants
the newest frame). When the source ends, ``{"type": "end"}`` completes the run.
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from edge.client.api import ClientError, Endpoint, check

# Telemetry fields the push protocol takes (db.validation.SampleIn without its time).
PUSH_FIELDS = (
    "lat",
    "lon",
    "rel_alt_m",
    "abs_alt_m",
    "heading_deg",
    "gimbal_pitch_deg",
    "gimbal_yaw_deg",
    "gimbal_roll_deg",
    "ground_speed_ms",
    "vertical_speed_ms",
    "battery_pct",
    "focal_len_mm",
)
CLOSE_FATAL = {1003, 1008, 1009}  # protocol errors and refusals: reconnecting would not help


@dataclass
class PublishOptions:
    name: str | None = None
    speed_limit_kmh: float | None = None
    jpeg_quality: int = 85
    max_width: int = 1920
    fps: float | None = None  # cameras: the rate to ask for
    duration_s: float | None = None  # stop after this long (None: until the source ends or Ctrl-C)
    retry_initial_s: float = 0.5
    retry_max_s: float = 10.0
    max_retries: int = 20


class Telemetry:
    """Nearest flight-log sample to a frame time, as the push protocol's ``telemetry`` object."""

    def __init__(self, path: Path):
        from vision.telemetry.loader import load_flight_log

        log = load_flight_log(path)
        self.samples = log.samples
        self.times = [s.t_s for s in self.samples]
        self.t0 = self.times[0]

    def at(self, t: float) -> dict | None:
        i = bisect.bisect_left(self.times, self.t0 + t)
        if i == len(self.times):
            i -= 1
        if i > 0 and abs(self.times[i - 1] - self.t0 - t) < abs(self.times[i] - self.t0 - t):
            i -= 1
        s = self.samples[i]
        out = {k: getattr(s, k) for k in PUSH_FIELDS if getattr(s, k) is not None}
        return out or None


def is_camera(source: str) -> bool:
    return source.isdigit() or source.startswith("/dev/video")


class FrameSource:
    """A source's frames as (seconds since the first, BGR image). ``late``: frames of a recording skipped because the
    publisher fell behind the recording's own rate (a slow machine, a reconnect that took long): a recording is
    published live, so they are gone, and the summary says how many."""

    def __init__(self) -> None:
        self.frames: Iterator[tuple[float, np.ndarray]] = iter(())
        self.late = 0

    def __iter__(self) -> Iterator[tuple[float, np.ndarray]]:
        return self.frames


def open_frames(source: str, fps: float | None) -> tuple[FrameSource, float]:
    """(frames, nominal fps) of a file, camera or network stream."""
    if is_camera(source):
        return _camera(source, fps)
    return _pyav(source)


def _camera(source: str, fps: float | None):
    cap = cv2.VideoCapture(int(source) if source.isdigit() else source)
    if not cap.isOpened():
        raise ClientError(f"{source}: cannot open the capture device")
    if fps:
        cap.set(cv2.CAP_PROP_FPS, fps)
    rate = cap.get(cv2.CAP_PROP_FPS) or fps or 25.0

    def frames():
        t0 = time.monotonic()
        try:
            while True:
                ok, img = cap.read()
                if not ok:
                    return
                yield time.monotonic() - t0, img
        finally:
            cap.release()

    src = FrameSource()
    src.frames = frames()
    return src, rate


def _pyav(source: str):
    import av

    from edge.service.ingest import NETWORK_SCHEMES, SourceSpec, ffmpeg_options
    from edge.service.lockon import KeyframeGate

    is_file = Path(source).exists()
    scheme = source.split("://", 1)[0].lower() if "://" in source else ""
    # A network stream gets the service's reader options (RTSP over TCP, a big UDP buffer, probing that keeps the
    # first keyframe of a long-GOP stream).
    options = ffmpeg_options(SourceSpec(source, source, False)) if scheme in NETWORK_SCHEMES else {}
    try:
        container = av.open(source, options=options, timeout=(10.0, 10.0))
    except (av.error.FFmpegError, OSError) as exc:
        raise ClientError(f"{source}: cannot open ({str(exc).splitlines()[0][:150]})") from None
    if not container.streams.video:
        container.close()
        raise ClientError(f"{source}: no video stream")
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    rate = float(stream.average_rate or stream.guessed_rate or 25)

    src = FrameSource()

    def frames():
        gate = KeyframeGate(stream.codec_context)
        first, wall0 = None, time.monotonic()
        try:
            for packet in container.demux(stream):
                for vf in gate.feed(packet):
                    t = float(vf.time) if vf.time is not None else time.monotonic() - wall0
                    if first is None:
                        first, wall0 = t, time.monotonic()
                    t -= first
                    if is_file:  # a recording is published at its own rate, like the live feed it was
                        lag = t - (time.monotonic() - wall0)
                        if lag > 0:
                            time.sleep(lag)
                        elif lag < -0.2:
                            src.late += 1
                            continue  # behind (slow machine or network): skip, stay live
                    yield t, vf.to_ndarray(format="bgr24")
        finally:
            container.close()

    src.frames = frames()
    return src, rate


class Publisher:
    def __init__(self, ep: Endpoint, options: PublishOptions, say: Callable[[str], None] = print):
        self.ep, self.opt, self.say = ep, options, say
        self.sent = self.skipped = self.reconnects = 0
        self.last_ack: dict | None = None
        self.stream: dict | None = None

    @property
    def _registered(self) -> dict:
        assert self.stream is not None  # run() registers first
        return self.stream

    def register(self) -> dict:
        body = {"kind": "push", "name": self.opt.name, "speed_limit_kmh": self.opt.speed_limit_kmh}
        with self.ep.client() as http:
            self.stream = check(
                http.post("/api/streams", json={k: v for k, v in body.items() if v is not None}), "register the stream"
            )
        return self.stream

    def run(self, frames: Iterable[tuple[float, np.ndarray]], fps: float, telemetry: Telemetry | None) -> dict:
        """Push every frame of ``frames``; returns the last ack (the server's counts)."""
        from websockets.exceptions import ConnectionClosed

        if self.stream is None:
            self.register()
        ws, failures, pause, next_try, busy = None, 0, self.opt.retry_initial_s, 0.0, 0
        t_start = time.monotonic()
        try:
            for t, image in frames:
                if self.opt.duration_s is not None and time.monotonic() - t_start > self.opt.duration_s:
                    break
                if ws is None:
                    if time.monotonic() < next_try:
                        self.skipped += 1  # waiting to reconnect: this frame is gone, the next one matters
                        continue
                    try:
                        ws = self._connect(fps)
                        failures, pause = 0, self.opt.retry_initial_s
                    except (OSError, ConnectionClosed, TimeoutError) as exc:
                        if self._wait_busy(exc, busy):
                            next_try = time.monotonic() + min(self.opt.retry_initial_s * 2**busy, self.opt.retry_max_s)
                            busy += 1
                            self.skipped += 1
                            continue
                        failures += 1
                        code = getattr(getattr(exc, "rcvd", None), "code", None)
                        if code in CLOSE_FATAL or failures > self.opt.max_retries:
                            raise ClientError(f"push to stream {self._registered['id']}: {_why(exc)}") from None
                        next_try, pause = time.monotonic() + pause, min(pause * 2, self.opt.retry_max_s)
                        self.skipped += 1
                        continue
                try:
                    self._send(ws, t, image, telemetry)
                    self._drain(ws)
                    busy = 0
                except (OSError, ConnectionClosed) as exc:
                    code = getattr(getattr(exc, "rcvd", None), "code", None)
                    if self._wait_busy(exc, busy):
                        ws = None
                        next_try = time.monotonic() + min(self.opt.retry_initial_s * 2**busy, self.opt.retry_max_s)
                        busy += 1
                        continue
                    if code in CLOSE_FATAL:
                        raise ClientError(f"push to stream {self._registered['id']}: {_why(exc)}") from None
                    self.say(f"connection lost ({_why(exc)}); reconnecting")
                    ws, next_try = None, time.monotonic() + pause
                    self.reconnects += 1
            ws = self._send_end(ws, fps)
            try:
                while True:  # until the server closes: "run complete"
                    self._handle(ws.recv(timeout=30))
            except (ConnectionClosed, TimeoutError):
                pass
        finally:
            if ws is not None:
                ws.close()
        return self.last_ack or {}

    def _send_end(self, ws, fps: float):
        """Say the flight is over, over ``ws`` or a new connection (the source ended while disconnected, or the link
        dropped at the end); returns the connection it was said on."""
        from websockets.exceptions import ConnectionClosed

        for attempt in range(self.opt.max_retries + 1):
            try:
                if ws is None:
                    ws = self._connect(fps)
                ws.send(json.dumps({"type": "end"}))
                return ws
            except (OSError, ConnectionClosed, TimeoutError) as exc:
                if ws is not None:
                    ws.close()
                    ws = None
                if self._wait_busy(exc, attempt):
                    time.sleep(min(self.opt.retry_initial_s * 2**attempt, self.opt.retry_max_s))
                elif attempt > 0 or getattr(getattr(exc, "rcvd", None), "code", None) in CLOSE_FATAL:
                    raise ClientError(f"push to stream {self._registered['id']}: {_why(exc)}") from None
        raise ClientError(f"push to stream {self._registered['id']}: could not say the flight ended")

    def _wait_busy(self, exc: BaseException, busy: int) -> bool:
        """Refused as "already pushing" right after a reconnect: a server older than the takeover of a client's own
        stale connection (edge/service/routes/streams.py) holds the old connection as this stream's pusher until it
        notices the drop: not a new drop, and not final. True: try again after a pause."""
        return _still_attached(exc) and busy < self.opt.max_retries and not self._stream_over()

    def _stream_over(self) -> bool:
        """Has the server ended the stream (then "already pushing" is final)? Unknown counts as not over."""
        try:
            with self.ep.client() as http:
                r = http.get(f"/api/streams/{self._registered['id']}")
            return r.status_code == 404 or r.status_code == 200 and r.json().get("state") in ("finished", "failed")
        except Exception:
            return False

    def _connect(self, fps: float):
        from websockets.sync.client import connect

        # entered as a context manager, which websockets >= 17.1 asks for (a bare connect() is deprecated there) and
        # older versions accept; the connection outlives this call: the push loop closes it
        ws = connect(
            self.ep.ws_base + self._registered["push_url"],
            additional_headers=self.ep.headers,
            max_size=2**20,
            open_timeout=10,
        ).__enter__()
        ws.send(json.dumps({"type": "hello", "fps": round(min(max(fps, 1.0), 240.0), 3)}))
        return ws

    def _send(self, ws, t: float, image: np.ndarray, telemetry: Telemetry | None) -> None:
        h, w = image.shape[:2]
        if w > self.opt.max_width:
            image = cv2.resize(
                image, (self.opt.max_width, round(h * self.opt.max_width / w)), interpolation=cv2.INTER_AREA
            )
        ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, self.opt.jpeg_quality])
        header = {"type": "frame", "t": round(t, 4)}
        if telemetry is not None and (sample := telemetry.at(t)):
            header["telemetry"] = sample
        ws.send(json.dumps(header))
        ws.send(jpeg.tobytes())
        self.sent += 1

    def _drain(self, ws) -> None:
        while True:
            try:
                self._handle(ws.recv(timeout=0))
            except TimeoutError:
                return

    def _handle(self, message) -> None:
        if isinstance(message, str):
            msg = json.loads(message)
            if msg.get("type") == "ack":
                self.last_ack = msg


def _still_attached(exc: BaseException) -> bool:
    """The server refused this connection because it still counts an earlier one of ours as the stream's pusher."""
    rcvd = getattr(exc, "rcvd", None)
    return rcvd is not None and rcvd.code == 1008 and "already pushing" in (rcvd.reason or "")


def _why(exc: BaseException) -> str:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is not None:
        return f"closed by the server ({rcvd.code} {rcvd.reason})"
    return f"{type(exc).__name__}: {exc}"[:150]
