"""Locking on to live long-GOP streams: the test clip encoded by FFmpeg as H.264/H.265 with a keyframe every 3 s, sent
at its real rate as MPEG-TS over UDP or SRT, or served by an RTSP camera (what drone encoders do); the receiver joins mid-GOP, meets damaged data, loses the
source. It must wait for keyframes instead of reconnecting, skip damage to the next keyframe, count the loss, and
reconnect only when the source is gone."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest
from live_sources import GOP_S, RtspCamera, ffmpeg_has_srt, live_encoder, long_gop_files, rtsp_camera_missing
from service_helpers import free_port, wait_for

from edge.service.ingest import PullReader, check_source

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg not installed (Debian: apt-get install ffmpeg)"
)


@pytest.fixture(scope="module")
def long_gop(clip, tmp_path_factory):
    return long_gop_files(clip, tmp_path_factory.mktemp("long-gop"))


class Recorder:
    """Collects what a PullReader reports."""

    def __init__(self):
        self.frames, self.events = [], []
        self.lock = threading.Lock()

    def on_frame(self, frame):
        with self.lock:
            self.frames.append(frame)

    def on_event(self, name, detail):
        with self.lock:
            self.events.append((time.monotonic(), name, detail))

    def names(self) -> list[str]:
        with self.lock:
            return [e[1] for e in self.events]

    def when(self, name: str) -> float | None:
        with self.lock:
            return next((t for t, n, _ in self.events if n == name), None)


def reader(url: str, rec: Recorder) -> PullReader:
    return PullReader(
        check_source(url, None),
        rec.on_frame,
        rec.on_event,
        open_timeout_s=5,
        read_timeout_s=2,
        backoff_initial_s=0.2,
        backoff_max_s=1,
        name="test-pull",
    )


class UdpRelay(threading.Thread):
    """Forwards datagrams from ``in_port`` to ``out_port``; ``cut(n)`` loses the next n (a burst of radio loss)."""

    def __init__(self, in_port: int, out_port: int):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", in_port))
        self.sock.settimeout(0.2)
        self.out, self.out_port = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), out_port
        self.to_lose = 0
        self.forwarded = 0
        self.running = True

    def cut(self, n: int) -> None:
        self.to_lose = n

    def run(self):
        while self.running:
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            if self.to_lose > 0:
                self.to_lose -= 1
                continue
            self.out.sendto(data, ("127.0.0.1", self.out_port))
            self.forwarded += 1

    def close(self):
        self.running = False
        self.join(2)
        self.sock.close()
        self.out.close()


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_joining_a_long_gop_udp_stream_mid_gop_waits_for_the_keyframe(long_gop, codec):
    port = free_port()
    encoder = live_encoder(long_gop, codec, f"udp://127.0.0.1:{port}?pkt_size=1316")
    rec = Recorder()
    pull = reader(f"udp://127.0.0.1:{port}", rec)
    try:
        time.sleep(1.0)  # the encoder's first keyframe is gone: the receiver joins mid-GOP
        pull.start()
        wait_for(lambda: len(rec.frames) >= 25, 6 + 2 * GOP_S, "frames after the next keyframe")
    finally:
        pull.stop()
        encoder.kill()
        encoder.wait()
    pull.join(5)
    assert "dropped" not in rec.names(), f"reconnected instead of waiting for a keyframe: {rec.events}"
    assert pull.connects == 1
    assert pull.waited_packets > 0, "joined on a keyframe: the test did not exercise mid-GOP joining"
    assert pull.lost_frames == 0 and pull.corruptions == 0  # packets before the first keyframe are not a loss
    assert rec.names()[:2] == ["connected", "locked"]
    assert rec.frames[0].image().shape == (240, 320, 3)
    times = [f.t for f in rec.frames]
    assert times[0] == 0.0 and all(b > a for a, b in zip(times, times[1:]))


def test_damaged_data_skips_to_the_next_keyframe_and_only_a_lost_source_reconnects(server, long_gop):
    import httpx
    from test_live_stream import read_results
    from websockets.sync.client import connect

    app, addr, creds = server
    base, relay_port, port = f"http://{addr}", free_port(), free_port()
    relay = UdpRelay(relay_port, port)
    relay.start()
    encoder = live_encoder(long_gop, "h264", f"udp://127.0.0.1:{relay_port}?pkt_size=1316")
    try:
        r = httpx.post(
            f"{base}/api/streams",
            headers=creds["operator"],
            json={"kind": "pull", "url": f"udp://127.0.0.1:{port}", "name": "udp-long-gop"},
        )
        assert r.status_code == 201, r.text
        sid, feed_url = r.json()["id"], f"ws://{addr}{r.json()['feed_url']}"

        def state():
            return httpx.get(f"{base}/api/streams/{sid}", headers=creds["viewer"]).json()

        with connect(feed_url, additional_headers=creds["viewer"]) as ws:
            before = read_results(ws, 10, timeout=20)
            relay.cut(15)  # ~15 datagrams of 1316 bytes lost: part of a few frames
            damaged = wait_for(lambda: (s := state())["corruptions"] >= 1 and s, 10, "the damage to be noticed")
            wait_for(lambda: state()["state"] == "live", 5 + GOP_S, "the next keyframe")
            time.sleep(0.5)
            after = read_results(ws, 10, timeout=20, after_frame=state()["received"] - 1)
            # 'frame' counts arrivals: every result from here on is of a frame decoded after the resync
        assert damaged["state"] in ("syncing", "live") and "corrupt" in (damaged["last_error"] or "")
        status = state()
        assert status["reconnects"] == 0, "damaged data must not reconnect"
        assert 1 <= status["lost"] <= 25 * GOP_S + 5  # at most one GOP lost per damage
        assert {m["run_id"] for m in before + after} == {before[0]["run_id"]}
        # the run's clock includes the frames lost to the damage (speeds across the gap stay right)
        assert min(m["t"] for m in after) - max(m["t"] for m in before) >= status["lost"] / 25 * 0.9

        encoder.kill()  # now the source is really gone: the reader reconnects (with back-off) until it is back
        encoder.wait()
        wait_for(lambda: state()["state"] == "reconnecting", 10, "the lost source to be noticed")
        encoder = live_encoder(long_gop, "h264", f"udp://127.0.0.1:{relay_port}?pkt_size=1316")
        back = wait_for(lambda: (s := state())["state"] == "live" and s, 20, "the stream to come back")
        assert back["reconnects"] >= 1 and back["run_id"] == before[0]["run_id"]
    finally:
        encoder.kill()
        encoder.wait()
        relay.close()


@pytest.mark.skipif(shutil.which("ffmpeg") is None or not ffmpeg_has_srt(), reason="ffmpeg without SRT (libsrt)")
def test_srt_long_gop_stream_locks_on_and_reconnects_only_when_the_source_is_gone(long_gop):
    """SRT through the system ffmpeg (PyAV has no libsrt): an SRT listener sending long-GOP H.264; the service calls."""
    port = free_port()
    url = f"srt://127.0.0.1:{port}?mode=listener"
    encoder = live_encoder(long_gop, "h264", url)
    rec = Recorder()
    pull = reader(f"srt://127.0.0.1:{port}", rec)
    try:
        time.sleep(0.5)
        pull.start()
        wait_for(lambda: len(rec.frames) >= 25, 15, "frames over SRT")
        assert rec.names()[:2] == ["connected", "locked"] and pull.connects == 1
        assert rec.frames[0].image().shape == (240, 320, 3)
        encoder.kill()  # the source is gone
        encoder.wait()
        wait_for(lambda: "dropped" in rec.names(), 10, "the lost SRT source to be noticed")
        n = len(rec.frames)
        encoder = live_encoder(long_gop, "h264", url)
        wait_for(lambda: len(rec.frames) >= n + 25, 20, "frames after the source came back")
    finally:
        pull.stop()
        encoder.kill()
        encoder.wait()
    pull.join(10)
    assert not pull.is_alive()
    assert pull.connects >= 2 and pull.corruptions == 0


@pytest.mark.skipif(
    rtsp_camera_missing() is not None,
    reason=f"RTSP camera: {rtsp_camera_missing()} (Debian: "
    "apt-get install python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)",
)
@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_rtsp_long_gop_stream_joined_mid_gop_waits_for_the_keyframe(long_gop, codec):
    """An RTSP camera that is already streaming (another client watches it): the reader's first packets are the
    middle of a GOP. It locks on at the next keyframe without reconnecting; when the camera goes away it reconnects,
    and when it is back the frames continue."""
    camera = RtspCamera(long_gop, codec).start()
    rec = Recorder()
    pull = reader(camera.url, rec)
    try:
        camera.watcher()
        # The camera's pipeline starts at the first keyframe after the watcher asks (at 0 or GOP_S s): 1.5 GOP later
        # it is in the middle of a GOP either way.
        time.sleep(1.5 * GOP_S)
        pull.start()
        wait_for(lambda: len(rec.frames) >= 25, 8 + 2 * GOP_S, "frames after the next keyframe over RTSP")
        assert "dropped" not in rec.names(), f"reconnected instead of waiting for a keyframe: {rec.events}"
        assert rec.names()[:2] == ["connected", "locked"] and pull.connects == 1
        assert pull.waited_packets > 0, "joined on a keyframe: the test did not exercise mid-GOP joining"
        assert pull.lost_frames == 0 and pull.corruptions == 0
        assert rec.frames[0].image().shape == (240, 320, 3)
        if codec == "h264":  # the camera is gone (RTSP server and encoder), then back on the same address
            camera.stop()
            wait_for(lambda: "dropped" in rec.names(), 10, "the lost RTSP camera to be noticed")
            n = len(rec.frames)
            camera.start()
            wait_for(lambda: len(rec.frames) >= n + 25, 20, "frames after the camera came back")
            assert pull.connects >= 2
    finally:
        pull.stop()
        camera.stop()
    pull.join(10)
    assert not pull.is_alive()
    assert pull.corruptions == 0
