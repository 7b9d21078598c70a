"""Getting live frames in: the bounded frame queue (thinned evenly over a second, then drop-oldest), stream-URL
checks, and the PyAV pull reader.

A pull reader runs in its own thread: open the URL with PyAV (FFmpeg), decode, hand frames to the stream's worker;
when the stream drops it reconnects with exponential back-off (the worker keeps the run and its time axis going).
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from vision.types import CameraPose

if TYPE_CHECKING:  # for the annotation; imported where a connection starts
    from edge.service.lockon import KeyframeGate

log = logging.getLogger("airpatrol.service.ingest")

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "tcp", "srt")
# FFmpeg protocols a network stream may use, nested ones included (an HLS playlist must not point at file:, a
# "concat:" or "subfile:" URL must not read local files).
NETWORK_PROTOCOLS = "tcp,udp,rtp,rtsp,rtsps,http,https,tls,crypto,httpproxy,hls,srt,rtmp,rtmps,rtmpt,rtmpts"


class StreamSourceError(ValueError):
    """A stream URL or path the service refuses; the message says why."""


@dataclass
class IncomingFrame:
    pixels: np.ndarray | Callable[[], np.ndarray]  # BGR uint8, or how to get it: decoded only if not dropped
    t: float  # seconds since the first frame of this connection (the worker maps it onto the run's time axis)
    received: float  # time.perf_counter() when it arrived (latency is measured from here)
    pose: CameraPose | None = None
    seq: int = -1  # frame number in the stream (set on arrival; gaps are dropped frames)

    def image(self) -> np.ndarray:
        """The pixels, converting now if that was deferred (a frame dropped from the queue never costs this)."""
        if callable(self.pixels):
            self.pixels = self.pixels()
        return self.pixels


_Item = TypeVar("_Item")


class DropOldestQueue(Generic[_Item]):
    """Bounded FIFO between ingest and processing. When full, ``put`` discards the OLDEST item and counts it:
    a live view wants the newest frames, and memory and latency must stay bounded when processing falls behind."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._items: deque[_Item] = deque()
        self._cond = threading.Condition()
        self.dropped = 0
        self.closed = False

    def put(self, item: _Item) -> int:
        """Add ``item``; returns how many old items were dropped to make room (0 or 1)."""
        with self._cond:
            dropped = 0
            while len(self._items) >= self.maxsize:
                self._items.popleft()
                dropped += 1
            self._items.append(item)
            self.dropped += dropped
            self._cond.notify()
            return dropped

    def get(self, timeout: float) -> _Item | None:
        """The oldest item, or None after ``timeout`` seconds (or at once when closed and empty)."""
        with self._cond:
            if not self._items and not self.closed:
                self._cond.wait(timeout)
            return self._items.popleft() if self._items else None

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._items)


class FrameQueue(DropOldestQueue[IncomingFrame]):
    """A live stream's frame queue: when full, frames are thinned evenly over up to ``span_s`` of the stream, and
    the oldest goes beyond that.

    Dropping the oldest keeps the newest frames, but a burst (a pull reader's one-second probe hands over the
    stream's first second at once; a stalled connection catches up the same way) then leaves only its last few
    frames: the pipeline never saw that second, and vehicles that crossed the view in it were missed
    (docs/service.md). So the full queue drops the frame whose removal leaves the smallest hole in the stream's time
    (never the oldest, next to be processed, nor the newest) while its frames span at most ``span_s``: the burst is
    seen at a few instants spread over it, and a worker that falls behind for a moment processes evenly spaced
    frames rather than bursts and holes. Beyond ``span_s`` the oldest goes, so a frame waits at most about that
    long; 0: always the oldest (the lowest latency)."""

    def __init__(self, maxsize: int, span_s: float = 1.0):
        super().__init__(maxsize)
        self.span_s = span_s
        self.thinned = 0  # of the dropped frames, those that went to thin the queue evenly

    def put(self, item: IncomingFrame) -> int:
        with self._cond:
            full = len(self._items) >= self.maxsize >= 2
            if not full or item.t - self._items[0].t > self.span_s:
                return super().put(item)
            times = [f.t for f in self._items] + [item.t]
            k = min(range(1, len(times) - 1), key=lambda i: times[i + 1] - times[i - 1])
            del self._items[k]
            self._items.append(item)
            self.dropped += 1
            self.thinned += 1
            self._cond.notify()
            return 1


class Relay(Protocol):
    """A connection PyAV reads from that is not a URL it opens itself (SrtRelay, an SRT publisher's PublishedSource)."""

    def open(self) -> Any: ...  # a PyAV input container

    def close(self) -> object: ...


@dataclass(frozen=True)
class SourceSpec:
    open_url: str  # what PyAV opens
    shown: str  # the same with any password replaced (logs, API, database)
    is_file: bool
    # A source that is not a URL (an SRT publisher's connection): opener(reader's stop event, open timeout) gives an
    # object with open() -> PyAV container and close(), like SrtRelay.
    opener: Callable[[threading.Event, float], Relay] | None = None


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, f"{parts.username}:***@{host}", parts.path, parts.query, parts.fragment))


def check_source(url: str, file_root: str | None) -> SourceSpec:
    """Accept a network stream URL of a known protocol, or a file inside ``file_root``; refuse anything else."""
    url = url.strip()
    if not url or len(url) > 2048 or any(ord(c) < 32 for c in url):
        raise StreamSourceError("stream url: empty, too long or contains control characters")
    scheme = urlsplit(url).scheme.lower()
    if scheme in NETWORK_SCHEMES:
        if not urlsplit(url).hostname:
            raise StreamSourceError(f"stream url {redact(url)}: no host")
        if scheme == "srt" and shutil.which("ffmpeg") is None:
            raise StreamSourceError(
                f"stream url {redact(url)}: srt:// needs the ffmpeg program built with libsrt "
                f"(Debian: apt-get install ffmpeg); PyAV's own FFmpeg has no SRT"
            )
        return SourceSpec(url, redact(url), False)
    if scheme not in ("", "file") and len(scheme) > 1:  # one letter: a Windows drive, i.e. a path
        raise StreamSourceError(
            f"stream url: protocol {scheme!r} not allowed (use one of {', '.join(NETWORK_SCHEMES)})"
        )
    if file_root is None:
        raise StreamSourceError("file streams are disabled on this server (set service.stream_file_root)")
    root = Path(file_root).resolve()
    raw = url[len("file://") :] if scheme == "file" else url
    path = (root / raw).resolve()  # an absolute raw path replaces root here and is then checked like any other
    if not path.is_relative_to(root):
        raise StreamSourceError(f"stream file {raw!r}: outside the allowed folder")
    if not path.is_file():
        raise StreamSourceError(f"stream file {raw!r}: no such file in the allowed folder")
    return SourceSpec(str(path), str(path.relative_to(root)), True)


def ffmpeg_options(spec: SourceSpec) -> dict[str, str]:
    if spec.is_file:
        return {"protocol_whitelist": "file"}
    # No "fflags nobuffer": it throws away the packets read while probing the stream, and with a long-GOP encoder
    # the keyframe among them is the only one for seconds (measured: first frame 7 s later on a 7 s GOP). Keeping
    # them costs latency only at the start (the drop-oldest queue catches up at once).
    opts = {"protocol_whitelist": NETWORK_PROTOCOLS, "analyzeduration": "1000000", "probesize": "1000000"}
    scheme = urlsplit(spec.open_url).scheme.lower()
    if scheme.startswith("rtsp"):
        opts["rtsp_transport"] = "tcp"  # UDP RTP loses packets behind NAT and on lossy links
    elif scheme.startswith("rtmp"):
        opts["rtmp_live"] = "live"  # a live stream: never ask the server to seek
    elif scheme == "udp":
        # A 1080p keyframe is hundreds of datagrams arriving at once: a bigger socket buffer (capped by the kernel's
        # net.core.rmem_max) keeps them, and an overrun of FFmpeg's own FIFO is a loss to resync from, not an error.
        opts.update(buffer_size=str(4 * 1024 * 1024), overrun_nonfatal="1")
    return opts


class PullReader(threading.Thread):
    """Reads one pull stream until ``stop`` is set (or a file ends).

    Events passed to ``on_event(name, detail)``: ``connected`` (the demuxer is open; frames follow once a keyframe
    arrives), ``locked`` (first clean frame of this connection), ``corrupt`` (damaged data: frames skipped up to the
    next keyframe and counted in ``lost_frames``), ``dropped`` (the source is gone: reconnect with back-off),
    ``ended`` (a file played to its end). ``on_frame(IncomingFrame)`` and ``on_event`` run in this thread.
    Decoder errors never reconnect: only the demuxer failing (timeout, connection closed, end of stream) does.
    """

    def __init__(
        self,
        spec: SourceSpec,
        on_frame: Callable[[IncomingFrame], None],
        on_event: Callable[[str, str], None],
        *,
        open_timeout_s: float,
        read_timeout_s: float,
        backoff_initial_s: float,
        backoff_max_s: float,
        name: str,
        keyframe_wait_s: float = 10.0,
    ):
        super().__init__(name=name, daemon=True)
        self.spec = spec
        self.on_frame, self.on_event = on_frame, on_event
        self.timeouts = (open_timeout_s, read_timeout_s)
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.keyframe_wait_s = keyframe_wait_s
        self.stop_event = threading.Event()
        self._wake = threading.Event()  # cuts a back-off wait short (a publisher is back)
        self.fps = 25.0
        self.connects = 0
        self._gate: KeyframeGate | None = None  # the current connection's
        self._relay: Relay | None = None
        self._past = {"lost_packets": 0, "corruptions": 0, "waited_packets": 0}  # of earlier connections

    def _total(self, name: str) -> int:
        gate = self._gate
        return self._past[name] + (getattr(gate.stats, name) if gate is not None else 0)

    @property
    def lost_frames(self) -> int:
        """Frames skipped after corruption until the decoder locked on again (all connections)."""
        return self._total("lost_packets")

    @property
    def corruptions(self) -> int:
        return self._total("corruptions")

    @property
    def waited_packets(self) -> int:
        """Packets skipped after (re)connecting until the first keyframe (never decodable: not a loss)."""
        return self._total("waited_packets")

    def stop(self) -> None:
        self.stop_event.set()
        self._wake.set()
        relay = self._relay
        if relay is not None:
            relay.close()  # a read blocked on its pipe ends now

    def _hide(self, text: str) -> str:
        """FFmpeg's errors quote the URL; the real one may hold a password or a publisher's stream key."""
        return text.replace(self.spec.open_url.split("?")[0], self.spec.shown)

    def retry_now(self) -> None:
        """Reconnect at once instead of after the back-off (the source is known to be back)."""
        self._wake.set()

    def _pause(self, seconds: float) -> bool:
        """Wait out a back-off; True when the reader is stopped."""
        self._wake.wait(seconds)
        self._wake.clear()
        return self.stop_event.is_set()

    def run(self) -> None:
        backoff = self.backoff_initial_s
        while not self.stop_event.is_set():
            got_frames = False
            try:
                got_frames = self._read_once()
                if self.stop_event.is_set():
                    return
                if self.spec.is_file and got_frames:
                    self.on_event("ended", "end of file")
                    return
                self.on_event("dropped", "stream ended")
            except Exception as exc:  # FFmpeg/network errors of every kind: the stream is down, retry
                if self.stop_event.is_set():
                    return
                self.on_event("dropped", self._hide(_short(exc)))
            if got_frames:
                backoff = self.backoff_initial_s  # it worked for a while: start the back-off again from the bottom
            if self._pause(backoff):
                return
            backoff = min(backoff * 2, self.backoff_max_s)

    def _read_once(self) -> bool:
        import av

        from edge.service.lockon import KeyframeGate

        relay: Relay | None = None
        if self.spec.opener is not None:
            relay = self._relay = self.spec.opener(self.stop_event, self.timeouts[0])
            container = relay.open()
        elif urlsplit(self.spec.open_url).scheme.lower() == "srt":
            srt = self._relay = SrtRelay(self.spec.open_url, *self.timeouts)
            relay, container = srt, srt.open()
        else:
            container = av.open(self.spec.open_url, options=ffmpeg_options(self.spec), timeout=self.timeouts)
        try:
            if not container.streams.video:
                raise StreamSourceError(f"{self.spec.shown}: no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            self.fps = float(stream.average_rate or stream.guessed_rate or 0) or self.fps
            self.connects += 1
            self.on_event("connected", f"{stream.codec_context.name}, waiting for a keyframe")
            self._gate = gate = KeyframeGate(
                stream.codec_context, self.keyframe_wait_s, on_corruption=lambda why: self.on_event("corrupt", why)
            )
            clock = _ConnectionClock(self.spec.is_file)
            got = False
            reported = (-1, -1)  # (corruptions, lost) when "locked" was last reported
            for packet in container.demux(stream):
                if self.stop_event.is_set():
                    return got
                if (packet.size == 0 and not self.spec.is_file) or getattr(relay, "ended", False):
                    # The end of a live connection, noticed only after the read timeout: the frames the decoder
                    # still holds are seconds old by now. Delivered, they would look like frames that arrived
                    # now (the outage would be recorded that much shorter, their latency wrong): let them go.
                    break
                for vf in gate.feed(packet):  # the last, empty packet flushes the decoder
                    if reported[0] != gate.stats.corruptions:  # first frame of the connection, or after a resync
                        how = (
                            f"after {gate.stats.waited_packets} packets before the first keyframe"
                            if not got
                            else f"resynced at a keyframe; {gate.stats.lost_packets - max(reported[1], 0)} frames lost"
                        )
                        self.on_event(
                            "locked", f"{stream.codec_context.name} {vf.width}x{vf.height} @ {self.fps:.2f} fps ({how})"
                        )
                        reported = (gate.stats.corruptions, gate.stats.lost_packets)
                    got = True
                    if not self._deliver(vf, clock):
                        return got
            return got
        finally:
            ended_gate, self._gate = self._gate, None
            if ended_gate is not None:
                for name in self._past:
                    self._past[name] += getattr(ended_gate.stats, name)
            container.close()
            if relay is not None:
                relay.close()

    def _deliver(self, vf, clock: "_ConnectionClock") -> bool:
        if self.stop_event.is_set():  # replaced or stopped: its frames no longer count
            return False
        t_rel = clock.relative(vf.time)
        if clock.paced:  # play a file at its own rate, like a live source
            lag = t_rel - (time.monotonic() - clock.wall0)
            if lag > 0 and self.stop_event.wait(lag):
                return False
        self.on_frame(IncomingFrame(functools.partial(vf.to_ndarray, format="bgr24"), t_rel, time.perf_counter()))
        return True


class SrtRelay:
    """SRT through the system ``ffmpeg`` (PyAV's bundled FFmpeg is built without libsrt): it receives the SRT stream
    and hands it on unchanged as MPEG-TS on a pipe, which PyAV demuxes like any other stream. Its exit (source gone,
    SRT timeout) ends the pipe, which the reader treats as a dropped stream."""

    def __init__(self, url: str, open_timeout_s: float, read_timeout_s: float):
        sep = "&" if "?" in url else "?"
        if "timeout=" not in url:  # libsrt's options: microseconds for the read timeout, ms for connecting
            url += f"{sep}timeout={int(read_timeout_s * 1e6)}&connect_timeout={int(open_timeout_s * 1000)}"
        self.url = url
        self.proc: subprocess.Popen | None = None

    def open(self):
        import av

        self.proc = subprocess.Popen(
            [
                "ffmpeg",
                "-hide_banner",
                "-nostdin",
                "-loglevel",
                "error",
                "-i",
                self.url,
                "-map",
                "0:v:0",
                "-c",
                "copy",
                "-f",
                "mpegts",
                "pipe:1",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            return av.open(
                self.proc.stdout, format="mpegts", options={"analyzeduration": "1000000", "probesize": "1000000"}
            )
        except Exception:
            err = self.close()
            raise ConnectionError(f"srt: {err or 'no stream'}") from None

    def close(self) -> str:
        """Stop the relay; returns the last line it printed (why it ended)."""
        proc, self.proc = self.proc, None  # once, whichever thread (reader or stop) comes first
        if proc is None:
            return ""
        if proc.poll() is None:
            proc.kill()
        try:
            _, err = proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            return ""
        lines = (err or b"").decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:200] if lines else ""


class _ConnectionClock:
    """Frame times relative to the first delivered frame of one connection (never negative)."""

    def __init__(self, paced: bool):
        self.paced = paced
        self.first: float | None = None
        self.wall0 = time.monotonic()

    def relative(self, t: float | None) -> float:
        t = float(t) if t is not None else 0.0
        if self.first is None:
            self.first, self.wall0 = t, time.monotonic()
        return max(t - self.first, 0.0)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
