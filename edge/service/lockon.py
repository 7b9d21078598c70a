"""Locking on to a live video stream: which demuxed packets reach the decoder, and what a decode error means.

A stream joined mid-GOP (long-GOP drone encoders send a keyframe every few seconds) starts with packets that
reference frames this receiver never saw; FFmpeg's decoder answers them with ``Invalid data found when processing
input``. That is not a broken connection: the decoder just has to wait for the next keyframe. The same holds after
mid-stream corruption (a lost UDP datagram, a damaged packet): the frames after it until the next keyframe would
decode with smeared references (false motion for the tracker), so they are skipped and counted as lost, and
decoding resumes at the next keyframe. Only the demuxer failing (timeout, connection closed) means the source is
gone; that is the reader's business, not this one's.

Some encoders never send a keyframe (periodic intra refresh). After ``keyframe_wait_s`` without one the gate opens
anyway and keeps the frames the decoder does not flag as corrupt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class LockStats:
    waited_packets: int = 0  # packets skipped before the first keyframe of a connection (not a loss: never had them)
    lost_packets: int = 0  # packets skipped after corruption until the decoder locked on again (frames lost)
    corruptions: int = 0  # corruption events (each starts one resync)
    last_corruption: str | None = None


class KeyframeGate:
    """Feeds a PyAV video codec context packet by packet; yields only frames that decoded cleanly.

    ``on_corruption(reason)`` is called once per corruption event (the first bad packet or frame after lock).
    """

    def __init__(
        self,
        codec_context,
        keyframe_wait_s: float = 10.0,
        on_corruption: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ctx = codec_context
        self.keyframe_wait_s = keyframe_wait_s
        self.on_corruption = on_corruption
        self.clock = clock
        self.stats = LockStats()
        self.locked = False  # decoding; False: waiting for a keyframe
        self.ever_locked = False
        self._waiting_since = clock()

    @property
    def waiting_s(self) -> float:
        return 0.0 if self.locked else self.clock() - self._waiting_since

    def feed(self, packet) -> Iterator:
        """The clean frames ``packet`` completes (none while waiting for a keyframe)."""
        if packet.size == 0:  # the demuxer's end-of-stream packet: it flushes the decoder's last frames
            if self.locked:
                yield from self._decode(packet)
            return
        if not self.locked:
            if packet.is_keyframe and not packet.is_corrupt:
                self._lock()
            elif self.clock() - self._waiting_since >= self.keyframe_wait_s:
                self._lock()  # no keyframe for that long: an intra-refresh stream; let the decoder try
            else:
                self._skip()
                return
        if packet.is_corrupt:  # the demuxer saw data missing (MPEG-TS continuity counter jump, truncated packet)
            self._resync("damaged packet (data missing in the transport)")
            return
        yield from self._decode(packet)

    def _decode(self, packet) -> Iterator:
        import av

        try:
            frames = self.ctx.decode(packet)
        except av.error.FFmpegError as exc:  # InvalidDataError and friends: this packet or its references are bad
            self._resync(f"decoder: {_short(exc)}")
            return
        for frame in frames:
            if frame.is_corrupt:  # the decoder concealed an error in it
                self._resync("decoder flagged a corrupt frame")
                return
            yield frame

    def _lock(self) -> None:
        self.locked = self.ever_locked = True

    def _skip(self) -> None:
        if self.ever_locked:
            self.stats.lost_packets += 1
        else:
            self.stats.waited_packets += 1

    def _resync(self, reason: str) -> None:
        """Forget the decoder's references and wait for the next keyframe; the packet that failed is lost too."""
        self.stats.corruptions += 1
        self.stats.lost_packets += 1
        self.stats.last_corruption = reason
        self.locked = False
        self._waiting_since = self.clock()
        try:
            self.ctx.flush_buffers()
        except Exception:  # a decoder that cannot flush is reopened by the next keyframe's SPS anyway
            pass
        if self.on_corruption is not None:
            self.on_corruption(reason)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
