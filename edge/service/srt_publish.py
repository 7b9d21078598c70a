"""SRT publishers (newer DJI/Autel controllers, OBS, ffmpeg, hardware encoders) straight into the service, each
authenticated by its device key in the SRT stream id.

An SRT caller sends a *stream id* in its handshake (``srt://server:9000?streamid=apt_...``). The service listens with
libsrt itself (through ctypes: PyAV's FFmpeg has no SRT, and FFmpeg's SRT listener takes one caller and never looks at
the stream id) and uses libsrt's listen callback, SRT's own access-control hook: it runs during the handshake, before
the connection exists, so a wrong key is refused with rejection code 1401 (``SRT_REJX_UNAUTHORIZED``) and not a byte
of video is accepted. One UDP port takes any number of devices.

Stream id: the device token itself, or SRT's access-control syntax ``#!::r=<token>,m=publish`` (``m`` other than
``publish`` is refused: this server only receives). An accepted connection is read as MPEG-TS (what SRT encoders
send) by the ordinary pull reader (keyframe lock-on); a publisher that drops and connects again continues its run.

The listener takes IPv6 and IPv4 callers on one socket when it binds ``::`` (the default, ``SRTO_IPV6ONLY`` off: an
IPv4 caller arrives as ``::ffff:a.b.c.d``), IPv4 only on ``0.0.0.0`` or an IPv4 address, IPv6 only on an IPv6 one.
A machine without IPv6 gets the IPv4 wildcard instead of ``::``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable

log = logging.getLogger("airpatrol.service.srt")

SRTO_RCVSYN, SRTO_RCVTIMEO, SRTO_LATENCY, SRTO_PASSPHRASE, SRTO_STREAMID = 2, 14, 23, 26, 46
SRTO_IPV6ONLY = 54  # must be set (0 or 1) before binding the IPv6 wildcard
SRT_INVALID_SOCK = -1
SRT_REJX_UNAUTHORIZED = 1401  # access_control.h: authentication failed
SRT_REJX_BAD_REQUEST = 1400
SRT_LIVE_PAYLOAD = 1456  # largest message of a live-mode socket (srt.h SRT_LIVE_MAX_PLSIZE)
LIBRARY_NAMES = ("srt-gnutls", "srt-openssl", "srt")  # Debian's builds, then upstream's


class SrtSetupError(ValueError):
    pass


def load_libsrt(path: str | None = None) -> ctypes.CDLL:
    """libsrt from ``path``, or the system's (the one Debian's ffmpeg uses)."""
    candidates = [path] if path else [ctypes.util.find_library(n) for n in LIBRARY_NAMES]
    for cand in filter(None, candidates):
        try:
            lib = ctypes.CDLL(cand)
        except OSError:
            continue
        _declare(lib)
        if lib.srt_startup() < 0:
            raise SrtSetupError(f"{cand}: srt_startup failed")
        return lib
    raise SrtSetupError(
        f"service.srt_port is set but libsrt was not found ({path or ', '.join(LIBRARY_NAMES)}); "
        f"Debian: apt-get install libsrt1.5-gnutls"
    )


LISTEN_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
)


def _declare(lib: ctypes.CDLL) -> None:
    c_int, vp = ctypes.c_int, ctypes.c_void_p
    for name, res, args in (
        ("srt_startup", c_int, []),
        ("srt_create_socket", c_int, []),
        ("srt_bind", c_int, [c_int, vp, c_int]),
        ("srt_listen", c_int, [c_int, c_int]),
        ("srt_listen_callback", c_int, [c_int, LISTEN_CALLBACK, vp]),
        ("srt_accept", c_int, [c_int, vp, ctypes.POINTER(c_int)]),
        ("srt_close", c_int, [c_int]),
        ("srt_setsockflag", c_int, [c_int, c_int, vp, c_int]),
        ("srt_getsockflag", c_int, [c_int, c_int, vp, ctypes.POINTER(c_int)]),
        ("srt_recvmsg", c_int, [c_int, ctypes.c_char_p, c_int]),
        ("srt_getlasterror_str", ctypes.c_char_p, []),
        ("srt_setrejectreason", c_int, [c_int, c_int]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def parse_stream_id(stream_id: str) -> tuple[str | None, str | None]:
    """(device key, refusal): the key of a plain or ``#!::`` stream id, or why the stream id is refused."""
    if not stream_id.startswith("#!::"):
        return (stream_id, None) if stream_id else (None, "no stream id (the device key)")
    fields = dict(kv.split("=", 1) for kv in stream_id[4:].split(",") if "=" in kv)
    if fields.get("m", "publish") != "publish":
        return None, f"mode {fields['m']!r} refused: this server only receives (m=publish)"
    return (fields.get("r") or None), (None if fields.get("r") else "stream id without r=<device key>")


def _sockaddr_in(host: str, port: int) -> bytes:
    """struct sockaddr_in (IPv4): family, port (network order), address, zero padding."""
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)


def _sockaddr_in6(host: str, port: int, scope_id: int = 0) -> bytes:
    """struct sockaddr_in6: family, port and flow label (network order), address, scope id."""
    return (
        struct.pack("=H", socket.AF_INET6)
        + struct.pack("!HI", port, 0)
        + socket.inet_pton(socket.AF_INET6, host)
        + struct.pack("=I", scope_id)
    )


def ipv6_available() -> bool:
    """Whether this machine can bind an IPv6 socket (a kernel or container may have IPv6 off)."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::", 0))
        return True
    except OSError:
        return False


def listen_address(host: str, port: int) -> tuple[bytes, bool, str]:
    """(the sockaddr to bind, whether it is the IPv6 wildcard, the address as logged) for ``host``: an IPv4 or IPv6
    address or a name. ``::`` falls back to ``0.0.0.0`` where IPv6 is off."""
    if host in ("::", "[::]") and not ipv6_available():
        log.warning("SRT listener: IPv6 is not available on this machine; listening on IPv4 (0.0.0.0) only")
        host = "0.0.0.0"
    family, _, _, _, sockaddr = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_DGRAM)[0]
    address = str(sockaddr[0]).split("%")[0]  # an IPv6 address may carry its zone ("fe80::1%eth0")
    if family == socket.AF_INET6:
        scope = int(sockaddr[3]) if len(sockaddr) > 3 else 0
        wildcard = ipaddress.IPv6Address(address).is_unspecified
        return _sockaddr_in6(address, port, scope), wildcard, f"[{address}]:{port}"
    return _sockaddr_in(address, port), False, f"{address}:{port}"


def _peer(ptr: int | None) -> str:
    """A caller's address as ``a.b.c.d:port`` (an IPv4 caller of a dual-stack listener too) or ``[v6]:port``."""
    if not ptr:
        return "?"
    family = struct.unpack("=H", ctypes.string_at(ptr, 2))[0]
    if family == socket.AF_INET:
        raw = ctypes.string_at(ptr, 16)
        return f"{socket.inet_ntoa(raw[4:8])}:{struct.unpack('!H', raw[2:4])[0]}"
    if family == socket.AF_INET6:
        raw = ctypes.string_at(ptr, 28)
        addr, port = ipaddress.IPv6Address(raw[8:24]), struct.unpack("!H", raw[2:4])[0]
        return f"{addr.ipv4_mapped}:{port}" if addr.ipv4_mapped else f"[{addr}]:{port}"
    return "?"


class SrtConnection:
    """One accepted publisher: a read-only, non-seekable file of its MPEG-TS bytes (what PyAV demuxes). A read
    that fails (peer gone, no data for the read timeout, closed) is the end of the file."""

    def __init__(self, lib: ctypes.CDLL, sock: int, key: str, peer: str):
        self.lib, self.sock, self.key, self.peer = lib, sock, key, peer
        self._buf = ctypes.create_string_buffer(SRT_LIVE_PAYLOAD)
        self._lock = threading.Lock()
        self.closed = False
        self.bytes = 0
        self.end_reason: str | None = None

    def read(self, n: int = -1) -> bytes:
        if self.closed:
            return b""
        got = self.lib.srt_recvmsg(self.sock, self._buf, SRT_LIVE_PAYLOAD)  # one SRT message (up to 7 TS packets)
        if got <= 0:  # peer gone, or silent for the read timeout: this connection is over (FFmpeg would read again)
            self.end_reason = self.end_reason or _last_error(self.lib)
            self.close()
            return b""
        self.bytes += got
        return self._buf.raw[:got]

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.lib.srt_close(self.sock)  # a read blocked in another thread returns at once


def _last_error(lib: ctypes.CDLL) -> str:
    msg = lib.srt_getlasterror_str()
    return msg.decode("utf-8", "replace") if msg else "SRT error"


class SrtPublishServer:
    """Listens for SRT callers on ``host:port``; ``authorize(key, peer)`` decides in the handshake (None: let in, or
    the refusal), ``on_connection(SrtConnection)`` gets every accepted publisher (in the accept thread)."""

    def __init__(
        self,
        lib: ctypes.CDLL,
        host: str,
        port: int,
        authorize: Callable[[str, str], str | None],
        on_connection: Callable[[SrtConnection], None],
        *,
        latency_ms: int = 120,
        read_timeout_s: float = 5.0,
        passphrase: str | None = None,
    ):
        self.lib, self.host, self.port = lib, host, port
        self.authorize, self.on_connection = authorize, on_connection
        self.latency_ms, self.read_timeout_s = latency_ms, read_timeout_s
        self.passphrase = passphrase  # encrypts the media (AES); callers without it are refused by libsrt
        self._callback = LISTEN_CALLBACK(self._on_handshake)  # kept referenced: libsrt calls it from its threads
        self._sock = SRT_INVALID_SOCK
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="srt-listener", daemon=True)
        self.refused = 0
        self.address = ""  # where it listens, once started

    def start(self) -> None:
        lib = self.lib
        sock = lib.srt_create_socket()
        if sock == SRT_INVALID_SOCK:
            raise SrtSetupError(f"SRT socket: {_last_error(lib)}")
        self._setint(sock, SRTO_LATENCY, self.latency_ms)
        if self.passphrase:
            raw = self.passphrase.encode()
            if lib.srt_setsockflag(sock, SRTO_PASSPHRASE, raw, len(raw)) < 0:
                err = _last_error(lib)
                lib.srt_close(sock)
                raise SrtSetupError(f"service.srt_passphrase: {err}")
        try:
            addr, dual_stack, shown = listen_address(self.host, self.port)
        except (OSError, ValueError) as exc:
            lib.srt_close(sock)
            raise SrtSetupError(f"service.srt_host {self.host!r}: not an address of this machine ({exc})") from None
        if dual_stack:
            self._setint(sock, SRTO_IPV6ONLY, 0)  # IPv4 callers too, on the same port
        if (
            lib.srt_bind(sock, addr, len(addr)) < 0
            or lib.srt_listen_callback(sock, self._callback, None) < 0
            or lib.srt_listen(sock, 16) < 0
        ):
            err = _last_error(lib)
            lib.srt_close(sock)
            raise SrtSetupError(f"SRT listener on {shown} (UDP): {err}")
        self._sock = sock
        self._thread.start()
        self.address = shown
        log.info("SRT publishers accepted on %s (UDP%s)", shown, ", IPv6 and IPv4" if dual_stack else "")

    def _setint(self, sock: int, opt: int, value: int) -> None:
        v = ctypes.c_int(value)
        self.lib.srt_setsockflag(sock, opt, ctypes.byref(v), ctypes.sizeof(v))

    def _on_handshake(self, _opaque, ns: int, hsversion: int, peeraddr, stream_id: bytes | None) -> int:
        """libsrt's listen callback: 0 lets the caller in, -1 rejects it (with the reason code set on ``ns``)."""
        peer, key = _peer(peeraddr), None
        try:
            key, why = parse_stream_id((stream_id or b"").decode("utf-8", "replace"))
            if key is not None:
                why = self.authorize(key, peer)
        except Exception as exc:  # never let an exception unwind into libsrt's thread
            why = f"error: {exc}"
        if why is None:
            return 0
        self.refused += 1
        log.warning("SRT publisher from %s refused: %s", peer, why)
        self.lib.srt_setrejectreason(ns, SRT_REJX_UNAUTHORIZED if key is not None else SRT_REJX_BAD_REQUEST)
        return -1

    def _accept_loop(self) -> None:
        lib = self.lib
        while not self._stop.is_set():
            addr = ctypes.create_string_buffer(128)
            size = ctypes.c_int(128)
            sock = lib.srt_accept(self._sock, addr, ctypes.byref(size))
            if sock == SRT_INVALID_SOCK:
                if self._stop.is_set():
                    return
                log.warning("SRT accept: %s", _last_error(lib))
                time.sleep(0.2)
                continue
            self._setint(sock, SRTO_RCVTIMEO, int(self.read_timeout_s * 1000))
            buf, n = ctypes.create_string_buffer(520), ctypes.c_int(520)
            lib.srt_getsockflag(sock, SRTO_STREAMID, buf, ctypes.byref(n))
            key, _ = parse_stream_id(buf.raw[: n.value].decode("utf-8", "replace"))
            conn = SrtConnection(lib, sock, key or "", _peer(ctypes.addressof(addr)))
            try:
                self.on_connection(conn)
            except Exception:
                log.exception("SRT publisher from %s: not taken", conn.peer)
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._sock != SRT_INVALID_SOCK:
            self.lib.srt_close(self._sock)  # srt_accept returns
            self._sock = SRT_INVALID_SOCK
        if self._thread.is_alive():
            self._thread.join(5)


class PublisherMailbox:
    """Accepted connections waiting for their stream's reader, one slot per device (a newer one replaces an older)."""

    def __init__(self):
        self._pending: dict[int, SrtConnection] = {}
        self._cond = threading.Condition()

    def offer(self, device_id: int, conn: SrtConnection) -> None:
        with self._cond:
            old = self._pending.pop(device_id, None)
            self._pending[device_id] = conn
            self._cond.notify_all()
        if old is not None:
            old.close()

    def take(self, device_id: int, timeout: float, stopped: threading.Event) -> SrtConnection | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if stopped.is_set():  # a reader being replaced must not take its successor's connection
                    return None
                if device_id in self._pending:
                    return self._pending.pop(device_id)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, 0.2))

    def close(self) -> None:
        with self._cond:
            conns, self._pending = list(self._pending.values()), {}
        for c in conns:
            c.close()


class PublishedSource:
    """What the pull reader opens for an SRT publish stream (same shape as ``ingest.SrtRelay``): the device's next
    accepted connection, demuxed as MPEG-TS. No connection within the open timeout reads as a dropped stream."""

    def __init__(self, mailbox: PublisherMailbox, device_id: int, stopped: threading.Event, open_timeout_s: float):
        self.mailbox, self.device_id, self.stopped, self.open_timeout_s = mailbox, device_id, stopped, open_timeout_s
        self.conn: SrtConnection | None = None

    def open(self):
        import av

        conn = self.conn = self.mailbox.take(self.device_id, self.open_timeout_s, self.stopped)
        if conn is None:
            raise ConnectionError("srt: the publisher is not connected")
        try:
            return av.open(
                conn, mode="r", format="mpegts", options={"analyzeduration": "1000000", "probesize": "1000000"}
            )
        except Exception:
            why = conn.end_reason or "no MPEG-TS from the publisher"
            conn.close()
            raise ConnectionError(f"srt: {why}") from None

    @property
    def ended(self) -> bool:
        """The connection is over: what the demuxer still hands out (the last frame, completed only by the end of
        the data) was sent before the publisher went silent, seconds ago."""
        return self.conn is not None and self.conn.closed

    def close(self) -> str:
        conn = self.conn
        if conn is not None:
            conn.close()
            return conn.end_reason or ""
        return ""
