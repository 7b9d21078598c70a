"""RTMP / SRT publish benchmark of `airpatrol serve`: a device publishes a drone clip with `ffmpeg -re` (as a DJI
controller does: RTMP, or SRT with the device key as stream id), the link is cut, the device publishes again.

Printed: time from starting the publisher to the first live result; server-side latency p50 / p95 (frame arrival at
the service -> its result published on the feed); processed fps; drop rate (frames the drop-oldest queue discarded
because processing was slower than the stream / frames received); frames lost to damaged data; recovery time (the
publisher starts again -> first result of a new frame); the gap the run recorded. Also a check of FFmpeg's own RTMP
listener (PyAV ``listen=1``), the alternative to the nginx relay: does it refuse a wrong stream key, does it take a
second publisher on the same port.

Usage (real 1080p 25 fps drone clip from ../shared, keyframe every 7 s, sent without re-encoding):
    python bench/publish_bench.py --detector coco --duration 20 --cut 30
    python bench/publish_bench.py --protocol srt --detector coco --duration 20 --cut 30
``--detector fake`` measures the service with a detector that finds nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
# stream_bench puts the repository on sys.path too
from stream_bench import ADMIN, DEFAULT_CLIP, start_server  # noqa: E402

from bench.serving import device_token, ffmpeg_live, free_port, login, stop  # noqa: E402


class Feed(threading.Thread):
    def __init__(self, url: str, headers: dict):
        super().__init__(daemon=True)
        self.url, self.headers = url, headers
        self.results: list[tuple[float, dict]] = []  # (receive time, message)
        self.running = True

    def run(self):
        while self.running:
            try:
                with connect(self.url, additional_headers=self.headers) as ws:
                    while self.running:
                        try:
                            msg = json.loads(ws.recv(timeout=1))
                        except TimeoutError:
                            continue
                        if msg["type"] == "result" and (
                            not self.results or msg["frame"] > self.results[-1][1]["frame"]
                        ):
                            self.results.append((time.monotonic(), msg))
            except Exception:
                time.sleep(0.1)

    def first_after(self, t0: float, frame_after: int = -1, timeout: float = 120) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, m in self.results:
                if t >= t0 and m["frame"] > frame_after:
                    return t - t0
            time.sleep(0.02)
        return None


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else float("nan")


def bench_relay(
    clip: Path, detector: str, duration: float, cut: float, queue_frames: int, protocol: str = "rtmp"
) -> dict:
    with tempfile.TemporaryDirectory(prefix="publish-bench-") as tmp:
        port = free_port()
        proc, base = start_server(Path(tmp), detector, queue_frames, {f"{protocol}_port": port})
        try:
            token = device_token(f"http://{base}", login(f"http://{base}", *ADMIN), "BENCH-DRONE", "drone")
            auth = {"Authorization": f"Bearer {token}"}
            url = (
                f"rtmp://127.0.0.1:{port}/live/{token}"
                if protocol == "rtmp"
                else f"srt://127.0.0.1:{port}?streamid={token}"
            )
            t_pub = time.monotonic()
            pub = ffmpeg_live(clip, url)
            sid = None
            while sid is None and time.monotonic() - t_pub < 60:
                streams = httpx.get(f"http://{base}/api/streams", headers=auth).json()
                sid = streams[0]["id"] if streams else None
                time.sleep(0.05)
            if sid is None:
                raise SystemExit("the publish stream never appeared")
            feed = Feed(f"ws://{base}/api/streams/{sid}/feed", auth)
            feed.start()
            first = feed.first_after(t_pub)
            if first is None:  # found by mypy: used to end in a TypeError below
                raise SystemExit("no live result within 120 s of starting the publisher")
            time.sleep(duration)
            s1 = httpx.get(f"http://{base}/api/streams/{sid}", headers=auth).json()
            fps1 = s1["processed"] / (time.monotonic() - t_pub - first)
            pub.kill()
            pub.wait()
            last_frame = feed.results[-1][1]["frame"]
            time.sleep(cut)
            t_back = time.monotonic()
            pub = ffmpeg_live(clip, url)
            recovery = feed.first_after(t_back, last_frame)
            time.sleep(duration)
            s2 = httpx.get(f"http://{base}/api/streams/{sid}", headers=auth).json()
            pub.kill()
            pub.wait()
            feed.running = False
            lat = [m["latency_ms"] for _, m in feed.results if m["latency_ms"] is not None]
            return {
                "publish_to_first_result_s": first,
                "recovery_s": recovery,
                "latency_p50_ms": pct(lat, 50),
                "latency_p95_ms": pct(lat, 95),
                "received": s2["received"],
                "processed": s2["processed"],
                "dropped": s2["dropped"],
                "drop_rate": s2["dropped"] / max(s2["received"], 1),
                "lost": s2["lost"],
                "processed_fps_phase1": fps1,
                "gaps": s2["gaps"],
                "runs": len({m["run_id"] for _, m in feed.results}),
            }
        finally:
            stop(proc, 40)


def check_ffmpeg_listener(clip: Path) -> dict:
    """PyAV/FFmpeg as the RTMP server: does it check the stream key, does it take a second publisher?"""
    import av

    port = free_port()
    got: dict = {}

    def listen():
        try:
            c = av.open(f"rtmp://127.0.0.1:{port}/live/GOOD-KEY", options={"listen": "1"}, timeout=(15, 5))
            got["frames"] = sum(1 for _ in zip(range(25), c.decode(video=0)))
            c.close()
        except Exception as exc:
            got["error"] = str(exc)[:100]

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    time.sleep(1.0)
    wrong = ffmpeg_live(clip, f"rtmp://127.0.0.1:{port}/live/WRONG-KEY")
    time.sleep(1.5)
    second = ffmpeg_live(clip, f"rtmp://127.0.0.1:{port}/live/GOOD-KEY")
    try:
        second_exit = second.wait(10)
    except subprocess.TimeoutExpired:
        second_exit = None
        second.kill()
    t.join(10)
    wrong.kill()
    wrong.wait()
    return {
        "wrong_key_accepted": got.get("frames", 0) > 0,
        "second_publisher_refused": second_exit not in (0, None),
        "listener_error": got.get("error"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", type=Path, default=DEFAULT_CLIP)
    ap.add_argument("--detector", choices=("coco", "fake"), default="coco")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds published before and after the cut")
    ap.add_argument("--cut", type=float, default=30.0, help="seconds without a publisher")
    ap.add_argument("--queue-frames", type=int, default=4)
    ap.add_argument("--protocol", choices=("rtmp", "srt"), default="rtmp", help="how the device publishes")
    args = ap.parse_args()
    if not args.clip.is_file():
        raise SystemExit(f"{args.clip}: clip not found (set AIRPATROL_SHARED or --clip)")
    r = bench_relay(args.clip, args.detector, args.duration, args.cut, args.queue_frames, args.protocol)
    print(
        f"{args.protocol.upper()} publish, clip {args.clip.name}, detector {args.detector}, {args.duration:.0f} s published, cut {args.cut:.0f} s, "
        f"{args.duration:.0f} s published again"
    )
    print(f"publish -> first result: {r['publish_to_first_result_s']:.2f} s")
    print(f"latency (arrival -> result) p50 / p95: {r['latency_p50_ms']:.0f} / {r['latency_p95_ms']:.0f} ms")
    print(
        f"processed {r['processed']} of {r['received']} received frames ({r['processed_fps_phase1']:.2f} fps in the "
        f"first phase); dropped {r['dropped']} (drop rate {100 * r['drop_rate']:.1f} %); lost to damage {r['lost']}"
    )
    recovery = "none within 120 s" if r["recovery_s"] is None else f"{r['recovery_s']:.2f} s"
    print(f"recovery after the cut (publisher back -> first new result): {recovery}")
    print(f"gaps recorded: {r['gaps']}; runs seen on the feed: {r['runs']}")
    if args.protocol != "rtmp":
        return
    lst = check_ffmpeg_listener(args.clip)
    print(
        f"FFmpeg RTMP listener (PyAV listen=1): wrong stream key accepted: {lst['wrong_key_accepted']}; "
        f"second publisher on the port refused: {lst['second_publisher_refused']}"
        + (f"; listener error: {lst['listener_error']}" if lst["listener_error"] else "")
    )


if __name__ == "__main__":
    main()
