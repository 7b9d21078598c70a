"""Live-stream benchmark of `airpatrol serve`: N devices push JPEG frames at a fixed rate for a bounded time.

The server runs as its own process (`airpatrol serve`, as deployed); per stream one client pushes frames over the
push WebSocket in real time and one reads the live feed. Measured per run:

* sustained processed fps (results received in the measuring window / window length), per stream and in total;
* dropped frames (the service drops the oldest queued frames when it falls behind) in the window;
* frame-to-result latency p50 / p95: from the client sending a frame to the client receiving its result
  (network, JPEG decode, queueing, pipeline, feed);
* server memory over time (psutil; PSS summed over the server and its stream processes), and the CPU it got
  (cores), its stream processes included.

``--process-per-stream on|off|both`` sets ``service.process_per_stream`` (``both``: each stream count with a process
per stream and then with all streams as threads of the server process); ``--repeat K`` runs every configuration K
times (on a shared machine one run is one sample).

Usage (real detector, default drone footage from ../shared):
    python bench/stream_bench.py --streams 1 2 --duration 30 --fps 25 --detector coco
``--detector fake`` swaps in a trivial detector (the service and the rest of the pipeline are measured).
``--overhead 60`` instead measures, in one process, what a stream worker adds to the pipeline's own time per frame.
``--telemetry`` sends a fixed oblique camera pose with every frame (the scale then comes from telemetry; without it
from the vehicles' sizes and the horizon search). ``--server-repo DIR`` runs the server from another checkout of the
project (a before/after comparison on the same machine, e.g. ``git archive`` of the older commit into a folder).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import psutil
from websockets.sync.client import connect

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # appended: a PYTHONPATH checkout (--frame-latency before/after runs) stays first
from bench.serving import login, start_serve, stop  # noqa: E402

SHARED = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared"))
DEFAULT_CLIP = SHARED / "data/real_video/nadir_interchange/drone.mp4"
COCO = SHARED / "models/yolov8n_coco_int8/yolov8n_int8.onnx"
ADMIN = ("bench-admin", "bench-password-123")


def load_frames(clip: Path, width: int, limit: int) -> list[bytes]:
    """The clip as JPEGs (encoded once, like a ground station would), scaled to ``width``."""
    from vision.source import VideoFileSource

    out = []
    with VideoFileSource(clip, max_frames=limit) as src:
        for f in src:
            img = f.image
            if img.shape[1] != width:
                img = cv2.resize(
                    img, (width, int(round(img.shape[0] * width / img.shape[1]))), interpolation=cv2.INTER_AREA
                )
            out.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes())
    return out


# An oblique camera pose (35 degrees below the horizon, 80 m up) sent with every frame by ``--telemetry``.
OBLIQUE_TELEMETRY = {
    "lat": 48.1,
    "lon": 11.5,
    "rel_alt_m": 80.0,
    "heading_deg": 0.0,
    "gimbal_pitch_deg": -35.0,
    "focal_len_mm": 24.0,
}


def start_server(
    workdir: Path,
    detector: str,
    queue_frames: int,
    service_extra: dict | None = None,
    server_repo: Path = REPO,
) -> tuple[subprocess.Popen, str]:
    pipeline: dict[str, Any] = {"device": "cpu", "road": {"enabled": False}}
    service = {
        "bootstrap_admin": ADMIN[0],
        "bootstrap_admin_password": ADMIN[1],
        "job_workers": 0,
        "queue_frames": queue_frames,
        "secret_key": "bench-secret-key-0123456789",
    }
    if detector == "coco":
        if not COCO.is_file():
            raise SystemExit(f"{COCO}: COCO model not found (set AIRPATROL_SHARED or use --detector fake)")
        pipeline["detector"] = {"weights": str(COCO)}
    else:
        service["pipeline_factory"] = "stream_bench:fake_pipeline"
    service.update(service_extra or {})
    config = {
        "database_url": f"sqlite:///{workdir / 'bench.db'}",
        "data_dir": str(workdir / "data"),
        "pipeline": pipeline,
        "service": service,
    }
    # the pipeline factory (stream_bench:fake_pipeline) comes from this script's folder, the rest from server_repo
    proc, port = start_serve(workdir, config, [server_repo, REPO / "bench"])
    return proc, f"127.0.0.1:{port}"


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    """The server and its stream processes (``service.process_per_stream``), the fork server too."""
    return [proc, *proc.children(recursive=True)]


def tree_cpu_s(proc: psutil.Process) -> float:
    """CPU seconds (user + system) of the server's process tree so far (processes alive now)."""
    total = 0.0
    for p in _tree(proc):
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def tree_rss_mib(proc: psutil.Process) -> float:
    """Memory of the server's process tree: the sum of their proportional set sizes (PSS: a page shared by k
    processes - the fork server's imported modules in its stream processes - counts 1/k in each), RSS where the
    system has no PSS."""
    total = 0
    for p in _tree(proc):
        try:
            try:
                total += getattr(p.memory_full_info(), "pss", None) or p.memory_info().rss
            except psutil.AccessDenied:
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def fake_pipeline(config):
    """A pipeline whose detector finds nothing: measures the service and the non-detector stages."""
    from tracking.pipeline import Pipeline
    from vision.types import Detections

    class NoDetector:
        weights, tiles_run, tiling_active = "bench:none", 0, False

        def reset(self):
            pass

        def detect(self, image, road_mask=None, tiling=None):
            return Detections()

    return Pipeline(config, detector=NoDetector())  # a stand-in with the detector interface


class StreamClient:
    """One device: pushes frames at ``fps`` and records when each result comes back."""

    def __init__(self, base: str, auth: dict, frames: list[bytes], fps: float, telemetry: dict | None = None):
        self.base, self.auth, self.frames, self.fps, self.telemetry = base, auth, frames, fps, telemetry
        r = httpx.post(f"http://{base}/api/streams", headers=auth, json={"kind": "push", "name": "bench"})
        r.raise_for_status()
        self.id = r.json()["id"]
        self.sent: dict[int, float] = {}
        self.results: list[tuple[float, int, float]] = []  # (receive time, frame, latency s)
        self.stop = threading.Event()
        self.first_result = threading.Event()
        self._threads = [
            threading.Thread(target=self._feed, daemon=True),
            threading.Thread(target=self._push, daemon=True),
        ]

    def start(self):
        self._threads[0].start()
        time.sleep(0.2)  # feed subscribed before the first frame
        self._threads[1].start()

    def _push(self):
        with connect(
            f"ws://{self.base}/api/streams/{self.id}/push", additional_headers=self.auth, max_size=None, ping_timeout=60
        ) as ws:
            ws.send(json.dumps({"type": "hello", "fps": self.fps}))
            t0, i = time.perf_counter(), 0
            while not self.stop.is_set():
                header: dict[str, Any] = {"type": "frame", "t": i / self.fps}
                if self.telemetry is not None:
                    header["telemetry"] = self.telemetry
                ws.send(json.dumps(header))
                self.sent[i] = time.perf_counter()
                ws.send(self.frames[i % len(self.frames)])
                i += 1
                delay = t0 + i / self.fps - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            ws.send(json.dumps({"type": "end"}))
            try:
                while True:
                    ws.recv(timeout=30)
            except Exception:
                pass

    def _feed(self):
        with connect(
            f"ws://{self.base}/api/streams/{self.id}/feed", additional_headers=self.auth, max_size=None, ping_timeout=60
        ) as ws:
            while True:
                try:
                    msg = json.loads(ws.recv(timeout=60))
                except Exception:
                    return
                now = time.perf_counter()
                if msg["type"] == "result" and msg["frame"] in self.sent:
                    self.results.append((now, msg["frame"], now - self.sent[msg["frame"]]))
                    self.first_result.set()
                elif msg["type"] == "status" and msg["state"] in ("finished", "failed"):
                    return

    def status(self) -> dict:
        return httpx.get(f"http://{self.base}/api/streams/{self.id}", headers=self.auth, timeout=30).json()

    def join(self):
        for t in self._threads:
            t.join(90)


def run(
    n: int,
    frames: list[bytes],
    fps: float,
    duration: float,
    detector: str,
    queue_frames: int,
    telemetry: dict | None = None,
    server_repo: Path = REPO,
    process_per_stream: bool | None = None,
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        extra = None if process_per_stream is None else {"process_per_stream": process_per_stream}
        proc, base = start_server(Path(tmp), detector, queue_frames, extra, server_repo=server_repo)
        server = psutil.Process(proc.pid)
        try:
            auth = login(f"http://{base}", *ADMIN)
            clients = [StreamClient(base, auth, frames, fps, telemetry) for _ in range(n)]
            for c in clients:
                c.start()
            for c in clients:  # model loading and warm-up are not measured
                if not c.first_result.wait(180):
                    raise SystemExit(f"stream {c.id}: no result within 180 s: {c.status()}")
            time.sleep(2.0)
            before = [c.status() for c in clients]
            cpu0, main0, bench0 = tree_cpu_s(server), _cpu_s(server), _cpu_s(psutil.Process())
            t_start, rss = time.perf_counter(), []
            while (elapsed := time.perf_counter() - t_start) < duration:
                rss.append((elapsed, tree_rss_mib(server)))
                time.sleep(1.0)
            t_end = time.perf_counter()
            cpu1, main1, bench1 = tree_cpu_s(server), _cpu_s(server), _cpu_s(psutil.Process())
            after = [c.status() for c in clients]
            for c in clients:
                c.stop.set()
            for c in clients:
                c.join()
        finally:
            stop(proc)  # graceful: the runs are completed
    window = t_end - t_start
    lat = [r[2] * 1000 for c in clients for r in c.results if t_start <= r[0] <= t_end]
    per_stream = [sum(1 for r in c.results if t_start <= r[0] <= t_end) / window for c in clients]
    return {
        "streams": n,
        "window_s": round(window, 1),
        "sent_fps_per_stream": round(sum(a["received"] - b["received"] for a, b in zip(after, before)) / n / window, 2),
        "processed_fps_per_stream": [round(x, 2) for x in per_stream],
        "processed_fps_total": round(sum(per_stream), 2),
        "dropped": sum(a["dropped"] - b["dropped"] for a, b in zip(after, before)),
        "received": sum(a["received"] - b["received"] for a, b in zip(after, before)),
        "latency_ms_p50": round(statistics.median(lat), 1) if lat else None,
        "latency_ms_p95": round(float(np.percentile(lat, 95)), 1) if lat else None,
        "latency_ms_max": round(max(lat), 1) if lat else None,
        "memory_pss_mib": [(round(t), round(m)) for t, m in rss[:: max(1, len(rss) // 6)]]
        + [(round(rss[-1][0]), round(rss[-1][1]))],
        # CPU the server and its stream processes actually got (cores): on a shared machine, what they were given,
        # not what they wanted
        "server_cpu_cores": round((cpu1 - cpu0) / window, 2),
        # of which the service process itself (receiving the pushed frames, relaying the feeds); the rest is the
        # stream processes (and the fork server). The bench's own clients (pushing, reading the feeds): beside it
        "service_process_cpu_cores": round((main1 - main0) / window, 2),
        "bench_clients_cpu_cores": round((bench1 - bench0) / window, 2),
        "process_per_stream": process_per_stream,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }


def in_process_pipeline(detector: str):
    """The pipeline settings of the in-process measures (CPU, road layer off) and a factory of that pipeline."""
    from tracking.config import PipelineConfig
    from tracking.pipeline import Pipeline

    pipeline: dict[str, Any] = {"device": "cpu", "road": {"enabled": False}}
    if detector == "coco":
        pipeline["detector"] = {"weights": str(COCO)}
    config = PipelineConfig(**pipeline)
    return pipeline, (lambda: fake_pipeline(config)) if detector == "fake" else (lambda: Pipeline(config))


def service_overhead(frames: list[bytes], detector: str) -> dict:
    """In one process, no network: ms per frame of the pipeline alone, and through a stream worker (JPEG decode,
    queue, result JSON, metrics) without and with database writes. Each frame waits for the previous result, so
    nothing is dropped."""
    import functools

    from edge.config import load_settings
    from edge.service.context import ServiceContext
    from edge.service.metrics import ServiceMetrics
    from edge.service.push import decode_jpeg
    from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps
    from vision.types import Frame

    pipeline, make = in_process_pipeline(detector)
    out = {}
    pipe = make()
    h, w = decode_jpeg(frames[0]).shape[:2]
    pipe.reset(w, h, 25.0)
    pipe.step(Frame(0, 0.0, decode_jpeg(frames[0])))  # warm-up
    t0 = time.perf_counter()
    for i, jpg in enumerate(frames[1:], 1):
        pipe.step(Frame(i, i / 25, decode_jpeg(jpg)))
    out["pipeline_alone_ms"] = round(1000 * (time.perf_counter() - t0) / (len(frames) - 1), 1)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(None, {"data_dir": tmp, "database_url": f"sqlite:///{tmp}/o.db", "pipeline": pipeline})
        ctx = ServiceContext(settings, lambda c: make())
        for label, sessions in (("worker_ms", None), ("worker_with_db_ms", ctx.sessions)):
            worker = StreamWorker(
                StreamSpec(1, "overhead", "push", None, None, 50.0, None),
                WorkerDeps(settings.service, make, sessions, ServiceMetrics()),
            )
            worker.start()
            worker.attach_pusher(object())
            worker.push_frame(functools.partial(decode_jpeg, frames[0]), 0.0, None, time.perf_counter())
            while worker.frames_processed < 1:  # warm-up: pipeline built, run opened
                time.sleep(0.001)
            t0 = time.perf_counter()
            for i, jpg in enumerate(frames[1:], 1):
                worker.push_frame(functools.partial(decode_jpeg, jpg), i / 25, None, time.perf_counter())
                while worker.frames_processed < i + 1:
                    time.sleep(0.0005)
            out[label] = round(1000 * (time.perf_counter() - t0) / (len(frames) - 1), 1)
            assert worker.latest is not None  # frames were processed
            out["tracks_per_frame"] = len(worker.latest.tracks)
            worker.stop()
        ctx.close()
    return out


def frame_latency(frames: list[bytes], detector: str, telemetry: dict | None, fps: float = 25.0) -> dict:
    """In one process, no network: a push stream's frames through a stream worker one at a time (each pushed when
    the previous result is out, so nothing queues), the latency of each from push to result. Without the queueing of
    a real-time stream on a busy machine this is the frame path's own latency, spikes included (the horizon search
    runs on the frames of a stream without telemetry). Frames 0-4 (model warm-up) are not counted."""
    import functools

    from edge.config import load_settings
    from edge.service.metrics import ServiceMetrics
    from edge.service.push import FrameMsg, decode_jpeg
    from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps

    pipeline, make = in_process_pipeline(detector)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(None, {"data_dir": tmp, "database_url": f"sqlite:///{tmp}/o.db", "pipeline": pipeline})
        worker = StreamWorker(
            StreamSpec(1, "latency", "push", None, None, fps, None),
            WorkerDeps(settings.service, make, None, ServiceMetrics()),
        )
        worker.start()
        worker.attach_pusher(object())
        # the CPU time of the worker's own thread per frame: what the frame path costs, whatever else runs on the
        # machine (the wall-clock latency also holds the waits for a core; background threads are not in it)
        assert worker._thread.ident is not None  # started above
        frame_path = time.pthread_getcpuclockid(worker._thread.ident)
        latencies, frame_cpu, cpu0 = [], [], time.process_time()
        for i, jpg in enumerate(frames):
            t = i / fps
            msg = FrameMsg.model_validate({"type": "frame", "t": t, "telemetry": telemetry})
            c0, sent = time.clock_gettime(frame_path), time.perf_counter()
            worker.push_frame(functools.partial(decode_jpeg, jpg), t, msg.pose(t), sent)
            while worker.frames_processed < i + 1:
                time.sleep(0.0005)
            latencies.append(1000 * (time.perf_counter() - sent))
            frame_cpu.append(1000 * (time.clock_gettime(frame_path) - c0))
        cpu_ms = 1000 * (time.process_time() - cpu0) / len(frames)
        tracks = len(worker.latest.tracks) if worker.latest is not None else 0
        worker.stop()
    lat, cpu = latencies[5:], frame_cpu[5:]
    return {
        "frames": len(lat),
        "telemetry": telemetry is not None,
        "latency_ms_p50": round(statistics.median(lat), 1),
        "latency_ms_p95": round(float(np.percentile(lat, 95)), 1),
        "latency_ms_max": round(max(lat), 1),
        "frame_path_cpu_ms_p50": round(statistics.median(cpu), 1),
        "frame_path_cpu_ms_p95": round(float(np.percentile(cpu, 95)), 1),
        "process_cpu_ms_per_frame": round(cpu_ms, 1),
        "tracks_last_frame": tracks,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }


def code_tree() -> Path:
    """The checkout whose code this process imports (PYTHONPATH decides: ``--frame-latency`` before/after runs)."""
    import edge

    return Path(edge.__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 2], help="concurrent streams, one run each")
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--duration", type=float, default=30.0, help="measured seconds per run (after warm-up)")
    ap.add_argument("--detector", choices=("coco", "fake"), default="coco")
    ap.add_argument("--clip", type=Path, default=DEFAULT_CLIP)
    ap.add_argument("--width", type=int, default=960, help="frames are scaled to this width before JPEG encoding")
    ap.add_argument("--queue-frames", type=int, default=4, help="service.queue_frames (the service default is 4)")
    ap.add_argument(
        "--overhead",
        type=int,
        default=0,
        metavar="FRAMES",
        help="instead: the service's own cost per frame, in-process, over this many frames",
    )
    ap.add_argument(
        "--frame-latency",
        type=int,
        default=0,
        metavar="FRAMES",
        help="instead: per-frame latency of a push stream through a stream worker, in-process, over this many frames",
    )
    ap.add_argument(
        "--process-per-stream",
        choices=("default", "on", "off", "both"),
        default="default",
        help="service.process_per_stream for the server (both: each run with on, then off); default: the service's",
    )
    ap.add_argument("--repeat", type=int, default=1, help="run each configuration this many times")
    ap.add_argument("--telemetry", action="store_true", help="send a fixed oblique camera pose with every frame")
    ap.add_argument("--server-repo", type=Path, default=REPO, help="the project checkout the server runs from")
    args = ap.parse_args()
    if not (args.server_repo / "edge" / "cli.py").is_file():
        raise SystemExit(f"{args.server_repo}: not an AirPatrol checkout (no edge/cli.py)")
    if not args.clip.is_file():
        raise SystemExit(f"{args.clip}: clip not found (use --clip or set AIRPATROL_SHARED)")
    frames = load_frames(args.clip, args.width, 250)
    first = cv2.imdecode(np.frombuffer(frames[0], np.uint8), cv2.IMREAD_COLOR)
    assert first is not None  # encoded by load_frames
    h, w = first.shape[:2]
    print(
        f"clip {args.clip.name}: {len(frames)} frames {w}x{h} JPEG ~{statistics.mean(map(len, frames)) / 1024:.0f} KiB, "
        f"{args.fps:g} fps per stream, detector {args.detector}, queue {args.queue_frames}, "
        f"telemetry {'oblique pose' if args.telemetry else 'none'}, "
        + (f"code from {code_tree()}, " if args.frame_latency or args.overhead else f"server from {args.server_repo}, ")
        + f"{psutil.cpu_count()} CPUs"
    )
    if args.overhead:
        r = service_overhead(frames[: args.overhead + 1], args.detector)
        print(json.dumps(r))
        print(
            f"pipeline alone {r['pipeline_alone_ms']} ms/frame; through a stream worker {r['worker_ms']} ms, with "
            f"database writes {r['worker_with_db_ms']} ms ({r['tracks_per_frame']} tracks in the last frame)"
        )
        return
    if args.frame_latency:
        r = frame_latency(frames[: args.frame_latency], args.detector, OBLIQUE_TELEMETRY if args.telemetry else None)
        print(json.dumps(r))
        print(
            f"frame latency over {r['frames']} frames (telemetry: {r['telemetry']}): p50 {r['latency_ms_p50']} ms, "
            f"p95 {r['latency_ms_p95']} ms, max {r['latency_ms_max']} ms; the worker thread's CPU per frame p50 "
            f"{r['frame_path_cpu_ms_p50']} ms, p95 {r['frame_path_cpu_ms_p95']} ms; process CPU "
            f"{r['process_cpu_ms_per_frame']} ms/frame (load average {r['load_average_1min']})",
            flush=True,
        )
        return
    choices: dict[str, list[bool | None]] = {"default": [None], "on": [True], "off": [False], "both": [True, False]}
    modes = choices[args.process_per_stream]
    runs = [(n, mode) for _ in range(args.repeat) for mode in modes for n in args.streams]
    for n, mode in runs:
        telemetry = OBLIQUE_TELEMETRY if args.telemetry else None
        r = run(n, frames, args.fps, args.duration, args.detector, args.queue_frames, telemetry, args.server_repo, mode)
        print(json.dumps(r))
        shown = {None: "", True: " (a process per stream)", False: " (streams as threads of one process)"}[mode]
        print(
            f"N={n}{shown}: processed {r['processed_fps_total']} fps total ({', '.join(map(str, r['processed_fps_per_stream']))} "
            f"per stream) of {r['sent_fps_per_stream']} fps sent per stream; dropped {r['dropped']} of {r['received']} "
            f"frames; latency p50 {r['latency_ms_p50']} ms, p95 {r['latency_ms_p95']} ms; "
            f"server memory (PSS) MiB over time {r['memory_pss_mib']}; server CPU {r['server_cpu_cores']} cores "
            f"(load average {r['load_average_1min']})",
            flush=True,
        )


if __name__ == "__main__":
    main()
